// token_parallel.h — per-token work (norms, RoPE, residual adds) spread over the thread pool.
//
// A prefill step carries hundreds of tokens, and on 2 cores every serial loop between two
// matmuls costs its full time against half of the matmuls' (Amdahl): the norms, RoPE and
// residual adds of pp512 were ~5% of one core's time. A decode step has a few tokens, where
// waking the workers costs more than the work, so small batches run inline.
#pragma once

#include <cstdint>

#include "kernels/thread_pool.h"

namespace kvforge::model {

inline constexpr int64_t kParallelTokensMin = 8;

// fn(i) for every token i in [0, n), each exactly once; fn must be safe to call concurrently
// for different tokens.
template <class Fn>
void ForEachToken(kernels::ThreadPool& pool, int64_t n, const Fn& fn) {
  if (n < kParallelTokensMin || pool.num_threads() <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  pool.ParallelFor(n, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) fn(i);
  });
}

}  // namespace kvforge::model
