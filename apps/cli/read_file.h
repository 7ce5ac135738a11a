// read_file.h — whole-file reads for the CLI's input files (texts, templates, messages).
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace kvforge::cli {

// The file's bytes in *out; false (and *out untouched) when it cannot be opened.
inline bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

}  // namespace kvforge::cli
