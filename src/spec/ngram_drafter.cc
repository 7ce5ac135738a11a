#include "spec/ngram_drafter.h"

#include <algorithm>

namespace kvforge::spec {

std::vector<int32_t> ProposeNgram(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n,
                                  int32_t k) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  for (int64_t n = std::min<int64_t>(max_n, len - 1); n >= min_n; --n) {
    const std::span<const int32_t> suffix = tokens.subspan(static_cast<size_t>(len - n));
    // Latest start j < len - n whose n tokens equal the suffix; what followed it is the draft.
    for (int64_t j = len - n - 1; j >= 0; --j) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + j)) continue;
      const int64_t from = j + n;
      const int64_t count = std::min<int64_t>(k, len - from);
      return {tokens.begin() + from, tokens.begin() + from + count};
    }
  }
  return {};
}

}  // namespace kvforge::spec
