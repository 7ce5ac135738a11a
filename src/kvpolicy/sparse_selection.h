// kvpolicy/sparse_selection.h — which KV blocks a sparse-decode query reads (Quest, training-free
// NSA; kv-methods.md B6/B7), as pure functions of the query and per-block key summaries. The
// cache keeps the summaries (kvstore), the forward pass reads only the chosen blocks.
#pragma once

#include <cstdint>
#include <vector>

#include "kvforge/kv_policy.h"

namespace kvforge::kvpolicy {

// Per physical block and KV head: the channel-wise min, max and sum of the block's post-RoPE keys,
//   base[((block * n_kv_head + kvh) * 3 + {0 min, 1 max, 2 sum}) * head_dim + d]
// (one layer's view). base == nullptr: the cache keeps none.
struct BlockKeySummaries {
  const float* base = nullptr;
  int32_t n_kv_head = 0;
  int32_t head_dim = 0;
  const float* Of(int32_t block, int32_t kvh) const {
    return base + (static_cast<size_t>(block) * n_kv_head + kvh) * 3 * head_dim;
  }
};

// What a sparse decode step reads, resolved from a policy and the cache's block size.
struct SparseDecode {
  KvPolicyKind kind = KvPolicyKind::kNone;  // kQuest or kNsa
  int64_t pick_blocks = 0;                  // quest: blocks read (the newest included)
  int32_t unit_blocks = 1;                  // nsa: KV blocks per 64-token selection block
  int64_t pick_units = 0;     // nsa: selection blocks (the first and the two newest included)
  int64_t window_blocks = 0;  // nsa: KV blocks covering the sliding window
  int32_t dense_layers = 0;   // quest: the first layers attend densely (2)
};
// For a policy and block size; kind kNone when `p` is not a sparse method.
SparseDecode SparseDecodeFor(const KvPolicy& p, int64_t budget_tokens, int32_t block_tokens);
bool IsSparse(KvPolicyKind kind);

// Quest's upper bound of q . k over a block, summed over the `group` query heads q[group][hd]:
// sum_g sum_i max(q_gi min_i, q_gi max_i).
float QuestBound(const float* q, int32_t group, int32_t head_dim, const float* summary);

// Logical blocks (ascending) that a decode query of KV head `kvh` reads, out of `n_logical`
// blocks of the sequence (the last holds the query); `table` maps logical to physical blocks;
// `q` holds the group's query heads [group][head_dim]; `scale` is attention's 1/sqrt(d).
std::vector<int32_t> SelectDecodeBlocks(const SparseDecode& plan, const float* q, int32_t group,
                                        int32_t head_dim, float scale,
                                        const BlockKeySummaries& sums, int32_t kvh,
                                        const int32_t* table, int64_t n_logical,
                                        int64_t tokens_in_last, int32_t block_tokens);

}  // namespace kvforge::kvpolicy
