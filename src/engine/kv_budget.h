// engine/kv_budget.h — sizing the KV block pool from a byte budget or a memory-utilization
// fraction (the CPU analogue of vLLM's gpu_memory_utilization).
#pragma once

#include <cstdint>

#include "kvforge/status.h"

namespace kvforge::engine {

// Blocks that fit: budget_bytes if > 0; else utilization x MemAvailable - weight_bytes if
// utilization > 0; else default_blocks. ResourceExhausted when not even one block fits.
Result<int64_t> KvBlocksForBudget(uint64_t budget_bytes, double utilization,
                                  uint64_t bytes_per_block, uint64_t weight_bytes,
                                  int64_t default_blocks);

// MemAvailable from /proc/meminfo in bytes (0 if unknown).
uint64_t AvailableMemoryBytes();

}  // namespace kvforge::engine
