// libFuzzer target for the tokenizers: any bytes encode (with and without special-token parsing)
// and decode without crashing; decoding what was encoded gives back the input bytes.
// The vocabulary comes from KVF_FUZZ_VOCAB (a GGUF path); the tests pass vocabularies from
// tests/data/tokenizer-tests.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "gguf/gguf_reader.h"
#include "tokenizer/tokenizer.h"

namespace {
std::unique_ptr<kvforge::gguf::GgufFile> g_file;
std::unique_ptr<kvforge::tokenizer::Tokenizer> g_tok;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* path = std::getenv("KVF_FUZZ_VOCAB");
  if (path == nullptr) {
    std::fprintf(stderr, "set KVF_FUZZ_VOCAB to a vocab GGUF\n");
    std::abort();
  }
  auto f = kvforge::gguf::GgufFile::Open(path);
  if (!f.ok()) std::abort();
  g_file = std::move(*f);
  auto t = kvforge::tokenizer::Tokenizer::FromGguf(*g_file);
  if (!t.ok()) std::abort();
  g_tok = std::move(*t);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto plain = g_tok->Encode(text, false, false);
  const auto special = g_tok->Encode(text, true, true);
  kvforge::tokenizer::StreamDecoder d(*g_tok);
  std::string streamed;
  for (auto id : special) streamed += d.Push(id);
  streamed += d.Finish();
  const std::string dec = g_tok->Decode(plain);
  // SentencePiece adds a leading space; text containing U+2581 itself cannot round-trip there
  // (the character is SentencePiece's escaped space), as in llama.cpp.
  const bool spm_prefix = g_tok->vocab().add_space_prefix && !text.empty();
  if (spm_prefix && text.find("\xE2\x96\x81") != std::string::npos) return 0;
  const std::string want = spm_prefix ? " " + text : text;
  if (dec != want) {
    std::fprintf(stderr, "round trip failed\n");
    std::abort();
  }
  return 0;
}
