// Tokenizer micro-benchmarks: encode throughput (bytes/s of input text) per vocabulary family on
// English prose (models/tinystories-val-head.txt), decode throughput, and how encoding and
// pre-tokenizing a long run of one unit grows with its length (Big-O fit: linear, not
// quadratic; the unit tests check correctness of long runs, this measures their cost).
// The data folder is $KVF_SHARED_DIR, else ../shared, else the repository's tests/data.
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
  std::string here = __FILE__;  // .../main/bench/tokenizer_bench.cc -> .../main/tests/data
  for (int up = 0; up < 2 && !here.empty(); ++up) here = here.substr(0, here.find_last_of('/'));
  return here + "/tests/data";
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

// A run of state.range(0) bytes of one unit (" a" or runs of spaces: the worst cases for
// merge-based encoders), so that the Big-O fit across lengths shows the growth.
std::string Run(const char* unit, int64_t bytes) {
  std::string s;
  while (static_cast<int64_t>(s.size()) < bytes) s += unit;
  return s;
}

void BM_EncodeRun(benchmark::State& state, const char* vocab, const char* unit) {
  const Tokenizer* tok = Load(vocab);
  if (tok == nullptr) {
    state.SkipWithError("vocabulary not found (set KVF_SHARED_DIR)");
    return;
  }
  const std::string text = Run(unit, state.range(0));
  for (auto _ : state) {
    auto ids = tok->Encode(text, false, false);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetComplexityN(state.range(0));
}

#define KVF_TOKENIZER_RUN_BENCH(name, vocab, unit)   \
  BENCHMARK_CAPTURE(BM_EncodeRun, name, vocab, unit) \
      ->RangeMultiplier(4)                           \
      ->Range(6250, 100000)                          \
      ->Unit(benchmark::kMillisecond)                \
      ->Complexity()

KVF_TOKENIZER_RUN_BENCH(gpt2_spaces, "gpt-2", " ");
KVF_TOKENIZER_RUN_BENCH(gpt2_words, "gpt-2", " a");
KVF_TOKENIZER_RUN_BENCH(gemma4_spaces, "gemma-4", " ");
KVF_TOKENIZER_RUN_BENCH(spm_llama_spaces, "llama-spm", " ");
KVF_TOKENIZER_RUN_BENCH(spm_llama_letters, "llama-spm", "a");

}  // namespace
