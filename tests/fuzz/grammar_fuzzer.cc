// libFuzzer target for the constrained-decoding parsers: the first byte picks GBNF, JSON Schema
// or regex text; whatever parses is compiled and matched against the rest of the input, so the
// recognizer and the compilers' output are exercised too. Nothing may crash, hang or leak.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/regex_gbnf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvforge::grammar;
  if (size < 2) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data) + 1, size - 1);
  // The text to compile, then (after a NUL, if any) a string to match.
  const size_t cut = all.find('\0');
  const std::string_view text = all.substr(0, cut);
  const std::string_view probe = cut == std::string_view::npos ? "" : all.substr(cut + 1);
  std::string gbnf;
  switch (data[0] % 3) {
    case 0: gbnf = std::string(text); break;
    case 1: {
      SchemaLimits limits;
      limits.max_grammar_bytes = 1 << 16;
      auto r = JsonSchemaToGbnf(text, limits);
      if (!r.ok()) return 0;
      gbnf = *r;
      break;
    }
    default: {
      auto r = RegexToGbnf(text);
      if (!r.ok()) return 0;
      gbnf = *r;
    }
  }
  GrammarLimits limits;
  limits.max_elements = 1 << 16;
  limits.max_repeat = 64;
  auto g = ParseGbnf(gbnf, limits);
  if (!g.ok()) return 0;
  (void)GrammarMatches(**g, probe);
  (void)GrammarViablePrefix(**g, probe.substr(0, probe.size() / 2));
  return 0;
}
