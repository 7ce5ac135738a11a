#include "engine/kv_budget.h"

#include <cstdio>

#include "base/strings.h"

namespace kvforge::engine {

uint64_t AvailableMemoryBytes() {
  FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  uint64_t kb = 0;
  while (std::fgets(line, sizeof(line), f)) {
    unsigned long long v;
    if (std::sscanf(line, "MemAvailable: %llu kB", &v) == 1) {
      kb = v;
      break;
    }
  }
  std::fclose(f);
  return kb * 1024;
}

Result<int64_t> KvBlocksForBudget(uint64_t budget_bytes, double utilization,
                                  uint64_t bytes_per_block, uint64_t weight_bytes,
                                  int64_t default_blocks) {
  uint64_t budget = 0;
  if (budget_bytes > 0) {
    budget = budget_bytes;
  } else if (utilization > 0) {
    if (utilization > 1) return Status::InvalidArgument("memory utilization must be in (0, 1]");
    const uint64_t avail = AvailableMemoryBytes();
    if (avail == 0) return Status::Unavailable("cannot read MemAvailable from /proc/meminfo");
    const double usable =
        utilization * static_cast<double>(avail) - static_cast<double>(weight_bytes);
    if (usable <= 0)
      return Status::ResourceExhausted(base::StrFormat(
          "memory utilization %.2f of %s available leaves nothing for the KV cache after %s of "
          "weights",
          utilization, base::HumanBytes(avail).c_str(), base::HumanBytes(weight_bytes).c_str()));
    budget = static_cast<uint64_t>(usable);
  } else {
    return default_blocks;
  }
  const uint64_t blocks = budget / bytes_per_block;
  if (blocks < 1)
    return Status::ResourceExhausted(base::StrFormat("KV budget %s is smaller than one block (%s)",
                                                     base::HumanBytes(budget).c_str(),
                                                     base::HumanBytes(bytes_per_block).c_str()));
  if (blocks > (1ull << 30)) return Status::InvalidArgument("KV budget is absurdly large");
  return static_cast<int64_t>(blocks);
}

}  // namespace kvforge::engine
