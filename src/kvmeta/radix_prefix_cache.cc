// kvmeta/radix_prefix_cache.cc — SGLang-style RadixAttention cache over paged blocks.
//
// A node owns an edge of token ids covering positions [start, start + len) of every prompt below
// it, and one pool reference on each block that stores K/V for those positions (block indices
// start / B .. (start + len - 1) / B). When a node is split at a position inside a block, both
// halves reference that block: the upper half needs its first slots, the lower half the rest.
// Any block a node references holds valid K/V for all positions of its block index up to the
// node's last position (it was written by a sequence whose tokens equal the path), so the block
// of index k for a match of length L comes from the path node holding position
// min((k + 1) * B, L) - 1.
//
// Locks: a live sequence locks the path to its deepest cached node (lock counts along the
// path), so locked nodes always form a subtree containing the root's children on the way.
// Unlocked leaves sit in an LRU set ordered by last access and are evicted first; evicting a
// leaf releases its block references (a block shared with a sequence or another node stays).
// Complexity: Match/Insert O(tokens + path); Reclaim O(evicted log n); ReclaimableBlocks
// O(nodes + blocks).
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <unordered_map>

#include "base/check.h"
#include "base/strings.h"
#include "kvmeta/prefix_cache.h"

namespace kvforge::kvmeta {
namespace {

class RadixPrefixCache final : public PrefixCache {
 public:
  explicit RadixPrefixCache(BlockPool* pool) : pool_(pool), bt_(pool->block_tokens()) {}
  ~RadixPrefixCache() override {
    for (auto& [salt, root] : roots_) ReleaseSubtree(root.get());
  }

  PrefixCacheMode mode() const override { return PrefixCacheMode::kRadix; }

  PrefixMatch Match(std::span<const int32_t> tokens, std::string_view salt) const override {
    PrefixMatch m;
    auto rit = roots_.find(std::string(salt));
    if (rit == roots_.end() || tokens.empty()) return m;
    std::vector<const Node*> path;
    const Node* node = rit->second.get();
    size_t pos = 0;
    while (pos < tokens.size()) {
      auto c = node->children.find(tokens[pos]);
      if (c == node->children.end()) break;
      const Node* child = c->second.get();
      const size_t same = CommonPrefix(child->tokens, tokens.subspan(pos));
      path.push_back(child);
      pos += same;
      if (same < child->tokens.size()) break;
      node = child;
    }
    if (pos == 0) return m;
    m.num_tokens = static_cast<int64_t>(pos);
    m.node = path.back();
    const int64_t n_blocks = (m.num_tokens + bt_ - 1) / bt_;
    size_t pi = 0;
    for (int64_t k = 0; k < n_blocks; ++k) {
      const int64_t last = std::min((k + 1) * bt_, m.num_tokens) - 1;
      while (path[pi]->start + static_cast<int64_t>(path[pi]->tokens.size()) <= last) ++pi;
      const BlockId b = BlockAt(*path[pi], k);
      if ((k + 1) * bt_ <= m.num_tokens)
        m.full_blocks.push_back(b);
      else
        m.partial_block = b;
    }
    return m;
  }

  void OnAttach(SeqId seq, const PrefixMatch& m, int64_t query_tokens) override {
    ++stats_.queries;
    stats_.query_tokens += query_tokens;
    stats_.hit_tokens += m.num_tokens;
    Unlock(seq);
    if (m.node == nullptr) return;
    Node* n = const_cast<Node*>(static_cast<const Node*>(m.node));
    for (Node* p = n; p != nullptr && p->parent != nullptr; p = p->parent) ++p->hits;
    Lock(seq, n);
  }

