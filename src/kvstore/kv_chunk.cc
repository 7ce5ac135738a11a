#include "kvstore/kv_chunk.h"

#include <lz4.h>
#include <xxhash.h>
#include <zstd.h>

#include <cstring>
#include <limits>

#include "base/strings.h"

namespace kvforge::kvstore {
namespace {

using base::StrFormat;

constexpr char kMagic[8] = {'K', 'V', 'F', 'C', 'H', 'U', 'N', 'K'};
constexpr size_t kChecksumOffset = 88;
// Sanity bounds on what a header may claim, so a corrupt one cannot ask for absurd allocations.
constexpr uint64_t kMaxChunkBlocks = 1 << 16;
constexpr uint64_t kMaxBlockTokens = 4096;
constexpr uint64_t kMaxRawBytes = 4ull << 30;

void Put32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
void Put64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t Get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t Get64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// XXH3 over the header before the checksum field and everything after the header.
uint64_t Checksum(std::span<const uint8_t> record) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  XXH3_64bits_update(st, record.data(), kChecksumOffset);
  XXH3_64bits_update(st, record.data() + kChunkHeaderBytes, record.size() - kChunkHeaderBytes);
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

Result<std::vector<uint8_t>> Compress(std::span<const uint8_t> raw, ChunkCompression c) {
  std::vector<uint8_t> out;
  if (c == ChunkCompression::kNone) return std::vector<uint8_t>(raw.begin(), raw.end());
  if (c == ChunkCompression::kZstd) {
    out.resize(ZSTD_compressBound(raw.size()));
    const size_t n = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), 1);
    if (ZSTD_isError(n)) return Status::Internal(std::string("zstd: ") + ZSTD_getErrorName(n));
    out.resize(n);
    return out;
  }
  if (raw.size() > static_cast<size_t>(LZ4_MAX_INPUT_SIZE))
    return Status::InvalidArgument("lz4: chunk larger than LZ4_MAX_INPUT_SIZE");
  out.resize(static_cast<size_t>(LZ4_compressBound(static_cast<int>(raw.size()))));
  const int n = LZ4_compress_default(reinterpret_cast<const char*>(raw.data()),
                                     reinterpret_cast<char*>(out.data()),
                                     static_cast<int>(raw.size()), static_cast<int>(out.size()));
  if (n <= 0) return Status::Internal("lz4: compression failed");
  out.resize(static_cast<size_t>(n));
  return out;
}

Result<std::vector<uint8_t>> Decompress(std::span<const uint8_t> stored, ChunkCompression c,
                                        uint64_t raw_bytes) {
  std::vector<uint8_t> out(static_cast<size_t>(raw_bytes));
  if (c == ChunkCompression::kNone) {
    if (stored.size() != raw_bytes) return Status::DataLoss("chunk: payload size mismatch");
    std::memcpy(out.data(), stored.data(), stored.size());
    return out;
  }
  if (c == ChunkCompression::kZstd) {
    const size_t n = ZSTD_decompress(out.data(), out.size(), stored.data(), stored.size());
    if (ZSTD_isError(n) || n != raw_bytes) return Status::DataLoss("chunk: bad zstd payload");
    return out;
  }
  if (stored.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      raw_bytes > static_cast<uint64_t>(std::numeric_limits<int>::max()))
    return Status::DataLoss("chunk: lz4 payload too large");
  const int n = LZ4_decompress_safe(reinterpret_cast<const char*>(stored.data()),
                                    reinterpret_cast<char*>(out.data()),
                                    static_cast<int>(stored.size()), static_cast<int>(raw_bytes));
  if (n < 0 || static_cast<uint64_t>(n) != raw_bytes)
    return Status::DataLoss("chunk: bad lz4 payload");
  return out;
}

}  // namespace

std::string_view ChunkCompressionName(ChunkCompression c) {
  switch (c) {
    case ChunkCompression::kNone:
      return "none";
    case ChunkCompression::kZstd:
      return "zstd";
    case ChunkCompression::kLz4:
      return "lz4";
  }
  return "?";
}

Result<ChunkCompression> ParseChunkCompression(std::string_view name) {
  for (ChunkCompression c :
       {ChunkCompression::kNone, ChunkCompression::kZstd, ChunkCompression::kLz4})
    if (name == ChunkCompressionName(c)) return c;
  return Status::InvalidArgument(StrFormat("unknown compression '%.*s' (choose none|lz4|zstd)",
                                           static_cast<int>(name.size()), name.data()));
}

