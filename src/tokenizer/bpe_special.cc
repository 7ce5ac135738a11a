// bpe_special.cc — special-token handling of BpeTokenizer: the partition of text into special
// tokens and raw fragments (the token types were settled by Vocab::FromGguf, special_types.h).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

#include "base/log.h"
#include "gguf/gguf_reader.h"
#include "tokenizer/bpe_tokenizer.h"

namespace kvforge::tokenizer {
namespace {

bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

}  // namespace

std::vector<Tokenizer::Fragment> BpeTokenizer::Partition(std::string_view text,
                                                         bool parse_special) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  const size_t n = text.size();
  auto active = [&](size_t prio) {
    const TokenType t = vocab_.types[static_cast<size_t>(specials_[prio].id)];
    return parse_special || (t != TokenType::kControl && t != TokenType::kUnknown);
  };

  // 1. Which active special tokens occur at all (one pass, candidates by their first two bytes).
  std::vector<uint8_t> occurs;
  for (size_t i = 0; i < n; ++i) {
    const auto c0 = static_cast<unsigned char>(text[i]);
    if (!special_first_byte_[c0]) continue;
    if (occurs.empty()) occurs.assign(specials_.size(), 0);
    for (int32_t p : special_single_[c0]) occurs[static_cast<size_t>(p)] = 1;
    if (i + 1 >= n) continue;
    const size_t key = c0 << 8 | static_cast<unsigned char>(text[i + 1]);
    for (uint32_t k = special_bucket_start_[key]; k < special_bucket_start_[key + 1]; ++k) {
      const auto p = static_cast<size_t>(special_by_prefix_[k]);
      if (occurs[p]) continue;
      const std::string& t = vocab_.texts[static_cast<size_t>(specials_[p].id)];
      if (t.size() <= n - i && std::memcmp(text.data() + i, t.data(), t.size()) == 0) occurs[p] = 1;
    }
  }

  // 2. Token by token (longest first), take the leftmost non-overlapping occurrences that lie in
  // text no earlier token claimed: exactly what llama.cpp's repeated find() over the remaining
  // text fragments yields. Memory stays O(text), time O(text) per distinct token present.
  std::vector<uint8_t> state;  // 0 raw text, 1 special token, 2 stripped whitespace
  struct Hit {
    size_t pos;
    size_t len;
    TokenId id;
  };
  std::vector<Hit> hits;
  for (size_t prio = 0; prio < occurs.size(); ++prio) {
    if (!occurs[prio] || !active(prio)) continue;
    if (state.empty()) state.assign(n, 0);
    const SpecialEntry& e = specials_[prio];
    const std::string& t = vocab_.texts[static_cast<size_t>(e.id)];
    const size_t len = t.size();
    size_t from = 0;
    size_t pos;
    while ((pos = text.find(t, from)) != std::string_view::npos) {
      // Skip past the last claimed byte inside the window, if any.
      size_t blocked = pos + len;
      for (size_t j = pos + len; j-- > pos;) {
        if (state[j] != 0) {
          blocked = j;
          break;
        }
      }
      if (blocked < pos + len) {
        from = blocked + 1;
        continue;
      }
      std::fill(state.begin() + static_cast<std::ptrdiff_t>(pos),
                state.begin() + static_cast<std::ptrdiff_t>(pos + len), 1);
      hits.push_back({pos, len, e.id});
      from = pos + len;
      if (e.lstrip)
        for (size_t j = pos; j > 0 && state[j - 1] == 0 && IsAsciiSpace(text[j - 1]); --j)
          state[j - 1] = 2;
      if (e.rstrip)
        while (from < n && state[from] == 0 && IsAsciiSpace(text[from])) state[from++] = 2;
    }
  }
  if (hits.empty()) {
    frags.push_back({kNoToken, text});
    return frags;
  }

  // 3. Fragments in text order: raw runs between the tokens, skipping stripped whitespace.
  std::sort(hits.begin(), hits.end(), [](const Hit& x, const Hit& y) { return x.pos < y.pos; });
  auto raw_runs = [&](size_t from, size_t to) {
    size_t i = from;
    while (i < to) {
      while (i < to && state[i] != 0) ++i;
      size_t j = i;
      while (j < to && state[j] == 0) ++j;
      if (j > i) frags.push_back({kNoToken, text.substr(i, j - i)});
      i = j;
    }
  };
  size_t at = 0;
  for (const Hit& h : hits) {
    raw_runs(at, h.pos);
    frags.push_back({h.id, {}});
    at = h.pos + h.len;
  }
  raw_runs(at, n);
  return frags;
}

}  // namespace kvforge::tokenizer
