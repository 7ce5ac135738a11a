#include "kvstore/kv_store.h"

#include <cstdlib>
#include <cstring>
#include <limits>

#include "base/strings.h"

namespace kvforge::kvstore {

KvStore::~KvStore() { std::free(data_); }

Result<std::unique_ptr<KvStore>> KvStore::Create(const KvStoreConfig& cfg) {
  if (cfg.n_layer <= 0 || cfg.n_kv_head <= 0 || cfg.head_dim <= 0 || cfg.block_tokens <= 0 ||
      cfg.num_blocks <= 0)
    return Status::InvalidArgument("KV store: every dimension must be positive");
  if (cfg.num_blocks > std::numeric_limits<int32_t>::max())
    return Status::InvalidArgument("KV store: too many blocks");
  std::unique_ptr<KvStore> s(new KvStore(cfg));
  s->token_bytes_ = static_cast<size_t>(cfg.n_kv_head) * cfg.head_dim * (cfg.f16 ? 2 : 4);
  s->block_bytes_ = s->token_bytes_ * static_cast<size_t>(cfg.block_tokens);
  const long double region = static_cast<long double>(s->block_bytes_) * cfg.num_blocks;
  const long double total = region * 2 * cfg.n_layer;
  if (total > static_cast<long double>(std::numeric_limits<int64_t>::max() / 4))
    return Status::ResourceExhausted("KV store: requested size overflows");
  s->region_bytes_ = (static_cast<size_t>(region) + 63) / 64 * 64;
  s->bytes_ = static_cast<uint64_t>(s->region_bytes_) * 2 * static_cast<uint64_t>(cfg.n_layer);
  s->data_ = static_cast<uint8_t*>(std::aligned_alloc(64, s->bytes_));
  if (s->data_ == nullptr)
    return Status::ResourceExhausted("KV store: cannot allocate " + base::HumanBytes(s->bytes_));
  return s;
}

kernels::KvPageView KvStore::View(KvKind kind, int32_t layer, const int32_t* table) const {
  kernels::KvPageView v;
  v.base = Row(kind, layer, 0, 0);
  v.block_table = table;
  v.block_tokens = cfg_.block_tokens;
  v.block_stride = block_bytes_;
  v.token_stride = token_bytes_;
  v.head_stride = static_cast<size_t>(cfg_.head_dim) * (cfg_.f16 ? 2 : 4);
  v.is_f16 = cfg_.f16;
  return v;
}

void KvStore::CopyBlock(int32_t src, int32_t dst) { CopyBlockPrefix(src, dst, cfg_.block_tokens); }

void KvStore::CopyBlockPrefix(int32_t src, int32_t dst, int32_t n_tokens) {
  if (src == dst || n_tokens <= 0) return;
  const size_t n = static_cast<size_t>(n_tokens) * token_bytes_;
  for (int kind = 0; kind < 2; ++kind)
    for (int32_t l = 0; l < cfg_.n_layer; ++l)
      std::memcpy(Row(static_cast<KvKind>(kind), l, dst, 0),
                  Row(static_cast<KvKind>(kind), l, src, 0), n);
}

// Serialised form (docs/kv_cache.md): [layer][K, V][block_tokens][n_kv_head][head_dim], the
// order KvLayout describes, so a restore can proceed layer by layer.
void KvStore::ReadBlock(int32_t block, uint8_t* dst) const {
  for (int32_t l = 0; l < cfg_.n_layer; ++l)
    for (int kind = 0; kind < 2; ++kind, dst += block_bytes_)
      std::memcpy(dst, Row(static_cast<KvKind>(kind), l, block, 0), block_bytes_);
}

void KvStore::WriteBlock(int32_t block, const uint8_t* src) {
  for (int32_t l = 0; l < cfg_.n_layer; ++l)
    for (int kind = 0; kind < 2; ++kind, src += block_bytes_)
      std::memcpy(Row(static_cast<KvKind>(kind), l, block, 0), src, block_bytes_);
}

}  // namespace kvforge::kvstore
