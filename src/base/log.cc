#include "base/log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace kvforge::base {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kWarn)};
}

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }

void Log(LogLevel level, const char* fmt, ...) {
  if (static_cast<int>(level) < g_level.load()) return;
  static const char* kNames[] = {"debug", "info", "warn", "error", ""};
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "kvforge %s: %s\n", kNames[static_cast<int>(level)], buf);
}

}  // namespace kvforge::base
