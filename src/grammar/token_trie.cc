#include "grammar/token_trie.h"

#include <algorithm>
#include <numeric>

namespace kvforge::grammar {

TokenTrie::TokenTrie(std::vector<std::string> pieces, const std::vector<bool>& excluded)
    : pieces_(std::move(pieces)), included_(pieces_.size(), false) {
  // Sorting the token ids by their bytes lays every subtree out as one run, so the trie is built
  // in a single pass over the sorted list (each node's children are contiguous).
  std::vector<int32_t> order;
  for (size_t id = 0; id < pieces_.size(); ++id) {
    const bool skip = pieces_[id].empty() || (id < excluded.size() && excluded[id]);
    included_[id] = !skip;
    if (!skip) order.push_back(static_cast<int32_t>(id));
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return pieces_[static_cast<size_t>(a)] < pieces_[static_cast<size_t>(b)];
  });
  // Build with explicit child lists first, then flatten.
  struct Build {
    std::vector<std::pair<uint8_t, int32_t>> kids;
    std::vector<int32_t> toks;
  };
  std::vector<Build> build(1);
  for (int32_t id : order) {
    int32_t cur = 0;
    for (unsigned char b : pieces_[static_cast<size_t>(id)]) {
      auto& kids = build[static_cast<size_t>(cur)].kids;
      if (!kids.empty() && kids.back().first == b) {
        cur = kids.back().second;
      } else {
        const auto next = static_cast<int32_t>(build.size());
        kids.emplace_back(b, next);
        build.emplace_back();
        cur = next;
      }
    }
    build[static_cast<size_t>(cur)].toks.push_back(id);
  }
  nodes_.resize(build.size());
  for (size_t i = 0; i < build.size(); ++i) {
    Node& n = nodes_[i];
    n.child_begin = static_cast<int32_t>(children_.size());
    n.child_count = static_cast<int32_t>(build[i].kids.size());
    for (const auto& [b, child] : build[i].kids) {
      children_.push_back(child);
      nodes_[static_cast<size_t>(child)].byte = b;
    }
    n.token_begin = static_cast<int32_t>(tokens_.size());
    n.token_count = static_cast<int32_t>(build[i].toks.size());
    tokens_.insert(tokens_.end(), build[i].toks.begin(), build[i].toks.end());
  }
}

}  // namespace kvforge::grammar
