// test_paths.h — where tests find shared data, the source tree and the build tree.
// Environment variables KVF_SHARED_DIR / KVF_SOURCE_DIR / KVF_BINARY_DIR win; otherwise the
// paths CMake configured are used. The data folder is tests/data in the repository unless
// -DKVF_SHARED_DIR (or the environment variable) points at another copy of the same layout.
#pragma once

#include <string>

namespace kvforge::testing {

std::string SharedDir();  // models/, reference/, tokenizer-tests/, chat-templates/
std::string SourceDir();
std::string BinaryDir();
// Reads a whole file; fails the current test (and returns "") if it cannot.
std::string ReadFileOrDie(const std::string& path);

}  // namespace kvforge::testing
