// kvmeta/ids.h — strong integer ids for KV bookkeeping: BlockId (a physical block of the pool)
// and SeqId (one sequence / beam / request branch owning a block table).
//
// Both are `enum class` over a fixed integer type, so a BlockId cannot be passed where a SeqId or
// a plain int is expected (and vice versa) without an explicit conversion through the helpers
// below. BlockId values are dense indices 0..num_blocks-1 of the pool that created them;
// kInvalidBlockId (-1) marks "no block". SeqIds are chosen by the caller and need not be dense.
// Complexity: everything here is constexpr O(1). Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>

namespace kvforge::kvmeta {

enum class BlockId : int32_t {};
enum class SeqId : int64_t {};

inline constexpr BlockId kInvalidBlockId = BlockId{-1};

constexpr BlockId MakeBlockId(int32_t index) { return BlockId{index}; }
constexpr int32_t BlockIndex(BlockId id) { return static_cast<int32_t>(id); }
constexpr bool IsValid(BlockId id) { return BlockIndex(id) >= 0; }

constexpr SeqId MakeSeqId(int64_t value) { return SeqId{value}; }
constexpr int64_t SeqValue(SeqId id) { return static_cast<int64_t>(id); }

inline std::string ToString(BlockId id) { return "block#" + std::to_string(BlockIndex(id)); }
inline std::string ToString(SeqId id) { return "seq#" + std::to_string(SeqValue(id)); }

}  // namespace kvforge::kvmeta
