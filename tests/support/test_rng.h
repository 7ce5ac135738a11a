// tests/support/test_rng.h — the seeded generator the randomized tests share: splitmix64, tiny,
// and identical on every platform (unlike the std distributions), so a failing seed replays.
#pragma once

#include <cstdint>

namespace kvforge::testing {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform-ish in [lo, hi] (modulo bias is irrelevant here).
  int64_t Range(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }
  // Uniform-ish in [0, n).
  int64_t Uniform(int64_t n) { return Range(0, n - 1); }
  bool Chance(int percent) { return Range(0, 99) < percent; }

 private:
  uint64_t state_;
};

}  // namespace kvforge::testing
