#include "support/test_paths.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace kvforge::testing {
namespace {
std::string EnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : std::string(fallback);
}
}  // namespace

std::string SharedDir() { return EnvOr("KVF_SHARED_DIR", KVF_DEFAULT_SHARED_DIR); }
std::string SourceDir() { return EnvOr("KVF_SOURCE_DIR", KVF_DEFAULT_SOURCE_DIR); }
std::string BinaryDir() { return EnvOr("KVF_BINARY_DIR", KVF_DEFAULT_BINARY_DIR); }

std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace kvforge::testing
