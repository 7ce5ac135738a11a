#include "chat/pystr.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace kvforge::chat {

uint32_t DecodeUtf8(std::string_view s, size_t* pos) {
  const size_t i = *pos;
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    *pos = i + 1;
    return b0;
  }
  int len = 0;
  uint32_t cp = 0;
  uint32_t min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    cp = b0 & 0x1F;
    min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    cp = b0 & 0x0F;
    min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    cp = b0 & 0x07;
    min = 0x10000;
  } else {
    *pos = i + 1;
    return 0xFFFD;
  }
  if (i + static_cast<size_t>(len) > s.size()) {
    *pos = i + 1;
    return 0xFFFD;
  }
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
    if ((b & 0xC0) != 0x80) {
      *pos = i + 1;
      return 0xFFFD;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    *pos = i + 1;
    return 0xFFFD;
  }
  *pos = i + static_cast<size_t>(len);
  return cp;
}

bool IsAscii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

size_t CodePointCount(std::string_view s) {
  if (IsAscii(s)) return s.size();
  size_t n = 0;
  for (size_t pos = 0; pos < s.size(); ++n) DecodeUtf8(s, &pos);
  return n;
}

std::vector<size_t> CodePointOffsets(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  for (size_t pos = 0; pos < s.size();) {
    offsets.push_back(pos);
    DecodeUtf8(s, &pos);
  }
  offsets.push_back(s.size());
  return offsets;
}

bool IsValidUtf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const uint32_t cp = DecodeUtf8(s, &pos);
    if (cp == 0xFFFD && pos == start + 1 && static_cast<unsigned char>(s[start]) >= 0x80) {
      return false;
    }
  }
  return true;
}

bool IsPySpace(uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool IsPyDigit(uint32_t cp) {
  return (cp >= '0' && cp <= '9') || (cp >= 0xFF10 && cp <= 0xFF19) || (cp >= 0x660 && cp <= 0x669);
}

namespace {

// Case pairs outside ASCII: [lower, upper] ranges where upper = lower - delta.
bool IsLatin1Upper(uint32_t cp) { return cp >= 0xC0 && cp <= 0xDE && cp != 0xD7; }
bool IsLatin1Lower(uint32_t cp) { return cp >= 0xDF && cp <= 0xFF && cp != 0xF7; }

bool IsPunctOrSymbol(uint32_t cp) {
  return (cp >= 0x2010 && cp <= 0x2BFF) || (cp >= 0x3000 && cp <= 0x303F) ||
         (cp >= 0xFF00 && cp <= 0xFF0F) || (cp >= 0xFE30 && cp <= 0xFE4F) ||
         (cp >= 0x1F000 && cp <= 0x1FAFF) || (cp >= 0xE000 && cp <= 0xF8FF) || cp == 0xFFFD;
}

}  // namespace

bool IsPyUpper(uint32_t cp) {
  if (cp < 0x80) return cp >= 'A' && cp <= 'Z';
  if (IsLatin1Upper(cp)) return true;
  if (cp >= 0x100 && cp <= 0x17F) return ToLowerCp(cp) != cp;
  if (cp >= 0x391 && cp <= 0x3A9) return true;
  if (cp >= 0x400 && cp <= 0x42F) return true;
  return false;
}

bool IsPyLower(uint32_t cp) {
  if (cp < 0x80) return cp >= 'a' && cp <= 'z';
  if (IsLatin1Lower(cp) || cp == 0xB5) return true;
  if (cp >= 0x100 && cp <= 0x17F) return ToUpperCp(cp) != cp;
  if (cp >= 0x3B1 && cp <= 0x3C9) return true;
  if (cp >= 0x430 && cp <= 0x45F) return true;
  return false;
}

bool IsPyAlpha(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  if (cp < 0xC0) return cp == 0xAA || cp == 0xB5 || cp == 0xBA;
  if (cp == 0xD7 || cp == 0xF7) return false;
  if (IsPySpace(cp) || IsPunctOrSymbol(cp) || IsPyDigit(cp)) return false;
  return true;
}

bool IsWordChar(uint32_t cp) { return cp == '_' || IsPyAlpha(cp) || IsPyDigit(cp); }

uint32_t ToUpperCp(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
  if (cp == 0xFF) return 0x178;
  if (cp == 0xB5) return 0x39C;
  if (IsLatin1Lower(cp) && cp != 0xDF) return cp - 32;
  if (cp >= 0x100 && cp <= 0x137) return cp & ~1u;
  if (cp >= 0x139 && cp <= 0x148) return (cp & 1) ? cp : cp - 1;
  if (cp >= 0x14A && cp <= 0x177) return cp & ~1u;
  if (cp >= 0x179 && cp <= 0x17E) return (cp & 1) ? cp : cp - 1;
  if (cp >= 0x3B1 && cp <= 0x3C9 && cp != 0x3C2) return cp - 32;
  if (cp == 0x3C2) return 0x3A3;
  if (cp >= 0x430 && cp <= 0x44F) return cp - 32;
  if (cp >= 0x450 && cp <= 0x45F) return cp - 80;
  return cp;
}

uint32_t ToLowerCp(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  if (cp == 0x178) return 0xFF;
  if (IsLatin1Upper(cp)) return cp + 32;
  if (cp >= 0x100 && cp <= 0x137) return cp | 1u;
  if (cp >= 0x139 && cp <= 0x148) return (cp & 1) ? cp + 1 : cp;
  if (cp >= 0x14A && cp <= 0x177) return cp | 1u;
  if (cp >= 0x179 && cp <= 0x17E) return (cp & 1) ? cp + 1 : cp;
  if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2) return cp + 32;
  if (cp >= 0x410 && cp <= 0x42F) return cp + 32;
  if (cp >= 0x400 && cp <= 0x40F) return cp + 80;
  return cp;
}

