// log.h — minimal leveled logging to stderr. Level set once at start (KVF_LOG_LEVEL or CLI flag).
#pragma once

namespace kvforge::base {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kNone = 4 };

void SetLogLevel(LogLevel level);
void Log(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace kvforge::base

#define KVF_LOG_INFO(...) ::kvforge::base::Log(::kvforge::base::LogLevel::kInfo, __VA_ARGS__)
#define KVF_LOG_WARN(...) ::kvforge::base::Log(::kvforge::base::LogLevel::kWarn, __VA_ARGS__)
#define KVF_LOG_ERROR(...) ::kvforge::base::Log(::kvforge::base::LogLevel::kError, __VA_ARGS__)
#define KVF_LOG_DEBUG(...) ::kvforge::base::Log(::kvforge::base::LogLevel::kDebug, __VA_ARGS__)
