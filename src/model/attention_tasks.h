// attention_tasks.h — the attention step every family shares: tasks of (sequence, KV head, query
// chunk) run over the thread pool, with policy observers and sparse decode (internal to the model
// module; the families' forward files call it with their own query and view shapes).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernels.h"
#include "kvstore/kv_access.h"
#include "model/model.h"

namespace kvforge::model {

struct AttentionJob {
  int32_t layer = 0;
  // q: [n_tokens][n_head][head_dim] rows q_stride apart; out: [n_tokens][n_head][v_dim] rows
  // out_stride apart (token indices of the batch).
  const float* q = nullptr;
  int64_t q_stride = 0;
  float* out = nullptr;
  int64_t out_stride = 0;
  int32_t n_head = 0, n_kv_head = 0, head_dim = 0, v_dim = 0;
  float scale = 1.0f;
  // Which of the batch's sequences take part (empty: all).
  std::vector<size_t> seqs;
  // Per batch sequence, views to read instead of the cache's (MLA's decompressed heads); empty:
  // the cache's KeyView / ValueView.
  std::vector<kernels::KvPageView> k_views, v_views;
};

void RunAttentionTasks(const Batch& batch, const AttentionJob& job, kvstore::KvAccess& kv,
                       Workspace& ws, kernels::ThreadPool& pool);

}  // namespace kvforge::model
