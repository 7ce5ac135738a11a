// Tokenizer micro-benchmarks: encode throughput (bytes/s of input text) per vocabulary family on
// ~0.8 MB of English prose (shared/models/tinystories-val-head.txt), plus decode throughput.
// The shared folder is $KVF_SHARED_DIR, else ../shared, else the one next to this source tree.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "tokenizer/tokenizer.h"

namespace {

using kvforge::tokenizer::TokenId;
using kvforge::tokenizer::Tokenizer;

bool Exists(const std::string& path) { return std::ifstream(path).good(); }

std::string SharedDir() {
  if (const char* env = std::getenv("KVF_SHARED_DIR"); env != nullptr && *env != '\0') return env;
  if (Exists("../shared/models/tinystories-val-head.txt")) return "../shared";
  std::string here = __FILE__;  // .../main/bench/tokenizer_bench.cc -> .../shared
  for (int up = 0; up < 3 && !here.empty(); ++up) here = here.substr(0, here.find_last_of('/'));
  return here + "/shared";
}

const std::string& Text() {
  static const std::string text = [] {
    std::ifstream in(SharedDir() + "/models/tinystories-val-head.txt", std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }();
  return text;
}

const Tokenizer* Load(const std::string& vocab) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(vocab);
  if (it != cache.end()) return it->second.get();
  std::unique_ptr<Tokenizer> tok;
  auto f =
      kvforge::gguf::GgufFile::Open(SharedDir() + "/tokenizer-tests/ggml-vocab-" + vocab + ".gguf");
  if (f.ok()) {
    auto t = Tokenizer::FromGguf(**f);
    if (t.ok()) tok = std::move(*t);
  }
  return cache.emplace(vocab, std::move(tok)).first->second.get();
}

void BM_Encode(benchmark::State& state, const char* vocab) {
  const Tokenizer* tok = Load(vocab);
  const std::string& text = Text();
  if (tok == nullptr || text.empty()) {
    state.SkipWithError("vocabulary or text not found (set KVF_SHARED_DIR)");
    return;
  }
  size_t n_tokens = 0;
  for (auto _ : state) {
    auto ids = tok->Encode(text, /*add_special=*/false, /*parse_special=*/false);
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(n_tokens);
  state.counters["bytes/token"] = static_cast<double>(text.size()) / static_cast<double>(n_tokens);
}

void BM_Decode(benchmark::State& state, const char* vocab) {
  const Tokenizer* tok = Load(vocab);
  const std::string& text = Text();
  if (tok == nullptr || text.empty()) {
    state.SkipWithError("vocabulary or text not found (set KVF_SHARED_DIR)");
    return;
  }
  const std::vector<TokenId> ids = tok->Encode(text, false, false);
  for (auto _ : state) {
    std::string out = tok->Decode(ids);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}

// One vocabulary per pre-tokenizer family (plus SentencePiece for comparison).
#define KVF_TOKENIZER_BENCH(name, vocab)                                    \
  BENCHMARK_CAPTURE(BM_Encode, name, vocab)->Unit(benchmark::kMillisecond); \
  BENCHMARK_CAPTURE(BM_Decode, name, vocab)->Unit(benchmark::kMillisecond)

KVF_TOKENIZER_BENCH(gpt2, "gpt-2");
KVF_TOKENIZER_BENCH(llama3, "llama-bpe");
KVF_TOKENIZER_BENCH(qwen2, "qwen2");
KVF_TOKENIZER_BENCH(qwen35, "qwen35");
KVF_TOKENIZER_BENCH(deepseek_llm, "deepseek-llm");
KVF_TOKENIZER_BENCH(deepseek_coder, "deepseek-coder");
KVF_TOKENIZER_BENCH(falcon, "falcon");
KVF_TOKENIZER_BENCH(starcoder, "starcoder");
KVF_TOKENIZER_BENCH(refact, "refact");
KVF_TOKENIZER_BENCH(command_r, "command-r");
KVF_TOKENIZER_BENCH(mpt, "mpt");
KVF_TOKENIZER_BENCH(default_aquila, "aquila");
KVF_TOKENIZER_BENCH(gemma4, "gemma-4");
KVF_TOKENIZER_BENCH(spm_llama, "llama-spm");

}  // namespace
