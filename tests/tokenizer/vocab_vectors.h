// vocab_vectors.h — loads llama.cpp's tokenizer test vectors (NAME.gguf.inp / .out) from
// tests/data/tokenizer-tests: inputs separated by "\n__ggml_vocab_test__\n", one output line of
// space-prefixed ids per input.
#pragma once

#include <string>
#include <vector>

namespace kvforge::testing {

struct VocabCase {
  std::string input;
  std::vector<int> expected;
};

// Empty when the files are missing (the caller should GTEST_SKIP or fail as appropriate).
std::vector<VocabCase> LoadVocabCases(const std::string& vocab_gguf_path);

}  // namespace kvforge::testing
