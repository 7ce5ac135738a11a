// kvstore/kv_access.h — how the forward pass reaches the KV cache (docs/architecture.md, rule 3).
//
// The model never owns KV bytes or knows their dtype. For each layer it hands the cache the float
// K (post-RoPE) and V rows of the step's new positions, and the cache encodes them with the codec
// of its dtype (kvquant); to attend it asks for a paged view of a layer, which the kernels
// dequantize on the fly. Implementation: PagedKvCache (block tables from kvmeta over KvStore
// bytes); eviction and offload tiers plug in behind the same calls.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"
#include "kvpolicy/sparse_selection.h"

namespace kvforge::kvstore {

// Slots [begin, end) of one layer of a sequence that hold nothing live (empty: begin == end).
struct SlotRange {
  int64_t begin = 0;
  int64_t end = 0;
};

class KvAccess {
 public:
  virtual ~KvAccess() = default;
  // Stores K and V of n tokens at RoPE positions pos0 .. pos0 + n - 1 of sequence `seq` in
  // `layer`, into KV slots slot0 .. slot0 + n - 1 (slots are positions until a policy evicts):
  // k and v hold n rows of n_kv_head x head_dim floats, `stride` floats apart. The slots must
  // exist. A latent cache (MLA) stores only k, the latent rows; v is ignored and may be null.
  virtual void WriteAt(int32_t layer, int64_t seq, int64_t slot0, int64_t pos0, int64_t n,
                       const float* k, const float* v, int64_t stride) = 0;
  // The common case: slot == position.
  void Write(int32_t layer, int64_t seq, int64_t pos0, int64_t n, const float* k, const float* v,
             int64_t stride) {
    WriteAt(layer, seq, pos0, pos0, n, k, v, stride);
  }
  // Slots of `layer`'s KV head `kv_head` that attention must skip (a per-layer or per-head
  // budget smaller than the table).
  virtual SlotRange DeadSlots(int32_t /*layer*/, int64_t /*seq*/, int32_t /*kv_head*/) const {
    return {};
  }
  // Per-block key summaries of `layer` for sparse decode (base nullptr: none kept).
  virtual kvpolicy::BlockKeySummaries KeySummaries(int32_t /*layer*/) const { return {}; }
  virtual kernels::KvPageView KeyView(int32_t layer, int64_t seq) const = 0;
  virtual kernels::KvPageView ValueView(int32_t layer, int64_t seq) const = 0;
};

}  // namespace kvforge::kvstore
