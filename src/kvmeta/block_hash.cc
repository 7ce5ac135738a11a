#include "kvmeta/block_hash.h"

namespace kvforge::kvmeta {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64 finalizer: full avalanche on 64 bits
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// One lane: `seed` and `step` are odd constants that differ between lanes.
uint64_t Seed(std::string_view salt, uint64_t seed, uint64_t step) {
  uint64_t h = seed;
  for (unsigned char c : salt) h = Mix(h ^ c) + step;
  return Mix(h ^ salt.size());
}

uint64_t Chain(uint64_t parent, std::span<const int32_t> block, uint64_t add, uint64_t step) {
  uint64_t h = Mix(parent + add);
  for (int32_t t : block) h = Mix(h ^ static_cast<uint32_t>(t)) + step;
  return h;
}

constexpr uint64_t kSeedA = 0x6b7666636163686full;  // "kvfcache"
constexpr uint64_t kStepA = 0x9e3779b97f4a7c15ull;
constexpr uint64_t kTokA = 0x632be59bd9b4e019ull;
constexpr uint64_t kSeedB = 0x6b76667469657273ull;  // "kvftiers"
constexpr uint64_t kStepB = 0xd6e8feb86659fd93ull;
constexpr uint64_t kTokB = 0xa0761d6478bd642full;

}  // namespace

uint64_t PrefixSeed(std::string_view salt) { return Seed(salt, kSeedA, kStepA); }

uint64_t ChainBlockHash(uint64_t parent, std::span<const int32_t> block_tokens) {
  return Chain(parent, block_tokens, kStepA, kTokA);
}

BlockKey PrefixSeedKey(std::string_view salt) {
  return {PrefixSeed(salt), Seed(salt, kSeedB, kStepB)};
}

BlockKey ChainBlockKey(const BlockKey& parent, std::span<const int32_t> block_tokens) {
  return {ChainBlockHash(parent.a, block_tokens), Chain(parent.b, block_tokens, kStepB, kTokB)};
}

}  // namespace kvforge::kvmeta
