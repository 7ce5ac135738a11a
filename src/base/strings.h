// strings.h — small string helpers used across modules (printf-style formatting, byte sizes).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvforge::base {

// printf-style formatting into a std::string.
std::string StrFormat(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// "1.50 GiB (1610612736 bytes)" style rendering; binary units.
std::string HumanBytes(uint64_t bytes);

// Splits on a single character; keeps empty fields.
std::vector<std::string> StrSplit(std::string_view s, char sep);

// Appends code point `cp` (<= 0x10FFFF) to `out` as UTF-8.
void AppendUtf8(uint32_t cp, std::string* out);

// Escapes a string as a JSON string literal (with quotes). Invalid UTF-8 bytes become U+FFFD.
std::string JsonQuote(std::string_view s);

// Parses a size like "512", "64MiB", "2GiB", "1.5G", "100MB" into bytes. Returns false on error.
bool ParseByteSize(std::string_view text, uint64_t* bytes);

}  // namespace kvforge::base
