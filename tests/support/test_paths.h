// test_paths.h — where tests find shared data, the source tree and the build tree.
// CTest passes KVF_SHARED_DIR / KVF_SOURCE_DIR / KVF_BINARY_DIR; fallbacks are relative guesses.
#pragma once

#include <string>

namespace kvforge::testing {

std::string SharedDir();  // ../shared next to the checkout
std::string SourceDir();
std::string BinaryDir();
// Reads a whole file; fails the current test (and returns "") if it cannot.
std::string ReadFileOrDie(const std::string& path);

}  // namespace kvforge::testing
