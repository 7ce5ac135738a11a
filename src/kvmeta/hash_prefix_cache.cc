// kvmeta/hash_prefix_cache.cc — vLLM-style automatic prefix caching over the BlockPool.
//
// Key of full block k of a sequence: h_k = ChainBlockHash(h_{k-1}, tokens of block k), with
// h_{-1} = PrefixSeed(cache salt) (kvmeta/block_hash.h). A cached block carries its hash in the
// pool (SetHash), so when its last user releases it the pool parks it on its LRU list instead of
// freeing it; Allocate() evicts from that list only when the free stack is empty, and tells us
// through the eviction listener. Releasing a table frees its last block first, so the deepest
// blocks of a prefix are evicted before the shallow ones other prompts are more likely to share.
//
// Collisions never return wrong K/V: each cached block records its tokens, its salt (first
// block) and the serial number of its parent's registration, and a hit is taken only when all
// three match what the walk has verified so far. Serial numbers are never reused, so a block id
// recycled for other content cannot stand in for the parent a child was computed under.
#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "base/check.h"
#include "kvmeta/block_hash.h"
#include "kvmeta/prefix_cache.h"

namespace kvforge::kvmeta {
namespace {

class HashPrefixCache final : public PrefixCache {
 public:
  explicit HashPrefixCache(BlockPool* pool)
      : pool_(pool), info_(static_cast<size_t>(pool->num_blocks())) {
    pool_->SetEvictionListener([this](BlockId b, uint64_t h) { OnEvicted(b, h); });
  }
  ~HashPrefixCache() override { pool_->SetEvictionListener(nullptr); }

  PrefixCacheMode mode() const override { return PrefixCacheMode::kHash; }

  PrefixMatch Match(std::span<const int32_t> tokens, std::string_view salt) const override {
    PrefixMatch m;
    const size_t bt = static_cast<size_t>(pool_->block_tokens());
    uint64_t h = PrefixSeed(salt);
    uint64_t parent_serial = 0;
    for (size_t k = 0; (k + 1) * bt <= tokens.size(); ++k) {
      const auto block = tokens.subspan(k * bt, bt);
      h = ChainBlockHash(h, block);
      const Info* e = Lookup(h, block, parent_serial, k == 0 ? &salt : nullptr);
      if (e == nullptr) break;
      m.full_blocks.push_back(e->block);
      parent_serial = e->serial;
      m.last_hash = h;
    }
    m.num_tokens = static_cast<int64_t>(m.full_blocks.size() * bt);
    return m;
  }

  void OnAttach(SeqId seq, const PrefixMatch& m, int64_t query_tokens) override {
    ++stats_.queries;
    stats_.query_tokens += query_tokens;
    stats_.hit_tokens += m.num_tokens;
    ++clock_;
    for (BlockId b : m.full_blocks) {
      Info& in = info_[Index(b)];
      ++in.hits;
      in.last_use = clock_;
    }
    Progress& p = progress_[seq];
    p = Progress{};
    if (!m.full_blocks.empty()) {
      p.blocks_done = static_cast<int64_t>(m.full_blocks.size());
      p.last_hash = m.last_hash;
      p.last_serial = info_[Index(m.full_blocks.back())].serial;
      p.seeded = true;
    }
  }

  void Insert(SeqId seq, std::span<const int32_t> tokens, int64_t n,
              const std::vector<BlockId>& blocks, std::string_view salt, bool) override {
    const int64_t bt = pool_->block_tokens();
    n = std::min<int64_t>(n, static_cast<int64_t>(tokens.size()));
    const int64_t full = std::min<int64_t>(n / bt, static_cast<int64_t>(blocks.size()));
    Progress& p = progress_[seq];
    if (!p.seeded) {
      p.last_hash = PrefixSeed(salt);
      p.seeded = true;
    }
    for (int64_t k = p.blocks_done; k < full; ++k) {
      const auto block = tokens.subspan(static_cast<size_t>(k * bt), static_cast<size_t>(bt));
      const uint64_t h = ChainBlockHash(p.last_hash, block);
      const BlockId b = blocks[static_cast<size_t>(k)];
      const Info& mine = info_[Index(b)];
      uint64_t serial = 0;
      if (mine.valid && mine.hash == h && pool_->Hash(b) == h) {
        serial = mine.serial;  // shared from the cache or from a forked parent
      } else if (const Info* e = Lookup(h, block, p.last_serial, k == 0 ? &salt : nullptr)) {
        serial = e->serial;  // computed twice (e.g. same prompt in one batch): keep the first
      } else if (!pool_->Hash(b).has_value()) {
        Info& in = info_[Index(b)];
        if (in.valid) by_serial_.erase(in.serial);  // the block's old content was rewritten
        in.valid = true;
        in.block = b;
        in.hash = h;
        in.serial = ++next_serial_;
        in.parent_serial = p.last_serial;
        in.tokens.assign(block.begin(), block.end());
        in.salt = k == 0 ? std::string(salt) : std::string();
        in.hits = 0;
        in.last_use = ++clock_;
        pool_->SetHash(b, h);
        entries_[h] = b;
        by_serial_[in.serial] = b;
        serial = in.serial;
      } else {
        break;  // the block holds other cached content: stop registering this sequence
      }
      p.last_hash = h;
      p.last_serial = serial;
      p.blocks_done = k + 1;
    }
  }

