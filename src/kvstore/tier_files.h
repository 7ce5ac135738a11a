// kvstore/tier_files.h — the file-system operations the disk tier performs, behind an interface
// so tests can inject failures (a full disk, a failing read) without root or a loop device.
// Thread-safety: the POSIX implementation is stateless and may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kvforge/status.h"

namespace kvforge::kvstore {

struct TierFileEntry {
  std::string name;  // file name inside the directory
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};

class TierFiles {
 public:
  virtual ~TierFiles() = default;
  virtual Status MakeDirs(const std::string& dir) = 0;
  // Writes `bytes` to `path` atomically: a temporary file in the same directory, then rename,
  // so a crash or a full disk never leaves a half-written record under the final name.
  virtual Status WriteAtomic(const std::string& path, std::span<const uint8_t> bytes) = 0;
  virtual Result<std::vector<uint8_t>> Read(const std::string& path) = 0;
  virtual Status Remove(const std::string& path) = 0;
  // Regular files of `dir` (not recursive).
  virtual Result<std::vector<TierFileEntry>> List(const std::string& dir) = 0;
};

std::unique_ptr<TierFiles> MakePosixTierFiles();

}  // namespace kvforge::kvstore
