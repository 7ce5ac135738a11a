// kvmeta/block_hash.h — the chained block hash that names a block's content by its whole prefix.
//
// Key of full block k of a token sequence: h_k = ChainBlockHash(h_{k-1}, tokens of block k), with
// h_{-1} = PrefixSeed(cache salt). The one definition: the hash prefix cache (hot pool), the
// engine's in-flight prefix index and the offload tiers' keys (kvstore/kv_tier.h) all use it, so
// a block found one way is found every way. BlockKey carries a second, independent 64-bit lane
// (other constants) for the tiers, where another process may hold the content and the key is all
// there is to go by: 128 bits make an accidental match of two different prefixes negligible
// (and tier chunks also record their tokens, checked on load).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace kvforge::kvmeta {

uint64_t PrefixSeed(std::string_view salt);
uint64_t ChainBlockHash(uint64_t parent, std::span<const int32_t> block_tokens);

struct BlockKey {
  uint64_t a = 0;  // == the 64-bit chain above (the hot cache's key)
  uint64_t b = 0;  // independent lane
  friend bool operator==(const BlockKey&, const BlockKey&) = default;
};
BlockKey PrefixSeedKey(std::string_view salt);
BlockKey ChainBlockKey(const BlockKey& parent, std::span<const int32_t> block_tokens);

}  // namespace kvforge::kvmeta
