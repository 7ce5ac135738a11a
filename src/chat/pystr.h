// pystr.h — UTF-8 helpers with Python str semantics (code points, whitespace, case, repr).
//
// Python strings index by code point; kvforge keeps UTF-8 bytes and converts positions on demand
// (with an all-ASCII fast path). Invalid UTF-8 bytes decode as U+FFFD one byte at a time, so every
// function here is total. Case mapping and character classes cover ASCII, Latin-1, Latin
// Extended-A, Greek and Cyrillic (the rest of Unicode is treated as caseless letters); this is a
// documented approximation of Python's full Unicode tables.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/strings.h"

namespace kvforge::chat {

// Decodes the code point at s[*pos] and advances *pos (invalid bytes yield U+FFFD).
uint32_t DecodeUtf8(std::string_view s, size_t* pos);
using base::AppendUtf8;  // appends a code point as UTF-8 (base/strings.h)
bool IsAscii(std::string_view s);
size_t CodePointCount(std::string_view s);
// Byte offsets of each code point start, plus s.size() at the end.
std::vector<size_t> CodePointOffsets(std::string_view s);
// Checks that s is well-formed UTF-8 (no overlongs, surrogates or values past U+10FFFF).
bool IsValidUtf8(std::string_view s);

bool IsPySpace(uint32_t cp);  // str.isspace for one character
bool IsPyDigit(uint32_t cp);
bool IsPyAlpha(uint32_t cp);
bool IsPyUpper(uint32_t cp);
bool IsPyLower(uint32_t cp);
// Python's \w for re (letters, digits, underscore).
bool IsWordChar(uint32_t cp);
uint32_t ToUpperCp(uint32_t cp);
uint32_t ToLowerCp(uint32_t cp);
// str.splitlines line boundary characters.
bool IsLineBreak(uint32_t cp);
// str.isprintable for one character (approximation: controls, separators and format characters
// are non-printable).
bool IsPrintable(uint32_t cp);

std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
std::string PyCapitalize(std::string_view s);  // first upper, rest lower
std::string PyTitle(std::string_view s);       // str.title
std::string PySwapCase(std::string_view s);

// str.strip/lstrip/rstrip; `chars` null means whitespace.
std::string_view PyStrip(std::string_view s, const std::string* chars, bool left, bool right);
// str.split / str.rsplit; sep null means runs of whitespace. maxsplit < 0 means unlimited.
std::vector<std::string> PySplit(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> PyRSplit(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> PySplitLines(std::string_view s, bool keepends);

// Appends Python's repr of a str ('text' with escapes).
void AppendStrRepr(std::string_view s, std::string* out);
// Python's repr(float): shortest round-trip digits, "1.0", "1e-05", "inf", "nan".
std::string FloatRepr(double d);

}  // namespace kvforge::chat
