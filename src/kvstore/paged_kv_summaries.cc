// PagedKvCache's block key summaries for sparse decode (Quest, NSA; kvpolicy/sparse_selection.h):
// per block, layer and KV head the channel-wise min, max and sum of the post-RoPE keys written.
#include <algorithm>
#include <cstring>

#include "kvstore/paged_kv_cache.h"

namespace kvforge::kvstore {

float* PagedKvCache::SummaryOf(int32_t layer, int32_t block, int32_t kvh) {
  const KvStoreConfig& sc = store_->config();
  return summaries_.data() + ((static_cast<size_t>(layer) * static_cast<size_t>(sc.num_blocks) +
                               static_cast<size_t>(block)) *
                                  static_cast<size_t>(sc.n_kv_head) +
                              static_cast<size_t>(kvh)) *
                                 3 * static_cast<size_t>(sc.head_dim);
}

kvpolicy::BlockKeySummaries PagedKvCache::KeySummaries(int32_t layer) const {
  if (summaries_.empty()) return {};
  const KvStoreConfig& sc = store_->config();
  kvpolicy::BlockKeySummaries v;
  v.base = summaries_.data() + static_cast<size_t>(layer) * static_cast<size_t>(sc.num_blocks) *
                                   static_cast<size_t>(sc.n_kv_head) * 3 *
                                   static_cast<size_t>(sc.head_dim);
  v.n_kv_head = sc.n_kv_head;
  v.head_dim = sc.head_dim;
  return v;
}

void PagedKvCache::UpdateKeySummaries(int32_t layer, const std::vector<int32_t>& table,
                                      int64_t slot0, int64_t n, const float* k, int64_t stride) {
  const KvStoreConfig& sc = store_->config();
  const int32_t bt = block_tokens(), hd = sc.head_dim;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t slot = slot0 + i;
    const int32_t block = table[static_cast<size_t>(slot / bt)];
    const bool first = slot % bt == 0;  // a block is written from its first slot on
    for (int32_t h = 0; h < sc.n_kv_head; ++h) {
      float* s = SummaryOf(layer, block, h);
      const float* x = k + i * stride + static_cast<int64_t>(h) * hd;
      for (int32_t d = 0; d < hd; ++d) {
        if (first) {
          s[d] = s[hd + d] = s[2 * hd + d] = x[d];
        } else {
          s[d] = std::min(s[d], x[d]);
          s[hd + d] = std::max(s[hd + d], x[d]);
          s[2 * hd + d] += x[d];
        }
      }
    }
  }
}

void PagedKvCache::CopyKeySummaries(int32_t src, int32_t dst) {
  if (summaries_.empty()) return;
  const KvStoreConfig& sc = store_->config();
  const size_t per_block = static_cast<size_t>(sc.n_kv_head) * 3 * static_cast<size_t>(sc.head_dim);
  for (int32_t l = 0; l < sc.n_layer; ++l)
    std::memcpy(SummaryOf(l, dst, 0), SummaryOf(l, src, 0), per_block * sizeof(float));
}

void PagedKvCache::RebuildKeySummaries(int64_t seq) {
  if (summaries_.empty() || !Contains(seq)) return;
  const KvStoreConfig& sc = store_->config();
  const int64_t n = NumTokens(seq);
  const int64_t values = static_cast<int64_t>(sc.n_kv_head) * sc.head_dim;
  std::vector<float> rows(static_cast<size_t>(n * values));
  for (int32_t l = 0; l < sc.n_layer; ++l) {
    const kernels::KvPageView v = KeyView(l, seq);  // decoded as attention reads them
    for (int64_t p = 0; p < n; ++p) kernels::DecodeKvRow(v, p, rows.data() + p * values);
    UpdateKeySummaries(l, Table(seq), 0, n, rows.data(), values);
  }
}

}  // namespace kvforge::kvstore
