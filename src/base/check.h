// check.h — invariant checks for programmer errors (never for bad input: that gets a Status).
// KVF_CHECK is always on and aborts with file:line; KVF_DCHECK compiles away in NDEBUG builds
// unless KVF_ENABLE_DCHECK is defined (sanitizer builds define it).
#pragma once

namespace kvforge::base {
[[noreturn]] void CheckFailed(const char* file, int line, const char* expr, const char* msg);
}  // namespace kvforge::base

#define KVF_CHECK(cond)                                                       \
  do {                                                                        \
    if (!(cond)) ::kvforge::base::CheckFailed(__FILE__, __LINE__, #cond, ""); \
  } while (0)

#define KVF_CHECK_MSG(cond, msg)                                               \
  do {                                                                         \
    if (!(cond)) ::kvforge::base::CheckFailed(__FILE__, __LINE__, #cond, msg); \
  } while (0)

#if !defined(NDEBUG) || defined(KVF_ENABLE_DCHECK)
#define KVF_DCHECK(cond) KVF_CHECK(cond)
#else
#define KVF_DCHECK(cond) \
  do {                   \
  } while (0)
#endif
