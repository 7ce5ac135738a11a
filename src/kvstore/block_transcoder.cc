#include "kvstore/block_transcoder.h"

#include <cstring>

#include "base/strings.h"

namespace kvforge::kvstore {

using base::StrFormat;
using kvquant::KvDtype;
using kvquant::KvDtypeName;

namespace {

// Rows of these dtypes are one token each and decode from their own bytes alone (fp8 needs the
// cache's scales, kvquant3 its calibration, KIVI keys span 32 tokens, turbo is not a format a
// lower tier gains from).
bool DecodableAlone(KvDtype d) {
  return kvquant::IsFloat(d) || d == KvDtype::kInt8 || d == KvDtype::kQ8_0 || d == KvDtype::kQ4_0;
}

bool SupportedTarget(KvDtype d) { return DecodableAlone(d) && d != KvDtype::kF32; }

std::string Name(KvDtype d) { return std::string(KvDtypeName(d)); }

}  // namespace

Result<std::unique_ptr<BlockTranscoder>> BlockTranscoder::Create(const KvStoreConfig& pool,
                                                                 KvDtype stored) {
  if (!SupportedTarget(stored))
    return Status::InvalidArgument(
        StrFormat("kv_offload_dtype %s: offloaded chunks can be stored as f16, bf16, int8, q8_0 "
                  "or q4_0",
                  Name(stored).c_str()));
  KVF_ASSIGN_OR_RETURN(KvLayout pool_layout, KvLayout::Create(StoreLayoutConfig(pool)));
  std::vector<StreamCodecs> streams;
  KvDtype stored_k = pool.k_dtype, stored_v = pool.v_dtype;
  bool shrinks = false;
  for (const KvStream& s : pool_layout.streams()) {
    if (!DecodableAlone(s.dtype))
      return Status::InvalidArgument(
          StrFormat("kv_offload_dtype: a %s KV cache cannot be transcoded (its rows need the "
                    "cache's scales, calibration or token groups); leave kv_offload_dtype auto",
                    Name(s.dtype).c_str()));
    const bool key = s.kind != KvStreamKind::kValue;
    const int64_t heads = std::max<int64_t>(1, s.heads);
    const int64_t head_dim = s.values_per_token / heads;
    KVF_ASSIGN_OR_RETURN(kvquant::RowCodec from,
                         kvquant::RowCodec::Create(s.dtype, heads, head_dim, key));
    Result<kvquant::RowCodec> to = kvquant::RowCodec::Create(stored, heads, head_dim, key);
    if (!to.ok()) return Status::InvalidArgument("kv_offload_dtype: " + to.error().message());
    const bool smaller = to->row_bytes() < from.row_bytes();
    shrinks = shrinks || smaller;
    const KvDtype kept = smaller ? stored : s.dtype;
    if (s.kind == KvStreamKind::kValue) {
      stored_v = kept;
    } else {
      stored_k = kept;
      if (s.kind == KvStreamKind::kLatent) stored_v = kept;
    }
    if (smaller) {
      streams.push_back({from, *to, false});
    } else {
      streams.push_back({from, from, true});
    }
  }
  if (!shrinks)
    return Status::InvalidArgument(
        StrFormat("kv_offload_dtype %s is not smaller than the KV cache's own dtype (%s); leave "
                  "it auto, or choose a smaller one",
                  Name(stored).c_str(), Name(pool.k_dtype).c_str()));
  KvStoreConfig stored_cfg = pool;
  stored_cfg.k_dtype = stored_k;
  stored_cfg.v_dtype = stored_v;
  stored_cfg.row_align_bytes = 1;  // packed: padding is only worth it in the pool
  KVF_ASSIGN_OR_RETURN(KvLayout stored_layout, KvLayout::Create(StoreLayoutConfig(stored_cfg)));
  return std::unique_ptr<BlockTranscoder>(
      new BlockTranscoder(std::move(pool_layout), std::move(stored_layout), std::move(streams)));
}

std::string BlockTranscoder::Describe() const {
  static constexpr const char* kNames[] = {"k", "v", "latent"};
  std::string out;
  for (size_t i = 0; i < streams_.size(); ++i) {
    const KvStreamKind kind = pool_.streams()[i].kind;
    out +=
        StrFormat("%s%s %s -> %s", i ? ", " : "", kNames[static_cast<int>(kind)],
                  Name(streams_[i].pool.dtype()).c_str(), Name(streams_[i].stored.dtype()).c_str());
  }
  out += StrFormat(" (%.2fx the bytes)", static_cast<double>(stored_block_bytes()) /
                                             static_cast<double>(pool_block_bytes()));
  return out;
}

void BlockTranscoder::ConvertBlock(const uint8_t* from, uint8_t* to, Direction d) const {
  const bool down = d == Direction::kToStored;
  const KvLayout& a = down ? pool_ : stored_;
  const KvLayout& b = down ? stored_ : pool_;
  // row: [values] floats of one token row.
  std::vector<float> row;
  for (int64_t layer = 0; layer < pool_.num_layers(); ++layer) {
    for (size_t s = 0; s < streams_.size(); ++s) {
      const StreamCodecs& c = streams_[s];
      const kvquant::RowCodec& dec = down ? c.pool : c.stored;
      const kvquant::RowCodec& enc = down ? c.stored : c.pool;
      const int64_t stream = static_cast<int64_t>(s);
      const int64_t rows = a.RowsPerBlock(stream);
      const size_t a_stride = static_cast<size_t>(a.streams()[s].row_stride_bytes);
      const size_t b_stride = static_cast<size_t>(b.streams()[s].row_stride_bytes);
      const size_t row_bytes = static_cast<size_t>(enc.row_bytes());
      const uint8_t* src = from + a.OffsetInBlock(layer, stream, 0);
      uint8_t* dst = to + b.OffsetInBlock(layer, stream, 0);
      row.resize(static_cast<size_t>(dec.values()));
      for (int64_t r = 0; r < rows; ++r, src += a_stride, dst += b_stride) {
        if (c.copy) {
          std::memcpy(dst, src, row_bytes);
        } else {
          dec.Decode(src, 0, dec.values(), row.data());
          enc.Encode(row.data(), dst);
        }
        std::memset(dst + row_bytes, 0, b_stride - row_bytes);  // the pool's row padding
      }
    }
  }
}

void BlockTranscoder::ToStored(const uint8_t* pool, int64_t n_blocks, uint8_t* out) const {
  const size_t in = pool_block_bytes(), on = stored_block_bytes();
  for (int64_t i = 0; i < n_blocks; ++i)
    ConvertBlock(pool + static_cast<size_t>(i) * in, out + static_cast<size_t>(i) * on,
                 Direction::kToStored);
}

void BlockTranscoder::ToPool(const uint8_t* stored, int64_t n_blocks, uint8_t* out) const {
  const size_t in = stored_block_bytes(), on = pool_block_bytes();
  for (int64_t i = 0; i < n_blocks; ++i)
    ConvertBlock(stored + static_cast<size_t>(i) * in, out + static_cast<size_t>(i) * on,
                 Direction::kToPool);
}

}  // namespace kvforge::kvstore