bool IsLineBreak(uint32_t cp) {
  return (cp >= 0x0A && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1E) || cp == 0x85 || cp == 0x2028 ||
         cp == 0x2029;
}

bool IsPrintable(uint32_t cp) {
  if (cp < 0x20 || cp == 0x7F) return false;
  if (cp < 0x7F) return true;
  if (cp <= 0xA0 || cp == 0xAD) return false;
  if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F)) {
    return false;
  }
  if ((cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 || cp == 0xFEFF || cp == 0x61C) return false;
  if ((cp >= 0xE000 && cp <= 0xF8FF) || (cp >= 0xFFF9 && cp <= 0xFFFB)) return false;
  if (cp >= 0xF0000) return false;
  return true;
}

namespace {

template <typename F>
std::string MapCodePoints(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  if (IsAscii(s)) {
    for (char c : s) out.push_back(static_cast<char>(f(static_cast<unsigned char>(c))));
    return out;
  }
  for (size_t pos = 0; pos < s.size();) AppendUtf8(f(DecodeUtf8(s, &pos)), &out);
  return out;
}

bool IsCased(uint32_t cp) { return IsPyUpper(cp) || IsPyLower(cp); }

}  // namespace

std::string PyUpper(std::string_view s) { return MapCodePoints(s, ToUpperCp); }
std::string PyLower(std::string_view s) { return MapCodePoints(s, ToLowerCp); }

std::string PyCapitalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool first = true;
  for (size_t pos = 0; pos < s.size();) {
    const uint32_t cp = DecodeUtf8(s, &pos);
    AppendUtf8(first ? ToUpperCp(cp) : ToLowerCp(cp), &out);
    first = false;
  }
  return out;
}

std::string PyTitle(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool previous_cased = false;
  for (size_t pos = 0; pos < s.size();) {
    const uint32_t cp = DecodeUtf8(s, &pos);
    AppendUtf8(previous_cased ? ToLowerCp(cp) : ToUpperCp(cp), &out);
    previous_cased = IsCased(cp);
  }
  return out;
}

std::string PySwapCase(std::string_view s) {
  return MapCodePoints(s, [](uint32_t cp) {
    if (IsPyUpper(cp)) return ToLowerCp(cp);
    if (IsPyLower(cp)) return ToUpperCp(cp);
    return cp;
  });
}

namespace {

bool InChars(uint32_t cp, const std::string* chars) {
  if (chars == nullptr) return IsPySpace(cp);
  for (size_t pos = 0; pos < chars->size();) {
    if (DecodeUtf8(*chars, &pos) == cp) return true;
  }
  return false;
}

}  // namespace

std::string_view PyStrip(std::string_view s, const std::string* chars, bool left, bool right) {
  size_t begin = 0;
  size_t end = s.size();
  if (left) {
    while (begin < end) {
      size_t next = begin;
      if (!InChars(DecodeUtf8(s, &next), chars)) break;
      begin = next;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
      size_t pos = start;
      const uint32_t cp = DecodeUtf8(s, &pos);
      if (pos != end) {  // invalid sequence: treat the last byte alone
        start = end - 1;
        pos = start;
        if (!InChars(DecodeUtf8(s, &pos), chars)) break;
      } else if (!InChars(cp, chars)) {
        break;
      }
      end = start;
    }
  }
  return s.substr(begin, end - begin);
}

