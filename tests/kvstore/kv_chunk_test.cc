// The offload record format: every compression round-trips; a record that is truncated anywhere,
// has any single byte changed, or carries another version, fingerprint, key, geometry or tokens
// is refused with a Status (never a crash, never the wrong bytes).
#include "kvstore/kv_chunk.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "support/test_rng.h"

namespace kvforge::kvstore {
namespace {

struct Sample {
  ChunkMeta meta;
  std::vector<int32_t> tokens;  // [num_blocks * block_tokens]
  std::vector<uint8_t> blocks;  // [num_blocks * block_bytes]
};

Sample MakeSample(uint32_t num_blocks, uint32_t block_tokens, uint64_t block_bytes, uint32_t seed) {
  Sample s;
  s.meta.fingerprint = 0x1234abcd5678ef00ull + seed;
  s.meta.key = {11u + seed, 22u + seed};
  s.meta.parent = {33u + seed, 44u + seed};
  s.meta.first_block = 4;
  s.meta.num_blocks = num_blocks;
  s.meta.block_tokens = block_tokens;
  s.meta.block_bytes = block_bytes;
  for (uint32_t i = 0; i < num_blocks * block_tokens; ++i)
    s.tokens.push_back(static_cast<int32_t>(i * 7 + seed));
  // Each block half repetitive, half noise, so compressors both shrink it and have to keep every
  // byte.
  testing::Rng rng(seed);
  s.blocks.resize(num_blocks * block_bytes);
  for (size_t i = 0; i < s.blocks.size(); ++i)
    s.blocks[i] = (i % block_bytes) * 2 < block_bytes ? static_cast<uint8_t>(i / 64)
                                                      : static_cast<uint8_t>(rng.Next() & 0xff);
  return s;
}

constexpr ChunkCompression kAll[] = {ChunkCompression::kNone, ChunkCompression::kLz4,
                                     ChunkCompression::kZstd};

TEST(KvChunk, RoundTripsWithEveryCompression) {
  const Sample s = MakeSample(3, 16, 640, 1);
  for (ChunkCompression c : kAll) {
    SCOPED_TRACE(std::string(ChunkCompressionName(c)));
    auto rec = EncodeChunk(s.meta, s.tokens, s.blocks, c);
    ASSERT_TRUE(rec.ok()) << rec.error().ToString();
    if (c != ChunkCompression::kNone) {
      EXPECT_LT(rec->size(), kChunkHeaderBytes + 4 * s.tokens.size() + s.blocks.size());
    }
    auto raw = DecodeChunk(*rec, s.meta, s.tokens);
    ASSERT_TRUE(raw.ok()) << raw.error().ToString();
    EXPECT_EQ(*raw, s.blocks);
    auto parsed = ParseChunkCompression(ChunkCompressionName(c));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, c);
  }
  EXPECT_FALSE(ParseChunkCompression("gzip").ok());
}

TEST(KvChunk, IncompressibleBytesAreStoredRawNotGrown) {
  Sample s = MakeSample(2, 16, 640, 2);
  testing::Rng rng(99);
  for (uint8_t& b : s.blocks) b = static_cast<uint8_t>(rng.Next() & 0xff);
  for (ChunkCompression c : kAll) {
    SCOPED_TRACE(std::string(ChunkCompressionName(c)));
    auto rec = EncodeChunk(s.meta, s.tokens, s.blocks, c);
    ASSERT_TRUE(rec.ok()) << rec.error().ToString();
    EXPECT_EQ(rec->size(), kChunkHeaderBytes + 4 * s.tokens.size() + s.blocks.size());
    auto raw = DecodeChunk(*rec, s.meta, s.tokens);
    ASSERT_TRUE(raw.ok()) << raw.error().ToString();
    EXPECT_EQ(*raw, s.blocks);
  }
}

TEST(KvChunk, RefusesEveryTruncationAndEverySingleByteChange) {
  const Sample s = MakeSample(2, 4, 96, 2);
  for (ChunkCompression c : kAll) {
    SCOPED_TRACE(std::string(ChunkCompressionName(c)));
    auto rec = EncodeChunk(s.meta, s.tokens, s.blocks, c);
    ASSERT_TRUE(rec.ok());
    for (size_t n = 0; n < rec->size(); ++n) {
      std::vector<uint8_t> cut(rec->begin(), rec->begin() + static_cast<std::ptrdiff_t>(n));
      EXPECT_FALSE(DecodeChunk(cut, s.meta, s.tokens).ok()) << "truncated to " << n;
    }
    std::vector<uint8_t> longer = *rec;
    longer.push_back(0);
    EXPECT_FALSE(DecodeChunk(longer, s.meta, s.tokens).ok());
    for (size_t i = 0; i < rec->size(); ++i) {
      for (uint8_t flip : {uint8_t{0x01}, uint8_t{0x80}}) {
        std::vector<uint8_t> bad = *rec;
        bad[i] ^= flip;
        EXPECT_FALSE(DecodeChunk(bad, s.meta, s.tokens).ok()) << "byte " << i;
      }
    }
  }
}

TEST(KvChunk, RefusesOtherFingerprintKeyGeometryOrTokens) {
  const Sample s = MakeSample(2, 4, 64, 3);
  auto rec = EncodeChunk(s.meta, s.tokens, s.blocks, ChunkCompression::kLz4);
  ASSERT_TRUE(rec.ok());
  auto refused = [&](ChunkMeta want, std::vector<int32_t> tokens) {
    return !DecodeChunk(*rec, want, tokens).ok();
  };
  ChunkMeta m = s.meta;
  m.fingerprint ^= 1;
  EXPECT_TRUE(refused(m, s.tokens)) << "another model or format";
  m = s.meta;
  m.key.b ^= 1;
  EXPECT_TRUE(refused(m, s.tokens)) << "another key";
  m = s.meta;
  m.parent.a ^= 1;
  EXPECT_TRUE(refused(m, s.tokens)) << "another parent prefix";
  m = s.meta;
  m.first_block = 0;
  EXPECT_TRUE(refused(m, s.tokens)) << "another position";
  m = s.meta;
  m.block_bytes = 32;
  EXPECT_TRUE(refused(m, s.tokens)) << "another block size";
  std::vector<int32_t> other = s.tokens;
  other.back() += 1;
  EXPECT_TRUE(refused(s.meta, other)) << "other tokens under the same key";
  EXPECT_TRUE(refused(s.meta, std::vector<int32_t>(s.tokens.begin(), s.tokens.end() - 1)));
}

TEST(KvChunk, RefusesAnotherFormatVersionWithAClearMessage) {
  const Sample s = MakeSample(1, 4, 32, 4);
  auto rec = EncodeChunk(s.meta, s.tokens, s.blocks, ChunkCompression::kNone);
  ASSERT_TRUE(rec.ok());
  const uint32_t future = kChunkFormatVersion + 1;
  std::memcpy(rec->data() + 8, &future, 4);
  auto r = DecodeChunk(*rec, s.meta, s.tokens);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("version"), std::string::npos) << r.error().ToString();
}

TEST(KvChunk, EncodeRefusesInconsistentInput) {
  Sample s = MakeSample(2, 4, 64, 5);
  EXPECT_FALSE(
      EncodeChunk(s.meta, std::span(s.tokens).first(7), s.blocks, ChunkCompression::kNone).ok());
  EXPECT_FALSE(
      EncodeChunk(s.meta, s.tokens, std::span(s.blocks).first(100), ChunkCompression::kLz4).ok());
  s.meta.num_blocks = 0;
  EXPECT_FALSE(EncodeChunk(s.meta, {}, {}, ChunkCompression::kNone).ok());
}

}  // namespace
}  // namespace kvforge::kvstore