  void OnRelease(SeqId seq) override { progress_.erase(seq); }

  int64_t ReclaimableBlocks() const override { return 0; }  // the pool counts them as free
  int64_t NumCountedAsFree(const std::vector<BlockId>& blocks) const override {
    return std::count_if(blocks.begin(), blocks.end(),
                         [this](BlockId b) { return pool_->State(b) == BlockState::kEvictable; });
  }
  int64_t Reclaim(int64_t) override { return 0; }  // Allocate() evicts by itself
  void Clear() override { pool_->EvictAll(); }

  PrefixCacheStats stats() const override {
    PrefixCacheStats s = stats_;
    s.cached_blocks = static_cast<int64_t>(entries_.size());
    return s;
  }
  int32_t HeldRefs(BlockId) const override { return 0; }

  // Blocks in registration order (by_serial_): a block's parent registered before it, so parents
  // come first. A block whose parent was evicted can never match again and is left out. Stops at
  // max_nodes, so a large cache costs the engine thread little per snapshot.
  std::vector<PrefixCacheNode> Describe(size_t max_nodes) const override {
    std::vector<PrefixCacheNode> out;
    std::unordered_set<uint64_t> listed;
    for (const auto& [serial, b] : by_serial_) {
      if (out.size() >= max_nodes) break;
      const Info* in = &info_[Index(b)];
      if (!in->valid || in->serial != serial || pool_->Hash(b) != in->hash) continue;
      if (in->parent_serial != 0 && listed.count(in->parent_serial) == 0) continue;  // orphan
      listed.insert(in->serial);
      PrefixCacheNode n;
      n.id = static_cast<int64_t>(in->serial);
      n.parent = static_cast<int64_t>(in->parent_serial);
      n.tokens = pool_->block_tokens();
      n.blocks = 1;
      n.hits = in->hits;
      n.locked = pool_->RefCount(in->block) > 0;
      n.last_use = in->last_use;
      out.push_back(n);
    }
    return out;
  }

  Status CheckInvariants() const override {
    for (const auto& [serial, b] : by_serial_)
      if (!info_[Index(b)].valid || info_[Index(b)].serial != serial)
        return Status::Internal("hash cache: a serial names a block that no longer holds it");
    for (const auto& [h, b] : entries_) {
      if (!pool_->Contains(b)) return Status::Internal("hash cache: entry names no block");
      if (pool_->Hash(b) != h) continue;  // stale: the block was rewritten; lookups skip it
      const Info& in = info_[Index(b)];
      if (!in.valid || in.hash != h || in.block != b)
        return Status::Internal("hash cache: entry and block info disagree");
      if (static_cast<int64_t>(in.tokens.size()) != pool_->block_tokens())
        return Status::Internal("hash cache: cached block without a full token record");
    }
    return Status::Ok();
  }

 private:
  struct Info {
    bool valid = false;
    BlockId block = kInvalidBlockId;
    uint64_t hash = 0;
    uint64_t serial = 0;         // unique per registration, never reused
    uint64_t parent_serial = 0;  // 0: first block of a prompt
    std::vector<int32_t> tokens;
    std::string salt;       // first block only
    int64_t hits = 0;       // matches that used this block
    uint64_t last_use = 0;  // clock_ at its registration or last match
  };
  struct Progress {
    int64_t blocks_done = 0;
    uint64_t last_hash = 0;
    uint64_t last_serial = 0;
    bool seeded = false;
  };

  static size_t Index(BlockId b) { return static_cast<size_t>(BlockIndex(b)); }

  // The live, verified entry for hash h holding `block`'s tokens under the given parent, or null.
  const Info* Lookup(uint64_t h, std::span<const int32_t> block, uint64_t parent_serial,
                     const std::string_view* salt) const {
    auto it = entries_.find(h);
    if (it == entries_.end()) return nullptr;
    const BlockId b = it->second;
    const Info& in = info_[Index(b)];
    if (!in.valid || in.hash != h || pool_->State(b) == BlockState::kFree || pool_->Hash(b) != h)
      return nullptr;
    if (in.parent_serial != parent_serial) return nullptr;
    if (salt != nullptr && in.salt != *salt) return nullptr;
    if (!std::equal(block.begin(), block.end(), in.tokens.begin(), in.tokens.end())) return nullptr;
    return &in;
  }

  void OnEvicted(BlockId b, uint64_t h) {
    auto it = entries_.find(h);
    if (it != entries_.end() && it->second == b) entries_.erase(it);
    Info& in = info_[Index(b)];
    if (in.valid) by_serial_.erase(in.serial);
    in.valid = false;
    in.tokens.clear();
    in.salt.clear();
    ++stats_.evicted_blocks;
  }

  BlockPool* pool_;
  std::vector<Info> info_;  // [num_blocks]
  std::unordered_map<uint64_t, BlockId> entries_;
  std::map<uint64_t, BlockId> by_serial_;  // registered blocks by serial (Describe's order)
  std::unordered_map<SeqId, Progress> progress_;
  uint64_t next_serial_ = 0;
  uint64_t clock_ = 0;  // counts attaches and registrations (PrefixCacheNode::last_use)
  PrefixCacheStats stats_;
};

}  // namespace

std::unique_ptr<PrefixCache> MakeHashPrefixCache(BlockPool* pool) {
  return std::make_unique<HashPrefixCache>(pool);
}

}  // namespace kvforge::kvmeta
