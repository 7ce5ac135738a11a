// kvstore/kv_access.h — how the forward pass reaches the KV cache (docs/architecture.md, rule 3).
//
// The model never owns KV bytes. For a sequence slot it asks for the address of the row where a
// position's K or V goes (to write new tokens) and for a paged view of a layer (to attend).
// Implementation: PagedKvCache (block tables from kvmeta over KvStore bytes); later
// quantized codecs, eviction and offload tiers plug in behind the same calls.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"

namespace kvforge::kvstore {

class KvAccess {
 public:
  virtual ~KvAccess() = default;
  virtual bool is_f16() const = 0;
  // Writable row for (layer, sequence slot, position): [n_kv_head][head_dim] elements.
  virtual uint8_t* KeyRow(int32_t layer, int64_t seq, int64_t pos) = 0;
  virtual uint8_t* ValueRow(int32_t layer, int64_t seq, int64_t pos) = 0;
  virtual kernels::KvPageView KeyView(int32_t layer, int64_t seq) const = 0;
  virtual kernels::KvPageView ValueView(int32_t layer, int64_t seq) const = 0;
};

}  // namespace kvforge::kvstore