  void Insert(SeqId seq, std::span<const int32_t> tokens, int64_t n,
              const std::vector<BlockId>& blocks, std::string_view salt,
              bool final_insert) override {
    n = std::min<int64_t>(n, static_cast<int64_t>(tokens.size()));
    n = std::min<int64_t>(n, static_cast<int64_t>(blocks.size()) * bt_);
    if (n <= 0) return;
    auto& root = roots_[std::string(salt)];
    if (!root) root = std::make_unique<Node>();
    Node* node = root.get();
    int64_t pos = 0;
    const uint64_t now = ++clock_;
    while (pos < n) {
      auto c = node->children.find(tokens[static_cast<size_t>(pos)]);
      if (c == node->children.end()) {
        // New leaf for [pos, n), referencing the sequence's own blocks.
        auto leaf = std::make_unique<Node>();
        leaf->parent = node;
        leaf->start = pos;
        leaf->tokens.assign(tokens.begin() + pos, tokens.begin() + n);
        for (int64_t k = pos / bt_; k <= (n - 1) / bt_; ++k) {
          const BlockId b = blocks[static_cast<size_t>(k)];
          pool_->AddRef(b);
          leaf->blocks.push_back(b);
        }
        leaf->last_access = now;
        leaf->id = ++next_node_id_;
        Node* raw = leaf.get();
        node->children[tokens[static_cast<size_t>(pos)]] = std::move(leaf);
        Refresh(node);
        Refresh(raw);
        node = raw;
        pos = n;
        break;
      }
      Node* child = c->second.get();
      const size_t same = CommonPrefix(
          child->tokens, tokens.subspan(static_cast<size_t>(pos), static_cast<size_t>(n - pos)));
      if (same < child->tokens.size()) child = Split(child, same);
      child->last_access = now;
      Refresh(child);
      node = child;
      pos += static_cast<int64_t>(same);
    }
    Unlock(seq);
    if (!final_insert) Lock(seq, node);
  }

  void OnRelease(SeqId seq) override { Unlock(seq); }

  int64_t ReclaimableBlocks() const override {
    CountUnlockedRefs();
    int64_t n = 0;
    for (int32_t i = 0; i < pool_->num_blocks(); ++i) {
      const int32_t c = scratch_[static_cast<size_t>(i)];
      if (c > 0 && c == pool_->RefCount(MakeBlockId(i))) ++n;
    }
    return n;
  }

  int64_t NumCountedAsFree(const std::vector<BlockId>& blocks) const override {
    if (blocks.empty()) return 0;
    CountUnlockedRefs();
    return std::count_if(blocks.begin(), blocks.end(), [this](BlockId b) {
      const int32_t c = scratch_[static_cast<size_t>(BlockIndex(b))];
      return c > 0 && c == pool_->RefCount(b);
    });
  }

  int64_t Reclaim(int64_t want) override {
    const int64_t before = pool_->num_free_blocks();
    while (pool_->num_free_blocks() < want && !lru_.empty()) Evict(lru_.begin()->second);
    return pool_->num_free_blocks() - before;
  }

  void Clear() override {
    while (!lru_.empty()) Evict(lru_.begin()->second);
  }

  PrefixCacheStats stats() const override {
    PrefixCacheStats s = stats_;
    std::vector<bool> seen(static_cast<size_t>(pool_->num_blocks()), false);
    ForEachNode([&](const Node& n) {
      for (BlockId b : n.blocks) {
        if (!seen[static_cast<size_t>(BlockIndex(b))]) ++s.cached_blocks;
        seen[static_cast<size_t>(BlockIndex(b))] = true;
      }
    });
    return s;
  }

  int32_t HeldRefs(BlockId b) const override {
    int32_t n = 0;
    ForEachNode([&](const Node& node) {
      n += static_cast<int32_t>(std::count(node.blocks.begin(), node.blocks.end(), b));
    });
    return n;
  }

