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

namespace kvforge::kvstore {

class KvAccess {
 public:
  virtual ~KvAccess() = default;
  // Stores K and V of positions pos0 .. pos0 + n - 1 of sequence `seq` in `layer`: k and v hold
  // n rows of n_kv_head x head_dim floats, `stride` floats apart. The slots must exist.
  virtual void Write(int32_t layer, int64_t seq, int64_t pos0, int64_t n, const float* k,
                     const float* v, int64_t stride) = 0;
  virtual kernels::KvPageView KeyView(int32_t layer, int64_t seq) const = 0;
  virtual kernels::KvPageView ValueView(int32_t layer, int64_t seq) const = 0;
};

}  // namespace kvforge::kvstore
