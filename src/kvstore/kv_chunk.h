// kvstore/kv_chunk.h — the record a KV offload tier stores: a run of consecutive full blocks of
// one token prefix, with everything needed to prove on load that it is the KV asked for.
//
// Record (little-endian; the same bytes in RAM, on disk and in Redis):
//   [0, 96)   header: magic "KVFCHUNK", format version, compression, KV fingerprint, the chunk's
//             128-bit key (chained block key of its last block), the key of the block before its
//             first (the prefix it continues), first block index, block count, tokens per block,
//             bytes per block, stored payload size, XXH3-64 checksum of everything else
//   [96, +4 * num_blocks * block_tokens)   the token ids the blocks hold
//   then the payload: num_blocks x block_bytes (KvStore::ReadBlock's serialisation), stored raw,
//   as one zstd frame, or as one LZ4 block.
// Decode refuses (Status, never a crash) a record that is truncated, fails its checksum, has
// another version, fingerprint, key, parent, block geometry, or tokens other than expected.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kvforge/status.h"
#include "kvmeta/block_hash.h"

namespace kvforge::kvstore {

enum class ChunkCompression : uint32_t { kNone = 0, kZstd = 1, kLz4 = 2 };
std::string_view ChunkCompressionName(ChunkCompression c);
Result<ChunkCompression> ParseChunkCompression(std::string_view name);

inline constexpr uint32_t kChunkFormatVersion = 1;
inline constexpr size_t kChunkHeaderBytes = 96;

struct ChunkMeta {
  uint64_t fingerprint = 0;
  kvmeta::BlockKey key;     // chained key of the chunk's last block
  kvmeta::BlockKey parent;  // chained key before its first block (the salt's seed for block 0)
  uint32_t first_block = 0;
  uint32_t num_blocks = 0;
  uint32_t block_tokens = 0;
  uint64_t block_bytes = 0;
};

// tokens: num_blocks x block_tokens ids; blocks: num_blocks x block_bytes bytes.
Result<std::vector<uint8_t>> EncodeChunk(const ChunkMeta& meta, std::span<const int32_t> tokens,
                                         std::span<const uint8_t> blocks,
                                         ChunkCompression compression);

// Checks `record` against `want` (every field) and `tokens` (the ids the caller's prompt has at
// those positions) and returns the decompressed blocks, num_blocks x block_bytes bytes.
Result<std::vector<uint8_t>> DecodeChunk(std::span<const uint8_t> record, const ChunkMeta& want,
                                         std::span<const int32_t> tokens);

}  // namespace kvforge::kvstore
