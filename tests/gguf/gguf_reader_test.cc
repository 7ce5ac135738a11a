// GGUF reader: round trips through the writer, real files, and corruption (truncation at many
// offsets, flipped bytes, crafted bad headers): every case is a clean error, never a crash.
#include "gguf/gguf_reader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "gguf/gguf_writer.h"
#include "support/test_paths.h"

namespace kvforge::gguf {
namespace {

std::vector<uint8_t> SmallFile() {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetU32("llama.block_count", 3);
  w.SetF32("llama.rope.freq_base", 10000.0f);
  w.SetBool("flag", true);
  w.SetStringArray("tokenizer.ggml.tokens", {"<unk>", "a", "b\xC3\xA9"});
  w.SetF32Array("tokenizer.ggml.scores", {0.0f, -1.5f, 2.25f});
  w.SetI32Array("ints", {-1, 7});
  std::vector<uint8_t> data(4 * 32 * 4);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i);
  EXPECT_TRUE(w.AddTensor("w", tensor::DType::kF32, {32, 4}, data).ok());
  std::vector<uint8_t> q(34 * 2, 1);
  EXPECT_TRUE(w.AddTensor("q", tensor::DType::kQ8_0, {64}, q).ok());
  return w.Serialize();
}

TEST(GgufReaderTest, RoundTripsEveryValueType) {
  const auto bytes = SmallFile();
  auto f = GgufFile::FromMemory(bytes.data(), bytes.size(), "mem");
  ASSERT_TRUE(f.ok()) << f.error().ToString();
  EXPECT_EQ((*f)->version(), 3u);
  EXPECT_EQ(*(*f)->GetString("general.architecture"), "llama");
  EXPECT_EQ(*(*f)->GetInt("llama.block_count"), 3);
  EXPECT_FLOAT_EQ(static_cast<float>(*(*f)->GetFloat("llama.rope.freq_base")), 10000.0f);
  EXPECT_TRUE(*(*f)->GetBool("flag"));
  auto toks = (*f)->GetArray("tokenizer.ggml.tokens", ValueType::kString);
  ASSERT_TRUE(toks.ok());
  EXPECT_EQ((*toks)->strings[2], "b\xC3\xA9");
  auto scores = (*f)->GetArray("tokenizer.ggml.scores", ValueType::kF32);
  ASSERT_TRUE(scores.ok());
  EXPECT_FLOAT_EQ(static_cast<float>(GgufFile::ArrayFloat(**scores, 2)), 2.25f);
  auto ints = (*f)->GetArray("ints", ValueType::kI32);
  ASSERT_TRUE(ints.ok());
  EXPECT_EQ(GgufFile::ArrayInt(**ints, 0), -1);
  const TensorInfo* w = (*f)->FindTensor("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dims, (std::vector<int64_t>{32, 4}));
  EXPECT_EQ(w->nbytes, 512u);
  EXPECT_EQ(w->data[5], 5);
  EXPECT_EQ((*f)->FindTensor("q")->nbytes, 68u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w->data) % 32,
            reinterpret_cast<uintptr_t>(bytes.data()) % 32);
  // Typed getters name the key on mismatch or absence.
  EXPECT_EQ((*f)->GetInt("general.architecture").error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*f)->GetString("nope").error().code(), StatusCode::kNotFound);
  EXPECT_NE((*f)->GetString("nope").error().message().find("nope"), std::string::npos);
  EXPECT_EQ(*(*f)->GetIntOr("nope", 9), 9);
}

TEST(GgufReaderTest, OpensRealModels) {
  for (const char* rel : {"models/stories260K.gguf", "models/llama-2-tiny-random.gguf",
                          "tokenizer-tests/ggml-vocab-llama-spm.gguf"}) {
    auto f = GgufFile::Open(kvforge::testing::SharedDir() + "/" + rel);
    ASSERT_TRUE(f.ok()) << rel << ": " << f.error().ToString();
    EXPECT_GE((*f)->keys().size(), 5u);
  }
}

Status ParseBytes(const std::vector<uint8_t>& b) {
  auto f = GgufFile::FromMemory(b.data(), b.size(), "corrupt.gguf");
  return f.ok() ? Status::Ok() : f.error();
}

TEST(GgufReaderTest, TruncationAtEveryOffsetIsACleanError) {
  const auto bytes = SmallFile();
  // Cut before the last tensor's data ends: must fail; the message names the file.
  const TensorInfo* last = nullptr;
  auto f = GgufFile::FromMemory(bytes.data(), bytes.size(), "mem");
  ASSERT_TRUE(f.ok());
  last = (*f)->FindTensor("q");
  const size_t needed = static_cast<size_t>(last->data - bytes.data()) + last->nbytes;
  for (size_t n = 0; n < needed; ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    Status s = ParseBytes(cut);
    ASSERT_FALSE(s.ok()) << "truncated at " << n;
    EXPECT_NE(s.message().find("corrupt.gguf"), std::string::npos) << s.message();
  }
}