std::vector<std::string> PySplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep != nullptr) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      const size_t hit = s.find(*sep, start);
      if (hit == std::string_view::npos) break;
      parts.emplace_back(s.substr(start, hit - start));
      start = hit + sep->size();
    }
    parts.emplace_back(s.substr(start));
    return parts;
  }
  size_t pos = 0;
  while (pos < s.size()) {
    // skip whitespace
    size_t next = pos;
    while (pos < s.size()) {
      next = pos;
      if (!IsPySpace(DecodeUtf8(s, &next))) break;
      pos = next;
    }
    if (pos >= s.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
      // The rest (with trailing whitespace stripped) is the last part.
      parts.emplace_back(PyStrip(s.substr(pos), nullptr, false, true));
      return parts;
    }
    const size_t word = pos;
    while (pos < s.size()) {
      next = pos;
      if (IsPySpace(DecodeUtf8(s, &next))) break;
      pos = next;
    }
    parts.emplace_back(s.substr(word, pos - word));
  }
  return parts;
}

std::vector<std::string> PyRSplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  if (maxsplit < 0) return PySplit(s, sep, maxsplit);
  std::vector<std::string> parts;
  if (sep != nullptr) {
    size_t end = s.size();
    while (static_cast<int64_t>(parts.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      parts.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    parts.emplace_back(s.substr(0, end));
  } else {
    std::string_view rest = PyStrip(s, nullptr, false, true);
    while (!rest.empty()) {
      if (static_cast<int64_t>(parts.size()) >= maxsplit) {
        parts.emplace_back(rest);
        break;
      }
      // find the start of the last word
      const std::vector<size_t> offsets = CodePointOffsets(rest);
      size_t k = offsets.size() - 1;
      while (k > 0) {
        size_t p = offsets[k - 1];
        if (IsPySpace(DecodeUtf8(rest, &p))) break;
        --k;
      }
      parts.emplace_back(rest.substr(offsets[k]));
      rest = PyStrip(rest.substr(0, offsets[k]), nullptr, false, true);
    }
  }
  return std::vector<std::string>(parts.rbegin(), parts.rend());
}

std::vector<std::string> PySplitLines(std::string_view s, bool keepends) {
  std::vector<std::string> lines;
  size_t start = 0;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t here = pos;
    const uint32_t cp = DecodeUtf8(s, &pos);
    if (!IsLineBreak(cp)) continue;
    size_t end_of_break = pos;
    if (cp == '\r' && pos < s.size() && s[pos] == '\n') end_of_break = ++pos;
    lines.emplace_back(s.substr(start, (keepends ? end_of_break : here) - start));
    start = end_of_break;
  }
  if (start < s.size()) lines.emplace_back(s.substr(start));
  return lines;
}

void AppendStrRepr(std::string_view s, std::string* out) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  out->push_back(quote);
  for (size_t pos = 0; pos < s.size();) {
    const uint32_t cp = DecodeUtf8(s, &pos);
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      out->append("\\n");
    } else if (cp == '\r') {
      out->append("\\r");
    } else if (cp == '\t') {
      out->append("\\t");
    } else if (IsPrintable(cp)) {
      AppendUtf8(cp, out);
    } else {
      char buf[16];
      if (cp < 0x100) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", cp);
      } else if (cp < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      } else {
        std::snprintf(buf, sizeof(buf), "\\U%08x", cp);
      }
      out->append(buf);
    }
  }
  out->push_back(quote);
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
  // sci is like "-1.2345e+17" or "5e-05"
  bool negative = false;
  if (sci.front() == '-') {
    negative = true;
    sci.remove_prefix(1);
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e)) {
    if (c != '.') digits.push_back(c);
  }
  int exponent = 0;
  std::from_chars(sci.data() + e + 1 + (sci[e + 1] == '+' ? 1 : 0), sci.data() + sci.size(),
                  exponent);
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out += digits;
    } else {
      const size_t point = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= point) {
        out += digits;
        out.append(point - digits.size(), '0');
        out += ".0";
      } else {
        out += digits.substr(0, point);
        out += '.';
        out += digits.substr(point);
      }
    }
    return out;
  }
  out += digits[0];
  if (digits.size() > 1) {
    out += '.';
    out += digits.substr(1);
  }
  char exp[16];
  std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  out += exp;
  return out;
}

}  // namespace kvforge::chat
