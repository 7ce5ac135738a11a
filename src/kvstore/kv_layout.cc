#include "kvstore/kv_layout.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "base/check.h"
#include "base/strings.h"
#include "kvquant/nuq.h"
#include "kvquant/turbo.h"

namespace kvforge::kvstore {
namespace {

constexpr int64_t kQuantBlockValues = 32;  // q8_0 / q4_0 block length (ggml QK8_0, QK4_0)
constexpr int64_t kF16Bytes = 2;
constexpr int64_t kF32Bytes = 4;

// Overflow-tracking int64 arithmetic: once an operation overflows, `overflow` stays set and the
// results are meaningless (callers check the flag once at the end).
struct Checked {
  bool overflow = false;
  int64_t Mul(int64_t a, int64_t b) {
    int64_t r = 0;
    if (__builtin_mul_overflow(a, b, &r)) overflow = true;
    return r;
  }
  int64_t Add(int64_t a, int64_t b) {
    int64_t r = 0;
    if (__builtin_add_overflow(a, b, &r)) overflow = true;
    return r;
  }
  int64_t AlignUp(int64_t x, int64_t align) {
    const int64_t bumped = Add(x, align - 1);
    return bumped / align * align;
  }
};

Status Invalid(const std::string& msg) { return Status::InvalidArgument("kv layout: " + msg); }

// Fills the byte fields of `s` for its dtype. `dim` is the per-head width; with
// groups_along_row the whole row width is what must hold whole groups.
Status SizeStream(const KvLayoutConfig& cfg, int64_t dim, KvStream* s, Checked* c) {
  const int64_t v = s->values_per_token;
  const KvDtype dtype = s->dtype;
  if (cfg.groups_along_row) dim = v;
  s->row_tokens = 1;
  switch (dtype) {
    case KvDtype::kF32:
      s->row_code_bytes = c->Mul(v, kF32Bytes);
      break;
    case KvDtype::kF16:
    case KvDtype::kBf16:
      s->row_code_bytes = c->Mul(v, kF16Bytes);
      break;
    case KvDtype::kFp8E4M3:
    case KvDtype::kFp8E5M2:
      s->row_code_bytes = v;
      s->fixed_bytes = cfg.fp8_scales == Fp8ScaleGranularity::kPerTensor
                           ? kF32Bytes
                           : c->Mul(s->heads, kF32Bytes);
      break;
    case KvDtype::kInt8:
      s->row_code_bytes = v;
      s->row_scale_bytes = c->Mul(s->heads, cfg.int8_scale_bytes);
      break;
    case KvDtype::kQ8_0:
    case KvDtype::kQ4_0: {
      if (dim % kQuantBlockValues != 0) {
        return Invalid(base::StrFormat(
            "%s packs 32 values per block, so the %s width (%lld) must be a multiple of 32",
            std::string(KvDtypeName(dtype)).c_str(),
            s->kind == KvStreamKind::kLatent ? "latent" : "head", static_cast<long long>(dim)));
      }
      const int64_t blocks = v / kQuantBlockValues;
      s->row_code_bytes = dtype == KvDtype::kQ8_0 ? v : v / 2;
      s->row_scale_bytes = c->Mul(blocks, kF16Bytes);
      break;
    }
    case KvDtype::kKivi2:
    case KvDtype::kKivi4: {
      const int64_t bits = kvquant::KiviBits(dtype);
      const int64_t g = cfg.kivi_group;
      s->residual_bytes_per_token = c->Mul(v, kF16Bytes);
      if (s->kind == KvStreamKind::kKey) {
        // Per-channel groups over g tokens: a row is g tokens of every channel, plus one f16
        // scale and one f16 zero point per channel.
        const int64_t code_bits = c->Mul(c->Mul(v, g), bits);
        if (code_bits % 8 != 0) return Invalid("KIVI key codes do not fill whole bytes");
        s->row_tokens = g;
        s->row_code_bytes = code_bits / 8;
        s->row_scale_bytes = c->Mul(v, 2 * kF16Bytes);
      } else {
        // Per-token groups of g channels inside one head.
        if (dim % g != 0) {
          return Invalid(base::StrFormat(
              "KIVI groups %lld channels, so the value head width (%lld) must be a multiple",
              static_cast<long long>(g), static_cast<long long>(dim)));
        }
        const int64_t code_bits = c->Mul(v, bits);
        if (code_bits % 8 != 0) return Invalid("KIVI value codes do not fill whole bytes");
        s->row_code_bytes = code_bits / 8;
        s->row_scale_bytes = c->Mul(v / g, 2 * kF16Bytes);
      }
      break;
    }
    case KvDtype::kKvQuant3: {
      if (v >= kvquant::kNuqNoOutlier) {
        return Invalid(base::StrFormat(
            "kvquant3 indexes outliers with 16 bits, so a row holds at most 65534 values, not %lld",
            static_cast<long long>(v)));
      }
      if (v % 8 != 0) {
        return Invalid(base::StrFormat(
            "kvquant3 packs 8 three-bit codes in 3 bytes, so the row width (%lld) must be a "
            "multiple of 8",
            static_cast<long long>(v)));
      }
      const bool key = s->kind == KvStreamKind::kKey;
      s->row_code_bytes = kvquant::NuqCodeBytes(v);
      // Outlier slots (and a value row's center and radius) count as metadata.
      s->row_scale_bytes = kvquant::NuqScaleBytes(v, key);
      // Per layer: the f32 lookup table, and for keys an f32 center and radius per channel.
      s->fixed_bytes = c->Add(kvquant::kNuqLevels * kF32Bytes, key ? c->Mul(v, 2 * kF32Bytes) : 0);
      break;
    }
    case KvDtype::kTurbo3:
    case KvDtype::kTurbo4: {
      // Per head, whatever groups_along_row says: the rotation works on one head's d values.
      const int64_t head = s->kind == KvStreamKind::kLatent ? v : v / s->heads;
      if (head < kvquant::kTurboMinHeadDim || head > kvquant::kTurboMaxHeadDim) {
        return Invalid(base::StrFormat("%s needs a head width in [%lld, %lld], got %lld",
                                       std::string(KvDtypeName(dtype)).c_str(),
                                       static_cast<long long>(kvquant::kTurboMinHeadDim),
                                       static_cast<long long>(kvquant::kTurboMaxHeadDim),
                                       static_cast<long long>(head)));
      }
      const bool qjl = cfg.turbo_qjl && s->kind == KvStreamKind::kKey;
      const int64_t code_bits = kvquant::TurboBits(dtype) - (qjl ? 1 : 0);
      // Codes, then (QJL) one sign bit per value: two bit streams, each padded to a byte.
      s->row_code_bytes = c->Add(c->Mul(v, code_bits), 7) / 8;
      if (qjl) s->row_code_bytes = c->Add(s->row_code_bytes, c->Add(v, 7) / 8);
      // f16 norm per head (and f16 residual norm with QJL).
      const int64_t heads = s->kind == KvStreamKind::kLatent ? 1 : s->heads;
      s->row_scale_bytes = c->Mul(heads, qjl ? 2 * kF16Bytes : kF16Bytes);
      break;
    }
  }
  s->row_bytes = c->Add(s->row_code_bytes, s->row_scale_bytes);
  s->row_stride_bytes = c->AlignUp(s->row_bytes, cfg.row_align_bytes);
  return Status::Ok();
}

}  // namespace

Result<KvLayout> KvLayout::Create(const KvLayoutConfig& config) {
  const KvLayoutConfig& cfg = config;
  if (cfg.num_layers < 1) {
    return Invalid(base::StrFormat("num_layers must be >= 1, got %lld",
                                   static_cast<long long>(cfg.num_layers)));
  }
  if (cfg.block_tokens < 1) {
    return Invalid(base::StrFormat("block_tokens must be >= 1, got %lld",
                                   static_cast<long long>(cfg.block_tokens)));
  }
  if (cfg.row_align_bytes < 1 || cfg.row_align_bytes > 4096 ||
      (cfg.row_align_bytes & (cfg.row_align_bytes - 1)) != 0) {
    return Invalid(base::StrFormat("row_align_bytes must be a power of two in [1, 4096], got %lld",
                                   static_cast<long long>(cfg.row_align_bytes)));
  }
  const KvDtype k_dtype = cfg.dtype;
  const KvDtype v_dtype = cfg.value_dtype.value_or(cfg.dtype);
  if ((k_dtype == KvDtype::kInt8 || v_dtype == KvDtype::kInt8) && cfg.int8_scale_bytes != 2 &&
      cfg.int8_scale_bytes != 4) {
    return Invalid("int8_scale_bytes must be 2 (f16) or 4 (f32)");
  }
  if (IsKivi(k_dtype) || IsKivi(v_dtype)) {
    if (cfg.kivi_group < 1) return Invalid("kivi_group must be >= 1");
    if (cfg.kivi_residual_tokens < cfg.kivi_group ||
        cfg.kivi_residual_tokens % cfg.kivi_group != 0) {
      return Invalid(base::StrFormat(
          "kivi_residual_tokens (%lld) must be a positive multiple of kivi_group (%lld)",
          static_cast<long long>(cfg.kivi_residual_tokens),
          static_cast<long long>(cfg.kivi_group)));
    }
    if (IsKivi(k_dtype) && cfg.block_tokens % cfg.kivi_group != 0) {
      return Invalid(base::StrFormat(
          "KIVI quantizes keys in groups of %lld tokens, so block_tokens (%lld) must be a multiple",
          static_cast<long long>(cfg.kivi_group), static_cast<long long>(cfg.block_tokens)));
    }
  }

  KvLayout layout;
  layout.config_ = cfg;
  Checked c;
  if (cfg.mla_kv_lora_rank != 0 || cfg.mla_rope_dim != 0) {
    if (cfg.mla_kv_lora_rank < 1 || cfg.mla_rope_dim < 0) {
      return Invalid(base::StrFormat(
          "MLA needs kv_lora_rank >= 1 and rope_dim >= 0, got %lld and %lld",
          static_cast<long long>(cfg.mla_kv_lora_rank), static_cast<long long>(cfg.mla_rope_dim)));
    }
    if (IsKivi(k_dtype) || IsKivi(v_dtype)) {
      return Status::Unimplemented(
          "kv layout: KIVI is defined for separate K and V heads, not for an MLA latent");
    }
    if (kvquant::IsNuq(k_dtype) || kvquant::IsNuq(v_dtype)) {
      return Status::Unimplemented(
          "kv layout: kvquant3 quantizes pre-RoPE keys and per-token values, not an MLA latent");
    }
    KvStream latent;
    latent.kind = KvStreamKind::kLatent;
    latent.heads = 1;
    latent.dtype = k_dtype;
    latent.values_per_token = c.Add(cfg.mla_kv_lora_rank, cfg.mla_rope_dim);
    if (c.overflow) return Invalid("MLA latent width overflows int64");
    KVF_RETURN_IF_ERROR(SizeStream(cfg, latent.values_per_token, &latent, &c));
    layout.streams_.push_back(latent);
  } else {
    const int64_t v_dim = cfg.v_head_dim == 0 ? cfg.head_dim : cfg.v_head_dim;
    if (cfg.num_kv_heads < 1 || cfg.head_dim < 1 || v_dim < 1) {
      return Invalid(base::StrFormat(
          "need num_kv_heads >= 1 and head_dim >= 1 (or an MLA latent), got %lld and %lld",
          static_cast<long long>(cfg.num_kv_heads), static_cast<long long>(cfg.head_dim)));
    }
    KvStream key;
    key.kind = KvStreamKind::kKey;
    key.dtype = k_dtype;
    key.heads = cfg.num_kv_heads;
    key.values_per_token = c.Mul(cfg.num_kv_heads, cfg.head_dim);
    KvStream value;
    value.kind = KvStreamKind::kValue;
    value.dtype = v_dtype;
    value.heads = cfg.num_kv_heads;
    value.values_per_token = c.Mul(cfg.num_kv_heads, v_dim);
    if (c.overflow) return Invalid("K/V width overflows int64");
    KVF_RETURN_IF_ERROR(SizeStream(cfg, cfg.head_dim, &key, &c));
    KVF_RETURN_IF_ERROR(SizeStream(cfg, v_dim, &value, &c));
    layout.streams_.push_back(key);
    layout.streams_.push_back(value);
  }

  int64_t offset = 0;
  for (const KvStream& s : layout.streams_) {
    layout.stream_offsets_.push_back(offset);
    offset = c.Add(offset, c.Mul(cfg.block_tokens / s.row_tokens, s.row_stride_bytes));
  }
  layout.layer_slice_bytes_ = offset;
  layout.block_bytes_ = c.Mul(offset, cfg.num_layers);
  // Per-cache fixed bytes and the residual window must be representable too.
  int64_t fixed = 0;
  int64_t residual = 0;
  for (const KvStream& s : layout.streams_) {
    fixed = c.Add(fixed, c.Mul(s.fixed_bytes, cfg.num_layers));
    residual = c.Add(residual, c.Mul(c.Mul(s.residual_bytes_per_token, cfg.kivi_residual_tokens),
                                     cfg.num_layers));
  }
  if (c.overflow) return Invalid("the layout's byte counts overflow int64");
  return layout;
}

int64_t KvLayout::ValuesPerTokenPerLayer() const {
  int64_t total = 0;
  for (const KvStream& s : streams_) total += s.values_per_token;
  return total;
}

int64_t KvLayout::BytesPerTokenPerLayer() const {
  int64_t total = 0;
  for (const KvStream& s : streams_) total += s.BytesPerToken();
  return total;
}

int64_t KvLayout::BytesPerToken() const {
  // Bounded by BlockBytes(), which Create() checked: no overflow.
  return BytesPerTokenPerLayer() * config_.num_layers;
}

double KvLayout::BitsPerValue() const {
  return 8.0 * static_cast<double>(BytesPerTokenPerLayer()) /
         static_cast<double>(ValuesPerTokenPerLayer());
}

int64_t KvLayout::FixedBytes() const {
  int64_t total = 0;
  for (const KvStream& s : streams_) total += s.fixed_bytes;
  return total * config_.num_layers;
}

Result<KvBytes> KvLayout::BytesForTokensSplit(int64_t tokens) const {
  if (tokens < 0) {
    return Status::InvalidArgument(
        base::StrFormat("kv layout: negative token count %lld", static_cast<long long>(tokens)));
  }
  Checked c;
  KvBytes per_layer;
  const int64_t r = config_.kivi_residual_tokens;
  for (const KvStream& s : streams_) {
    int64_t quantized_rows = tokens;  // rows of row_tokens tokens outside the residual
    int64_t residual_tokens = 0;
    if (IsKivi(s.dtype)) {
      if (s.kind == KvStreamKind::kKey) {
        // Keys are quantized R at a time: the last (T mod R) stay in f16.
        residual_tokens = tokens % r;
        quantized_rows = (tokens - residual_tokens) / s.row_tokens;
      } else {
        // Values are quantized one token at a time once they leave the last R tokens.
        residual_tokens = std::min(tokens, r);
        quantized_rows = tokens - residual_tokens;
      }
    }
    per_layer.code_bytes = c.Add(per_layer.code_bytes, c.Mul(quantized_rows, s.row_code_bytes));
    per_layer.scale_bytes = c.Add(per_layer.scale_bytes, c.Mul(quantized_rows, s.row_scale_bytes));
    per_layer.residual_bytes =
        c.Add(per_layer.residual_bytes, c.Mul(residual_tokens, s.residual_bytes_per_token));
  }
  KvBytes out;
  out.code_bytes = c.Mul(per_layer.code_bytes, config_.num_layers);
  out.scale_bytes = c.Mul(per_layer.scale_bytes, config_.num_layers);
  out.residual_bytes = c.Mul(per_layer.residual_bytes, config_.num_layers);
  c.Add(c.Add(out.code_bytes, out.scale_bytes), out.residual_bytes);
  if (c.overflow) {
    return Status::InvalidArgument(base::StrFormat(
        "kv layout: bytes for %lld tokens overflow int64", static_cast<long long>(tokens)));
  }
  return out;
}

Result<int64_t> KvLayout::BytesForTokens(int64_t tokens) const {
  KVF_ASSIGN_OR_RETURN(KvBytes bytes, BytesForTokensSplit(tokens));
  return bytes.total();
}

int64_t KvLayout::ResidualBytesPerSequence() const {
  const int64_t r = config_.kivi_residual_tokens;
  int64_t per_layer = 0;
  for (const KvStream& s : streams_) {
    // Keys hold at most R - 1 residual tokens (R of them are quantized at once), values R.
    if (!IsKivi(s.dtype)) continue;
    const int64_t tokens = s.kind == KvStreamKind::kKey ? r - 1 : r;
    per_layer += tokens * s.residual_bytes_per_token;
  }
  return per_layer * config_.num_layers;
}

int64_t KvLayout::BlockPaddingBytes() const {
  int64_t padding = 0;
  for (const KvStream& s : streams_) {
    padding += (config_.block_tokens / s.row_tokens) * (s.row_stride_bytes - s.row_bytes);
  }
  return padding * config_.num_layers;
}

int64_t KvLayout::RowsPerBlock(int64_t stream) const {
  KVF_CHECK(stream >= 0 && stream < static_cast<int64_t>(streams_.size()));
  return config_.block_tokens / streams_[static_cast<size_t>(stream)].row_tokens;
}

int64_t KvLayout::OffsetInBlock(int64_t layer, int64_t stream, int64_t row) const {
  KVF_CHECK(layer >= 0 && layer < config_.num_layers);
  KVF_CHECK(row >= 0 && row < RowsPerBlock(stream));
  const KvStream& s = streams_[static_cast<size_t>(stream)];
  return layer * layer_slice_bytes_ + stream_offsets_[static_cast<size_t>(stream)] +
         row * s.row_stride_bytes;
}

int64_t KvLayout::BlocksForBudget(int64_t budget_bytes) const {
  if (budget_bytes <= FixedBytes()) return 0;
  return (budget_bytes - FixedBytes()) / block_bytes_;
}

std::string KvLayout::Describe() const {
  std::string shape;
  if (is_mla()) {
    shape =
        base::StrFormat("MLA latent %lld + %lld", static_cast<long long>(config_.mla_kv_lora_rank),
                        static_cast<long long>(config_.mla_rope_dim));
  } else {
    shape = base::StrFormat("K/V %lld heads x %lld", static_cast<long long>(config_.num_kv_heads),
                            static_cast<long long>(config_.head_dim));
  }
  std::string dtypes(KvDtypeName(config_.dtype));
  if (value_dtype() != config_.dtype)
    dtypes = "K " + dtypes + " / V " + std::string(KvDtypeName(value_dtype()));
  return base::StrFormat("%s %s, %lld layers, %lld B/token, %lld-token blocks of %lld B",
                         dtypes.c_str(), shape.c_str(), static_cast<long long>(config_.num_layers),
                         static_cast<long long>(BytesPerToken()),
                         static_cast<long long>(config_.block_tokens),
                         static_cast<long long>(block_bytes_));
}

}  // namespace kvforge::kvstore
