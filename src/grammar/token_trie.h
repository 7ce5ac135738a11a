// grammar/token_trie.h — every token's bytes in one trie, so that a grammar walks a shared prefix
// once for all the tokens that start with it (the cost of a mask follows the trie, not
// vocabulary x token length).
// Thread-safety: immutable after construction; share one per vocabulary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvforge::grammar {

class TokenTrie {
 public:
  struct Node {
    int32_t child_begin = 0, child_count = 0;  // into children()
    int32_t token_begin = 0, token_count = 0;  // into tokens(): the tokens ending here
    uint8_t byte = 0;                          // the edge byte from the parent
  };

  // `pieces[id]`: the bytes token `id` decodes to. Tokens with `excluded[id]` (control tokens)
  // or empty pieces are left out: a grammar never allows them.
  TokenTrie(std::vector<std::string> pieces, const std::vector<bool>& excluded);

  int32_t vocab_size() const { return static_cast<int32_t>(pieces_.size()); }
  const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }
  bool is_included(int32_t id) const { return included_[static_cast<size_t>(id)]; }
  const Node& node(int32_t i) const { return nodes_[static_cast<size_t>(i)]; }
  static constexpr int32_t kRoot = 0;
  const int32_t* children(const Node& n) const { return children_.data() + n.child_begin; }
  const int32_t* tokens(const Node& n) const { return tokens_.data() + n.token_begin; }
  int32_t num_nodes() const { return static_cast<int32_t>(nodes_.size()); }

 private:
  std::vector<std::string> pieces_;  // [vocab]
  std::vector<bool> included_;       // [vocab]
  std::vector<Node> nodes_;          // [nodes]; the root first
  std::vector<int32_t> children_;    // child node ids, grouped by parent, sorted by byte
  std::vector<int32_t> tokens_;      // token ids, grouped by the node they end at
};

}  // namespace kvforge::grammar
