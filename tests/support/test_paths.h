// test_paths.h — where tests find shared data, the source tree and the build tree.
// Environment variables KVF_SHARED_DIR / KVF_SOURCE_DIR / KVF_BINARY_DIR win; otherwise the
// paths CMake configured are used.
#pragma once

#include <string>

namespace kvforge::testing {

std::string SharedDir();  // ../shared next to the checkout
std::string SourceDir();
std::string BinaryDir();
// Reads a whole file; fails the current test (and returns "") if it cannot.
std::string ReadFileOrDie(const std::string& path);

}  // namespace kvforge::testing