Result<std::vector<uint8_t>> EncodeChunk(const ChunkMeta& meta, std::span<const int32_t> tokens,
                                         std::span<const uint8_t> blocks,
                                         ChunkCompression compression) {
  const uint64_t n_tok = static_cast<uint64_t>(meta.num_blocks) * meta.block_tokens;
  if (meta.num_blocks == 0 || meta.num_blocks > kMaxChunkBlocks || meta.block_tokens == 0 ||
      meta.block_tokens > kMaxBlockTokens || tokens.size() != n_tok ||
      blocks.size() != meta.num_blocks * meta.block_bytes)
    return Status::InvalidArgument("chunk: tokens or blocks do not match the chunk's geometry");
  KVF_ASSIGN_OR_RETURN(std::vector<uint8_t> payload, Compress(blocks, compression));
  // Incompressible bytes (noise-like quantized KV) are stored raw rather than grown; the header
  // says which, so the reader never guesses.
  if (compression != ChunkCompression::kNone && payload.size() >= blocks.size()) {
    payload.assign(blocks.begin(), blocks.end());
    compression = ChunkCompression::kNone;
  }
  std::vector<uint8_t> r(kChunkHeaderBytes + 4 * n_tok + payload.size());
  uint8_t* h = r.data();
  std::memcpy(h, kMagic, 8);
  Put32(h + 8, kChunkFormatVersion);
  Put32(h + 12, static_cast<uint32_t>(compression));
  Put64(h + 16, meta.fingerprint);
  Put64(h + 24, meta.key.a);
  Put64(h + 32, meta.key.b);
  Put64(h + 40, meta.parent.a);
  Put64(h + 48, meta.parent.b);
  Put32(h + 56, meta.first_block);
  Put32(h + 60, meta.num_blocks);
  Put32(h + 64, meta.block_tokens);
  Put32(h + 68, 0);
  Put64(h + 72, meta.block_bytes);
  Put64(h + 80, payload.size());
  std::memcpy(h + kChunkHeaderBytes, tokens.data(), 4 * n_tok);
  std::memcpy(h + kChunkHeaderBytes + 4 * n_tok, payload.data(), payload.size());
  Put64(h + kChecksumOffset, Checksum(r));
  return r;
}

Result<std::vector<uint8_t>> DecodeChunk(std::span<const uint8_t> record, const ChunkMeta& want,
                                         std::span<const int32_t> tokens) {
  if (record.size() < kChunkHeaderBytes || std::memcmp(record.data(), kMagic, 8) != 0)
    return Status::DataLoss("chunk: not a kvforge KV chunk (bad magic or truncated header)");
  const uint8_t* h = record.data();
  if (Get32(h + 8) != kChunkFormatVersion)
    return Status::InvalidArgument(StrFormat("chunk: format version %u, this build reads %u",
                                             Get32(h + 8), kChunkFormatVersion));
  const uint32_t comp = Get32(h + 12);
  if (comp > static_cast<uint32_t>(ChunkCompression::kLz4))
    return Status::DataLoss("chunk: unknown compression");
  ChunkMeta got;
  got.fingerprint = Get64(h + 16);
  got.key = {Get64(h + 24), Get64(h + 32)};
  got.parent = {Get64(h + 40), Get64(h + 48)};
  got.first_block = Get32(h + 56);
  got.num_blocks = Get32(h + 60);
  got.block_tokens = Get32(h + 64);
  got.block_bytes = Get64(h + 72);
  const uint64_t stored = Get64(h + 80);
  if (got.fingerprint != want.fingerprint)
    return Status::InvalidArgument("chunk: KV of another model, layout or dtype (fingerprint)");
  if (!(got.key == want.key) || !(got.parent == want.parent) ||
      got.first_block != want.first_block || got.num_blocks != want.num_blocks ||
      got.block_tokens != want.block_tokens || got.block_bytes != want.block_bytes)
    return Status::InvalidArgument("chunk: key or block geometry differs from the one asked for");
  const uint64_t n_tok = static_cast<uint64_t>(got.num_blocks) * got.block_tokens;
  const uint64_t raw = got.num_blocks * got.block_bytes;
  if (got.num_blocks > kMaxChunkBlocks || got.block_tokens > kMaxBlockTokens ||
      raw > kMaxRawBytes || stored > kMaxRawBytes + (kMaxRawBytes >> 4))
    return Status::DataLoss("chunk: header claims an impossible size");
  if (record.size() != kChunkHeaderBytes + 4 * n_tok + stored)
    return Status::DataLoss(
        StrFormat("chunk: %zu bytes, the header implies %llu (truncated?)", record.size(),
                  (unsigned long long)(kChunkHeaderBytes + 4 * n_tok + stored)));
  if (Checksum(record) != Get64(h + kChecksumOffset))
    return Status::DataLoss("chunk: checksum mismatch (corrupted)");
  if (tokens.size() != n_tok || std::memcmp(tokens.data(), h + kChunkHeaderBytes, 4 * n_tok) != 0)
    return Status::InvalidArgument("chunk: holds other tokens than the prompt (key collision)");
  return Decompress(record.subspan(kChunkHeaderBytes + 4 * n_tok),
                    static_cast<ChunkCompression>(comp), raw);
}

}  // namespace kvforge::kvstore
