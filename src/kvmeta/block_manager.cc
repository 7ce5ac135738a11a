#include "kvmeta/block_manager.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "base/check.h"
#include "base/strings.h"

namespace kvforge::kvmeta {

Result<BlockManager> BlockManager::Create(const BlockManagerConfig& config) {
  if (!(config.watermark >= 0.0 && config.watermark < 1.0)) {
    return Status::InvalidArgument(
        base::StrFormat("kvmeta: watermark must be in [0, 1), got %g", config.watermark));
  }
  KVF_ASSIGN_OR_RETURN(BlockPool pool, BlockPool::Create(BlockPoolConfig{
                                           .num_blocks = config.num_blocks,
                                           .block_tokens = config.block_tokens,
                                       }));
  const auto watermark_blocks =
      static_cast<int32_t>(std::floor(config.watermark * static_cast<double>(config.num_blocks)));
  return BlockManager(std::move(pool), watermark_blocks);
}

BlockManager::BlockManager(BlockPool pool, int32_t watermark_blocks)
    : pool_(std::move(pool)), watermark_blocks_(watermark_blocks) {}

int64_t BlockManager::BlocksForPrompt(int64_t num_tokens) const {
  KVF_CHECK_MSG(num_tokens >= 0, "kvmeta: negative token count");
  return BlocksForTokens(num_tokens, block_tokens());
}

AllocStatus BlockManager::CanAllocate(int64_t num_tokens) const {
  const int64_t required = BlocksForPrompt(num_tokens);
  if (static_cast<int64_t>(num_blocks()) - required < watermark_blocks_) return AllocStatus::kNever;
  if (static_cast<int64_t>(num_free_blocks()) - required >= watermark_blocks_) {
    return AllocStatus::kOk;
  }
  return AllocStatus::kLater;
}

int64_t BlockManager::BlocksNeededToAppend(SeqId seq, int64_t n) const {
  const BlockTable* table = Find(seq);
  if (table == nullptr) return -1;
  return table->BlocksNeededToAppend(pool_, n);
}

bool BlockManager::CanAppend(SeqId seq, int64_t n) const {
  if (n < 0) return false;
  const int64_t needed = BlocksNeededToAppend(seq, n);
  return needed >= 0 && needed <= num_free_blocks();
}

const BlockTable* BlockManager::Find(SeqId seq) const {
  auto it = tables_.find(seq);
  return it == tables_.end() ? nullptr : &it->second;
}

std::vector<SeqId> BlockManager::Sequences() const {
  std::vector<SeqId> ids;
  ids.reserve(tables_.size());
  for (const auto& [id, table] : tables_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

Result<BlockTable*> BlockManager::FindMutable(SeqId seq) {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return Status::NotFound("kvmeta: unknown sequence " + ToString(seq));
  return &it->second;
}

Result<WriteOutcome> BlockManager::Allocate(SeqId seq, int64_t num_tokens) {
  if (num_tokens < 0) {
    return Status::InvalidArgument("kvmeta: negative prompt length for " + ToString(seq));
  }
  if (Contains(seq)) {
    return Status::InvalidArgument("kvmeta: sequence " + ToString(seq) + " already exists");
  }
  BlockTable table(block_tokens());
  WriteOutcome outcome = table.AppendSlots(pool_, num_tokens);
  if (outcome.ok()) tables_.emplace(seq, std::move(table));
  return outcome;
}

Status BlockManager::AttachCached(SeqId seq, const std::vector<BlockId>& blocks) {
  if (Contains(seq)) {
    return Status::InvalidArgument("kvmeta: sequence " + ToString(seq) + " already exists");
  }
  for (BlockId b : blocks) {
    if (!pool_.Contains(b) || pool_.State(b) == BlockState::kFree)
      return Status::InvalidArgument("kvmeta: cached " + ToString(b) + " holds no content");
  }
  BlockTable table(block_tokens());
  for (BlockId b : blocks) table.AppendCachedBlock(pool_, b);
  tables_.emplace(seq, std::move(table));
  return Status::Ok();
}

Result<WriteOutcome> BlockManager::AppendSlots(SeqId seq, int64_t n) {
  if (n < 0) return Status::InvalidArgument("kvmeta: negative append for " + ToString(seq));
  KVF_ASSIGN_OR_RETURN(BlockTable * table, FindMutable(seq));
  if (n > std::numeric_limits<int64_t>::max() - table->num_tokens()) {
    return Status::InvalidArgument("kvmeta: token count overflow for " + ToString(seq));
  }
  return table->AppendSlots(pool_, n);
}

Result<WriteOutcome> BlockManager::MakeWritable(SeqId seq, int64_t begin, int64_t end,
                                                bool keep_cached) {
  KVF_ASSIGN_OR_RETURN(BlockTable * table, FindMutable(seq));
  if (!(0 <= begin && begin <= end && end <= table->num_tokens())) {
    return Status::InvalidArgument(
        base::StrFormat("kvmeta: write range [%lld, %lld) outside the %lld tokens of %s",
                        static_cast<long long>(begin), static_cast<long long>(end),
                        static_cast<long long>(table->num_tokens()), ToString(seq).c_str()));
  }
  return table->MakeWritable(pool_, begin, end, keep_cached);
}

Status BlockManager::Fork(SeqId parent, SeqId child) {
  KVF_ASSIGN_OR_RETURN(BlockTable * table, FindMutable(parent));
  if (Contains(child)) {
    return Status::InvalidArgument("kvmeta: fork target " + ToString(child) + " already exists");
  }
  BlockTable forked = table->Fork(pool_);
  tables_.emplace(child, std::move(forked));
  return Status::Ok();
}

Status BlockManager::Truncate(SeqId seq, int64_t num_tokens) {
  KVF_ASSIGN_OR_RETURN(BlockTable * table, FindMutable(seq));
  if (num_tokens < 0 || num_tokens > table->num_tokens()) {
    return Status::InvalidArgument(base::StrFormat(
        "kvmeta: cannot truncate %s from %lld to %lld tokens", ToString(seq).c_str(),
        static_cast<long long>(table->num_tokens()), static_cast<long long>(num_tokens)));
  }
  table->Truncate(pool_, num_tokens);
  return Status::Ok();
}

Status BlockManager::PopTokens(SeqId seq, int64_t n) {
  KVF_ASSIGN_OR_RETURN(BlockTable * table, FindMutable(seq));
  if (n < 0 || n > table->num_tokens()) {
    return Status::InvalidArgument(base::StrFormat(
        "kvmeta: cannot pop %lld of the %lld tokens of %s", static_cast<long long>(n),
        static_cast<long long>(table->num_tokens()), ToString(seq).c_str()));
  }
  table->PopTokens(pool_, n);
  return Status::Ok();
}

Status BlockManager::Free(SeqId seq) {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return Status::NotFound("kvmeta: unknown sequence " + ToString(seq));
  it->second.Free(pool_);
  tables_.erase(it);
  return Status::Ok();
}

Status BlockManager::CheckInvariants() const {
  KVF_RETURN_IF_ERROR(pool_.CheckInvariants());
  if (watermark_blocks_ < 0 || watermark_blocks_ > num_blocks()) {
    return Status::Internal("kvmeta manager: watermark out of range");
  }
  std::vector<int32_t> refs(static_cast<size_t>(num_blocks()), 0);
  for (const auto& [seq, table] : tables_) {
    Status s = table.CheckInvariants();
    if (!s.ok()) return s.WithContext(ToString(seq));
    if (table.block_tokens() != block_tokens()) {
      return Status::Internal("kvmeta manager: " + ToString(seq) + " has a foreign block size");
    }
    for (BlockId block : table.blocks()) {
      if (!pool_.Contains(block)) {
        return Status::Internal("kvmeta manager: " + ToString(seq) + " holds out-of-range " +
                                ToString(block));
      }
      ++refs[static_cast<size_t>(BlockIndex(block))];
    }
  }
  for (int32_t i = 0; i < num_blocks(); ++i) {
    const BlockId block = MakeBlockId(i);
    if (external_refs_) refs[static_cast<size_t>(i)] += external_refs_(block);
    if (pool_.RefCount(block) != refs[static_cast<size_t>(i)]) {
      return Status::Internal(base::StrFormat(
          "kvmeta manager: %s has ref count %d but %d table (and cache) references",
          ToString(block).c_str(), pool_.RefCount(block), refs[static_cast<size_t>(i)]));
    }
  }
  return Status::Ok();
}

}  // namespace kvforge::kvmeta
