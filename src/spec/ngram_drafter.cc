#include "spec/ngram_drafter.h"

#include <algorithm>

namespace kvforge::spec {

std::vector<int32_t> ProposeNgram(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n,
                                  int32_t k) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  for (int64_t n = std::min<int64_t>(max_n, len - 1); n >= min_n; --n) {
    const std::span<const int32_t> suffix = tokens.subspan(static_cast<size_t>(len - n));
    // The latest start j < len - n whose n tokens equal the suffix and that k tokens follow;
    // failing that, the latest of those with the longest continuation (in a loop of period p
    // the latest match has only p tokens after it, one a few periods back has k).
    int64_t best_from = -1, best_count = 0;
    for (int64_t j = len - n - 1; j >= 0; --j) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + j)) continue;
      const int64_t from = j + n;
      const int64_t count = std::min<int64_t>(k, len - from);
      if (count > best_count) {
        best_from = from;
        best_count = count;
      }
      if (count == k) break;
    }
    if (best_from >= 0)
      return {tokens.begin() + best_from, tokens.begin() + best_from + best_count};
  }
  return {};
}

}  // namespace kvforge::spec
