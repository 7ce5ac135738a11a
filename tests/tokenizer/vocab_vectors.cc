#include "tokenizer/vocab_vectors.h"

#include <fstream>
#include <sstream>

namespace kvforge::testing {
namespace {
bool Slurp(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}
}  // namespace

std::vector<VocabCase> LoadVocabCases(const std::string& vocab_gguf_path) {
  std::string inp, out;
  if (!Slurp(vocab_gguf_path + ".inp", &inp) || !Slurp(vocab_gguf_path + ".out", &out)) return {};
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  size_t pos = 0, at;
  while ((at = inp.find(sep, pos)) != std::string::npos) {
    inputs.push_back(inp.substr(pos, at - pos));
    pos = at + sep.size();
  }
  std::vector<VocabCase> cases;
  std::istringstream lines(out);
  std::string line;
  for (const auto& in : inputs) {
    if (!std::getline(lines, line)) break;
    VocabCase c;
    c.input = in;
    std::istringstream ids(line);
    int id;
    while (ids >> id) c.expected.push_back(id);
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace kvforge::testing
