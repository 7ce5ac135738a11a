#include "model/kv_store.h"

#include <cstdlib>
#include <cstring>
#include <limits>

#include "base/check.h"
#include "base/strings.h"

namespace kvforge::model {

KvStore::KvStore(const KvStoreConfig& cfg) : cfg_(cfg) {}

KvStore::~KvStore() { std::free(data_); }

Result<std::unique_ptr<KvStore>> KvStore::Create(const KvStoreConfig& cfg) {
  if (cfg.n_layer <= 0 || cfg.n_kv_head <= 0 || cfg.head_dim <= 0 || cfg.block_tokens <= 0 ||
      cfg.num_blocks <= 0 || cfg.num_seqs <= 0)
    return Status::InvalidArgument("KV store: every dimension must be positive");
  std::unique_ptr<KvStore> s(new KvStore(cfg));
  s->token_bytes_ = static_cast<size_t>(cfg.n_kv_head) * cfg.head_dim * (cfg.f16 ? 2 : 4);
  s->block_bytes_ = s->token_bytes_ * static_cast<size_t>(cfg.block_tokens);
  const long double total = 2.0L * cfg.n_layer * static_cast<long double>(cfg.num_blocks) * s->block_bytes_;
  if (total > static_cast<long double>(std::numeric_limits<int64_t>::max() / 2))
    return Status::ResourceExhausted("KV store: requested size overflows");
  s->bytes_ = static_cast<uint64_t>(total);
  // 64-byte alignment keeps rows SIMD- and cache-line-friendly.
  const uint64_t alloc = (s->bytes_ + 63) / 64 * 64;
  s->data_ = static_cast<uint8_t*>(std::aligned_alloc(64, alloc));
  if (s->data_ == nullptr)
    return Status::ResourceExhausted("KV store: cannot allocate " + base::HumanBytes(s->bytes_));
  s->free_.reserve(static_cast<size_t>(cfg.num_blocks));
  for (int64_t b = cfg.num_blocks - 1; b >= 0; --b) s->free_.push_back(static_cast<int32_t>(b));
  s->tables_.resize(static_cast<size_t>(cfg.num_seqs));
  return s;
}

bool KvStore::Reserve(int32_t seq, int64_t n_tokens) {
  KVF_CHECK(seq >= 0 && seq < cfg_.num_seqs);
  auto& t = tables_[static_cast<size_t>(seq)];
  const int64_t need = (n_tokens + cfg_.block_tokens - 1) / cfg_.block_tokens;
  const int64_t missing = need - static_cast<int64_t>(t.size());
  if (missing <= 0) return true;
  if (missing > static_cast<int64_t>(free_.size())) return false;
  for (int64_t i = 0; i < missing; ++i) {
    t.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void KvStore::Release(int32_t seq) {
  KVF_CHECK(seq >= 0 && seq < cfg_.num_seqs);
  auto& t = tables_[static_cast<size_t>(seq)];
  for (auto it = t.rbegin(); it != t.rend(); ++it) free_.push_back(*it);
  t.clear();
}

int64_t KvStore::Capacity(int32_t seq) const {
  return static_cast<int64_t>(tables_[static_cast<size_t>(seq)].size()) * cfg_.block_tokens;
}

uint8_t* KvStore::Row(const uint8_t* layer_base, int32_t seq, int64_t pos) const {
  const auto& t = tables_[static_cast<size_t>(seq)];
  KVF_DCHECK(pos >= 0 && pos < static_cast<int64_t>(t.size()) * cfg_.block_tokens);
  const size_t block = static_cast<size_t>(t[static_cast<size_t>(pos / cfg_.block_tokens)]);
  return const_cast<uint8_t*>(layer_base) + block * block_bytes_ +
         static_cast<size_t>(pos % cfg_.block_tokens) * token_bytes_;
}

uint8_t* KvStore::KeyRow(int32_t layer, int32_t seq, int64_t pos) {
  return Row(data_ + static_cast<size_t>(layer) * cfg_.num_blocks * block_bytes_, seq, pos);
}

uint8_t* KvStore::ValueRow(int32_t layer, int32_t seq, int64_t pos) {
  return Row(data_ + static_cast<size_t>(cfg_.n_layer + layer) * cfg_.num_blocks * block_bytes_, seq, pos);
}

kernels::KvPageView KvStore::KeyView(int32_t layer, int32_t seq) const {
  kernels::KvPageView v;
  v.base = data_ + static_cast<size_t>(layer) * cfg_.num_blocks * block_bytes_;
  v.block_table = tables_[static_cast<size_t>(seq)].data();
  v.block_tokens = cfg_.block_tokens;
  v.block_stride = block_bytes_;
  v.token_stride = token_bytes_;
  v.head_stride = static_cast<size_t>(cfg_.head_dim) * (cfg_.f16 ? 2 : 4);
  v.is_f16 = cfg_.f16;
  return v;
}

kernels::KvPageView KvStore::ValueView(int32_t layer, int32_t seq) const {
  kernels::KvPageView v = KeyView(layer, seq);
  v.base = data_ + static_cast<size_t>(cfg_.n_layer + layer) * cfg_.num_blocks * block_bytes_;
  return v;
}

}  // namespace kvforge::model
