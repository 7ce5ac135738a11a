#include "base/check.h"

#include <cstdio>
#include <cstdlib>

namespace kvforge::base {

void CheckFailed(const char* file, int line, const char* expr, const char* msg) {
  std::fprintf(stderr, "kvforge: check failed at %s:%d: %s %s\n", file, line, expr, msg);
  std::fflush(stderr);
  std::abort();
}

}  // namespace kvforge::base
