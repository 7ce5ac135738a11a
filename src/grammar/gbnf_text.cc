#include "grammar/gbnf_text.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <utility>

#include "base/strings.h"

namespace kvforge::grammar {
namespace {

// Appends \xHH, \uHHHH or \UHHHHHHHH for a code point that must not appear raw.
void AppendEscapedCodePoint(uint32_t cp, std::string* out) {
  char buf[16];
  if (cp <= 0xFF) {
    std::snprintf(buf, sizeof buf, "\\x%02X", cp);
  } else if (cp <= 0xFFFF) {
    std::snprintf(buf, sizeof buf, "\\u%04X", cp);
  } else {
    std::snprintf(buf, sizeof buf, "\\U%08X", cp);
  }
  out->append(buf);
}

}  // namespace

std::string GbnfLiteral(std::string_view text) {
  // The characters a GBNF literal writes with a backslash.
  static constexpr std::pair<char, const char*> kEscapes[] = {
      {'"', "\\\""}, {'\\', "\\\\"}, {'\n', "\\n"}, {'\r', "\\r"}, {'\t', "\\t"}};
  std::string out = "\"";
  for (unsigned char c : text) {
    const auto* e = std::find_if(std::begin(kEscapes), std::end(kEscapes),
                                 [c](const auto& p) { return p.first == static_cast<char>(c); });
    if (e != std::end(kEscapes)) {
      out += e->second;
    } else if (c < 0x20 || c == 0x7F) {  // bytes >= 0x80 stay raw: literals are read as UTF-8
      AppendEscapedCodePoint(c, &out);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
  return out;
}

std::string GbnfClassChar(uint32_t cp) {
  std::string out;
  switch (cp) {
    case ']':
      return "\\]";
    case '[':
      return "\\[";
    case '^':
      return "\\^";
    case '-':
      return "\\-";
    case '\\':
      return "\\\\";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      break;
  }
  if (cp < 0x20 || cp == 0x7F || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
    AppendEscapedCodePoint(cp, &out);
  } else {
    base::AppendUtf8(cp, &out);
  }
  return out;
}

std::string GbnfRuleName(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out.push_back(ok ? static_cast<char>(c) : '-');
  }
  if (out.empty()) out = "r";
  return out;
}

}  // namespace kvforge::grammar
