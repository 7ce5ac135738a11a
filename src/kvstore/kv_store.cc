#include "kvstore/kv_store.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <limits>

#include "base/strings.h"
#include "kvquant/turbo.h"

namespace kvforge::kvstore {

namespace {
constexpr size_t kHugePageBytes = size_t{2} << 20;  // x86-64's transparent huge page
}  // namespace

KvLayoutConfig StoreLayoutConfig(const KvStoreConfig& cfg) {
  KvLayoutConfig lc;
  lc.num_layers = cfg.n_layer;
  lc.num_kv_heads = cfg.n_kv_head;
  lc.head_dim = cfg.head_dim;
  lc.dtype = cfg.k_dtype;
  lc.value_dtype = cfg.v_dtype;
  lc.groups_along_row = true;
  lc.block_tokens = cfg.block_tokens;
  lc.row_align_bytes = cfg.row_align_bytes;
  lc.turbo_qjl = cfg.turbo_qjl;
  if (cfg.latent()) {
    lc.mla_kv_lora_rank = cfg.latent_rank;
    lc.mla_rope_dim = cfg.head_dim - cfg.latent_rank;
  }
  return lc;
}

KvStore::~KvStore() { std::free(data_); }

Result<std::unique_ptr<KvStore>> KvStore::Create(const KvStoreConfig& cfg) {
  if (cfg.n_layer <= 0 || cfg.n_kv_head <= 0 || cfg.head_dim <= 0 || cfg.block_tokens <= 0 ||
      cfg.num_blocks <= 0)
    return Status::InvalidArgument("KV store: every dimension must be positive");
  if (cfg.num_blocks > std::numeric_limits<int32_t>::max())
    return Status::InvalidArgument("KV store: too many blocks");
  if (cfg.latent()) {
    if (cfg.n_kv_head != 1 || cfg.latent_rank > cfg.head_dim)
      return Status::InvalidArgument(
          "KV store: an MLA latent is one head of latent_rank + rope dims values");
    if (cfg.v_dtype != cfg.k_dtype)
      return Status::InvalidArgument(
          "an MLA latent is one stream holding both K and V, so the K and V cache dtypes must be "
          "the same");
    if (kvquant::IsTurbo(cfg.k_dtype))
      return Status::Unimplemented(
          "turbo rotates a whole head before quantizing, but an MLA latent's value is only its "
          "first kv_lora_rank values: use f16, bf16, fp8, int8, q8_0 or q4_0 for latents");
  }
  KVF_ASSIGN_OR_RETURN(KvLayout layout, KvLayout::Create(StoreLayoutConfig(cfg)));
  std::unique_ptr<KvStore> s(new KvStore(cfg, std::move(layout)));
  s->num_streams_ = static_cast<int>(s->layout_.streams().size());
  for (int k = 0; k < s->num_streams_; ++k) {
    const KvDtype d = k == 0 ? cfg.k_dtype : cfg.v_dtype;
    if (!kvquant::IsTurbo(d)) continue;
    KVF_ASSIGN_OR_RETURN(s->turbo_[k], kvquant::TurboFor(kvquant::TurboBits(d), cfg.head_dim,
                                                         /*qjl=*/k == 0 && cfg.turbo_qjl));
  }
  long double total = 0;
  size_t offset = 0;
  for (int k = 0; k < s->num_streams_; ++k) {
    const KvStream& st = s->layout_.streams()[static_cast<size_t>(k)];
    s->row_tokens_[k] = static_cast<int32_t>(st.row_tokens);
    s->row_stride_[k] = static_cast<size_t>(st.row_stride_bytes);
    s->piece_bytes_[k] = s->row_stride_[k] * static_cast<size_t>(s->layout_.RowsPerBlock(k));
    const long double region = static_cast<long double>(s->piece_bytes_[k]) * cfg.num_blocks;
    total += region * cfg.n_layer;
    if (total > static_cast<long double>(std::numeric_limits<int64_t>::max() / 4))
      return Status::ResourceExhausted("KV store: requested size overflows");
    s->region_bytes_[k] = (static_cast<size_t>(region) + 63) / 64 * 64;
    s->region_offset_[k] = offset;
    offset += s->region_bytes_[k] * static_cast<size_t>(cfg.n_layer);
  }
  s->bytes_ = offset;
  // A pool of 2 MiB or more sits on 2 MiB boundaries and asks for transparent huge pages: a block
  // written for the first time (a prefill, a chunk loaded from a tier) then faults once per 2 MiB
  // instead of once per 4 KiB, and attention's walks over the blocks miss the TLB less. Advisory:
  // where THP is off the pool works the same.
  const bool huge = s->bytes_ >= kHugePageBytes;
  const size_t align = huge ? kHugePageBytes : 64;
  const size_t alloc = (s->bytes_ + align - 1) / align * align;
  s->data_ = static_cast<uint8_t*>(std::aligned_alloc(align, alloc));
  if (s->data_ == nullptr)
    return Status::ResourceExhausted("KV store: cannot allocate " + base::HumanBytes(s->bytes_));
  if (huge) (void)madvise(s->data_, alloc, MADV_HUGEPAGE);
  return s;
}

kernels::KvPageView KvStore::View(KvKind kind, int32_t layer, const int32_t* table) const {
  const int k = Stream(kind);
  kernels::KvPageView v;
  v.base = Row(kind, layer, 0, 0);
  v.block_table = table;
  v.block_tokens = cfg_.block_tokens;
  v.block_stride = piece_bytes_[k];
  v.token_stride = row_stride_[k];
  v.dtype = dtype(kind);
  v.head_dim = cfg_.head_dim;
  v.row_values = cfg_.n_kv_head * cfg_.head_dim;
  v.row_tokens = row_tokens_[k];
  const KvDtype d = dtype(kind);
  const size_t elt = d == KvDtype::kF32 ? 4 : (kvquant::IsFloat(d) ? 2 : 1);
  v.head_stride = static_cast<size_t>(cfg_.head_dim) * elt;
  v.turbo = turbo_[k];
  return v;
}

void KvStore::CopyBlockPrefix(int32_t src, int32_t dst, int32_t n_tokens) {
  if (src == dst || n_tokens <= 0) return;
  for (int kind = 0; kind < num_streams_; ++kind) {
    const int32_t rows = (n_tokens + row_tokens_[kind] - 1) / row_tokens_[kind];
    const size_t n = static_cast<size_t>(rows) * row_stride_[kind];
    for (int32_t l = 0; l < cfg_.n_layer; ++l)
      std::memcpy(Row(static_cast<KvKind>(kind), l, dst, 0),
                  Row(static_cast<KvKind>(kind), l, src, 0), n);
  }
}

// Serialised form (docs/kv_cache.md): [layer][K, V][rows][row_stride], the order KvLayout
// describes, so a restore can proceed layer by layer.
void KvStore::ReadBlock(int32_t block, uint8_t* dst) const {
  for (int32_t l = 0; l < cfg_.n_layer; ++l)
    for (int kind = 0; kind < num_streams_; ++kind) {
      std::memcpy(dst, Row(static_cast<KvKind>(kind), l, block, 0), piece_bytes_[kind]);
      dst += piece_bytes_[kind];
    }
}

void KvStore::WriteBlock(int32_t block, const uint8_t* src) {
  for (int32_t l = 0; l < cfg_.n_layer; ++l)
    for (int kind = 0; kind < num_streams_; ++kind) {
      std::memcpy(Row(static_cast<KvKind>(kind), l, block, 0), src, piece_bytes_[kind]);
      src += piece_bytes_[kind];
    }
}

}  // namespace kvforge::kvstore