  Status CheckInvariants() const override {
    std::unordered_map<const Node*, int32_t> own_locks;
    for (const auto& [seq, node] : locked_) ++own_locks[node];
    size_t evictable = 0;
    Status st = Status::Ok();
    ForEachNode([&](const Node& n) {
      if (!st.ok()) return;
      const Node* p = n.parent;
      if (p == nullptr || n.tokens.empty()) {
        st = Status::Internal("radix: non-root node without parent or tokens");
        return;
      }
      if (n.start != p->start + static_cast<int64_t>(p->tokens.size()))
        st = Status::Internal("radix: node start does not follow its parent");
      const int64_t last = n.start + static_cast<int64_t>(n.tokens.size()) - 1;
      if (static_cast<int64_t>(n.blocks.size()) != last / bt_ - n.start / bt_ + 1)
        st = Status::Internal("radix: wrong number of block references");
      for (BlockId b : n.blocks)
        if (!pool_->Contains(b) || pool_->RefCount(b) < 1)
          st = Status::Internal("radix: node references a block it holds no ref on");
      int32_t locks = own_locks.count(&n) ? own_locks.at(&n) : 0;
      for (const auto& [t, c] : n.children) {
        locks += c->lock;
        if (c->tokens.empty() || c->tokens[0] != t) st = Status::Internal("radix: bad child key");
      }
      if (locks != n.lock) st = Status::Internal("radix: lock count differs from its subtree's");
      const bool should = n.children.empty() && n.lock == 0;
      if (should != n.in_lru) st = Status::Internal("radix: LRU membership wrong");
      if (n.in_lru) ++evictable;
    });
    if (st.ok() && evictable != lru_.size()) return Status::Internal("radix: LRU size mismatch");
    return st;
  }

 private:
  struct Node {
    Node* parent = nullptr;
    std::vector<int32_t> tokens;  // edge label (empty for a root)
    int64_t start = 0;            // position of tokens[0]
    std::vector<BlockId> blocks;  // block indices start/B .. (start+len-1)/B
    std::map<int32_t, std::unique_ptr<Node>> children;
    int32_t lock = 0;
    uint64_t last_access = 0;
    bool in_lru = false;
    uint64_t lru_key = 0;
    uint64_t id = 0;   // PrefixCacheNode::id (the upper half of a split gets a new one)
    int64_t hits = 0;  // attaches whose matched path went through this node
  };

  static size_t CommonPrefix(const std::vector<int32_t>& edge, std::span<const int32_t> t) {
    size_t i = 0;
    const size_t n = std::min(edge.size(), t.size());
    while (i < n && edge[i] == t[i]) ++i;
    return i;
  }

  BlockId BlockAt(const Node& n, int64_t k) const {
    return n.blocks[static_cast<size_t>(k - n.start / bt_)];
  }

  // Splits `n` after `keep` tokens (0 < keep < len); returns the new upper node.
  Node* Split(Node* n, size_t keep) {
    Node* parent = n->parent;
    auto upper = std::make_unique<Node>();
    upper->parent = parent;
    upper->start = n->start;
    upper->tokens.assign(n->tokens.begin(), n->tokens.begin() + static_cast<long>(keep));
    const int64_t cut = n->start + static_cast<int64_t>(keep);  // first position of the lower
    const int64_t first = n->start / bt_;
    const int64_t upper_last = (cut - 1) / bt_;
    const int64_t lower_first = cut / bt_;
    for (int64_t k = first; k <= upper_last; ++k) upper->blocks.push_back(BlockAt(*n, k));
    if (lower_first == upper_last) pool_->AddRef(BlockAt(*n, lower_first));  // straddles the cut
    n->blocks.erase(n->blocks.begin(), n->blocks.begin() + (lower_first - first));
    n->tokens.erase(n->tokens.begin(), n->tokens.begin() + static_cast<long>(keep));
    n->start = cut;
    upper->lock = n->lock;
    upper->last_access = n->last_access;
    upper->hits = n->hits;  // every match through the lower half went through the upper
    upper->id = ++next_node_id_;
    Node* raw = upper.get();
    auto& slot = parent->children[upper->tokens[0]];
    std::unique_ptr<Node> lower = std::move(slot);
    lower->parent = raw;
    raw->children[lower->tokens[0]] = std::move(lower);
    slot = std::move(upper);
    Refresh(raw);
    return raw;
  }

  std::vector<PrefixCacheNode> Describe(size_t max_nodes) const override {
    std::vector<PrefixCacheNode> out;
    std::vector<const Node*> level;  // breadth first: parents before children
    for (const auto& [salt, root] : roots_)
      for (const auto& [t, child] : root->children) level.push_back(child.get());
    for (size_t i = 0; i < level.size() && out.size() < max_nodes; ++i) {
      const Node* n = level[i];
      PrefixCacheNode d;
      d.id = static_cast<int64_t>(n->id);
      d.parent = n->parent->parent == nullptr ? 0 : static_cast<int64_t>(n->parent->id);
      d.tokens = static_cast<int64_t>(n->tokens.size());
      d.blocks = static_cast<int32_t>(n->blocks.size());
      d.hits = n->hits;
      d.locked = n->lock > 0;
      d.last_use = n->last_access;
      out.push_back(d);
      for (const auto& [t, child] : n->children) level.push_back(child.get());
    }
    return out;
  }