TEST(GgufReaderTest, TruncatedRealModelIsACleanError) {
  const std::string data =
      kvforge::testing::ReadFileOrDie(kvforge::testing::SharedDir() + "/models/stories260K.gguf");
  std::vector<uint8_t> bytes(data.begin(), data.end());
  for (size_t n = 0; n < bytes.size(); n += bytes.size() / 97 + 1) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    EXPECT_FALSE(ParseBytes(cut).ok()) << n;
  }
}

TEST(GgufReaderTest, FlippedBytesNeverCrash) {
  const auto bytes = SmallFile();
  std::mt19937 rng(123);
  int errors = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    auto b = bytes;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) b[rng() % b.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
    if (!ParseBytes(b).ok()) ++errors;  // either parses (a value changed) or a clean error
  }
  EXPECT_GT(errors, 100);
}

void Patch64(std::vector<uint8_t>* b, size_t at, uint64_t v) { std::memcpy(b->data() + at, &v, 8); }
void Patch32(std::vector<uint8_t>* b, size_t at, uint32_t v) { std::memcpy(b->data() + at, &v, 4); }

TEST(GgufReaderTest, SpecificCorruptionsGetSpecificErrors) {
  const auto good = SmallFile();
  auto b = good;
  b[0] = 'X';
  Status s = ParseBytes(b);
  EXPECT_NE(s.message().find("bad magic"), std::string::npos) << s.message();

  b = good;
  Patch32(&b, 4, 1);
  EXPECT_EQ(ParseBytes(b).code(), StatusCode::kUnimplemented);
  Patch32(&b, 4, 99);
  EXPECT_NE(ParseBytes(b).message().find("unsupported GGUF version 99"), std::string::npos);

  b = good;
  Patch64(&b, 8, ~0ull);  // tensor count
  EXPECT_NE(ParseBytes(b).message().find("cannot fit"), std::string::npos);
  b = good;
  Patch64(&b, 16, 1ull << 60);  // kv count
  EXPECT_NE(ParseBytes(b).message().find("cannot fit"), std::string::npos);

  // First key's string length made huge.
  b = good;
  Patch64(&b, 24, 1ull << 62);
  EXPECT_FALSE(ParseBytes(b).ok());

  // Unknown value type on the first key (its type follows the key string).
  b = good;
  const size_t key_len = std::string("general.architecture").size();
  Patch32(&b, 32 + key_len, 77);
  EXPECT_NE(ParseBytes(b).message().find("unknown value type 77"), std::string::npos);
}

std::vector<uint8_t> WithTensors(
    const std::vector<std::tuple<std::string, uint32_t, uint64_t, uint64_t>>& ts,
    size_t data_bytes) {
  // Hand-built file: no metadata, tensors (name, type, dim0, offset).
  std::vector<uint8_t> b;
  auto put = [&](const void* p, size_t n) {
    b.insert(b.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
  };
  uint32_t magic = 0x46554747, ver = 3;
  uint64_t nt = ts.size(), nkv = 0;
  put(&magic, 4);
  put(&ver, 4);
  put(&nt, 8);
  put(&nkv, 8);
  for (const auto& [name, type, dim, off] : ts) {
    uint64_t len = name.size();
    uint32_t nd = 1;
    put(&len, 8);
    put(name.data(), name.size());
    put(&nd, 4);
    put(&dim, 8);
    put(&type, 4);
    put(&off, 8);
  }
  b.resize((b.size() + 31) / 32 * 32 + data_bytes, 0);
  return b;
}

TEST(GgufReaderTest, TensorTableValidation) {
  EXPECT_TRUE(ParseBytes(WithTensors({{"a", 0, 8, 0}}, 32)).ok());
  EXPECT_NE(ParseBytes(WithTensors({{"a", 0, 8, 0}}, 16)).message().find("past the end"),
            std::string::npos);
  EXPECT_NE(ParseBytes(WithTensors({{"a", 0, 8, 0}, {"a", 0, 8, 32}}, 64))
                .message()
                .find("duplicate tensor"),
            std::string::npos);
  EXPECT_EQ(ParseBytes(WithTensors({{"a", 200, 8, 0}}, 32)).code(), StatusCode::kUnimplemented);
  EXPECT_NE(ParseBytes(WithTensors({{"a", 0, 8, 4}}, 64)).message().find("alignment"),
            std::string::npos);
  EXPECT_NE(ParseBytes(WithTensors({{"a", 8, 33, 0}}, 64)).message().find("block size"),
            std::string::npos);
  EXPECT_NE(ParseBytes(WithTensors({{"a", 0, 1ull << 62, 0}}, 64)).message().find("overflow"),
            std::string::npos);
  EXPECT_FALSE(ParseBytes(WithTensors({{"a", 0, 8, ~0ull - 31}}, 64)).ok());
}

TEST(GgufReaderTest, MissingFileAndEmptyFile) {
  auto f = GgufFile::Open("/nonexistent/x.gguf");
  EXPECT_EQ(f.error().code(), StatusCode::kNotFound);
  EXPECT_NE(f.error().message().find("/nonexistent/x.gguf"), std::string::npos);
  EXPECT_FALSE(GgufFile::Open("/dev/null").ok());
  EXPECT_FALSE(GgufFile::Open("/tmp").ok());
}

}  // namespace
}  // namespace kvforge::gguf