  void Lock(SeqId seq, Node* n) {
    locked_[seq] = n;
    for (Node* p = n; p != nullptr && p->parent != nullptr; p = p->parent) {
      ++p->lock;
      p->last_access = clock_;
      Refresh(p);
    }
  }

  void Unlock(SeqId seq) {
    auto it = locked_.find(seq);
    if (it == locked_.end()) return;
    Node* n = it->second;
    locked_.erase(it);
    for (Node* p = n; p != nullptr && p->parent != nullptr; p = p->parent) {
      KVF_DCHECK(p->lock > 0);
      --p->lock;
      Refresh(p);
    }
  }

  // Puts `n` in the LRU set exactly when it is an unlocked non-root leaf.
  void Refresh(Node* n) {
    if (n->in_lru) {
      lru_.erase({n->lru_key, n});
      n->in_lru = false;
    }
    if (n->parent != nullptr && n->children.empty() && n->lock == 0) {
      n->lru_key = n->last_access;
      lru_.insert({n->lru_key, n});
      n->in_lru = true;
    }
  }

  void Evict(Node* leaf) {
    KVF_DCHECK(leaf->children.empty() && leaf->lock == 0 && leaf->parent != nullptr);
    lru_.erase({leaf->lru_key, leaf});
    for (BlockId b : leaf->blocks) {
      pool_->Release(b);
      if (pool_->State(b) == BlockState::kFree) ++stats_.evicted_blocks;
    }
    Node* parent = leaf->parent;
    parent->children.erase(leaf->tokens[0]);  // destroys leaf
    Refresh(parent);
  }

  void ReleaseSubtree(Node* n) {
    for (auto& [t, c] : n->children) ReleaseSubtree(c.get());
    for (BlockId b : n->blocks) pool_->Release(b);
    n->blocks.clear();
  }

  template <typename F>
  void ForEachNode(F&& f) const {
    std::vector<const Node*> stack;
    for (const auto& [salt, root] : roots_)
      for (const auto& [t, c] : root->children) stack.push_back(c.get());
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      f(*n);
      for (const auto& [t, c] : n->children) stack.push_back(c.get());
    }
  }

  // scratch_[b] = references on b from unlocked nodes (0 for blocks a locked node references,
  // which eviction cannot free).
  void CountUnlockedRefs() const {
    scratch_.assign(static_cast<size_t>(pool_->num_blocks()), 0);
    ForEachNode([&](const Node& n) {
      for (BlockId b : n.blocks) {
        int32_t& c = scratch_[static_cast<size_t>(BlockIndex(b))];
        if (n.lock > 0)
          c = -(1 << 30);
        else
          ++c;
      }
    });
  }

  BlockPool* pool_;
  int64_t bt_;
  std::map<std::string, std::unique_ptr<Node>> roots_;  // one tree per cache salt
  std::set<std::pair<uint64_t, Node*>> lru_;            // unlocked leaves, oldest first
  std::unordered_map<SeqId, Node*> locked_;
  uint64_t clock_ = 0;
  uint64_t next_node_id_ = 0;
  PrefixCacheStats stats_;
  mutable std::vector<int32_t> scratch_;
};

}  // namespace

std::unique_ptr<PrefixCache> MakeHashPrefixCache(BlockPool* pool);

std::unique_ptr<PrefixCache> MakeRadixPrefixCache(BlockPool* pool) {
  return std::make_unique<RadixPrefixCache>(pool);
}

std::string_view PrefixCacheModeName(PrefixCacheMode mode) {
  return mode == PrefixCacheMode::kHash ? "hash" : "radix";
}

std::unique_ptr<PrefixCache> MakePrefixCache(PrefixCacheMode mode, BlockPool* pool) {
  return mode == PrefixCacheMode::kHash ? MakeHashPrefixCache(pool) : MakeRadixPrefixCache(pool);
}

}  // namespace kvforge::kvmeta
