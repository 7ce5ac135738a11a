#include "sched/fake_kv_space.h"

#include <utility>

#include "base/check.h"
#include "base/strings.h"

namespace kvforge::sched::testing {

using kvmeta::MakeSeqId;

FakeKvSpace::FakeKvSpace(int32_t num_blocks, int32_t block_tokens, int64_t swap_blocks)
    : swap_capacity_(swap_blocks) {
  Result<kvmeta::BlockManager> m = kvmeta::BlockManager::Create(
      {.num_blocks = num_blocks, .block_tokens = block_tokens, .watermark = 0.0});
  KVF_CHECK_MSG(m.ok(), "FakeKvSpace: bad BlockManager config");
  mgr_ = std::make_unique<kvmeta::BlockManager>(std::move(m).value());
}

void FakeKvSpace::Misuse(const std::string& what) const { misuse_.push_back(what); }

int64_t FakeKvSpace::HostBlocks(int64_t tokens) const {
  return kvmeta::BlocksForTokens(tokens, block_tokens());
}

bool FakeKvSpace::IsResident(int64_t seq) const { return mgr_->Contains(MakeSeqId(seq)); }

int64_t FakeKvSpace::Slots(int64_t seq) const {
  if (const kvmeta::BlockTable* t = mgr_->Find(MakeSeqId(seq)); t != nullptr) {
    return t->num_tokens();
  }
  auto it = swapped_.find(seq);
  return it == swapped_.end() ? -1 : it->second;
}

int64_t FakeKvSpace::BlocksToGrow(int64_t seq, int64_t total_tokens) const {
  if (IsSwapped(seq)) {
    Misuse("BlocksToGrow on swapped seq " + std::to_string(seq));
    return 0;
  }
  const kvmeta::BlockTable* t = mgr_->Find(MakeSeqId(seq));
  if (t == nullptr) return mgr_->BlocksForPrompt(total_tokens);
  if (total_tokens <= t->num_tokens()) return 0;
  return mgr_->BlocksNeededToAppend(MakeSeqId(seq), total_tokens - t->num_tokens());
}

bool FakeKvSpace::Applied(const Result<kvmeta::WriteOutcome>& r) const {
  if (!r.ok()) {
    Misuse("BlockManager error: " + r.error().ToString());
    return false;
  }
  return r->ok();
}

bool FakeKvSpace::Grow(int64_t seq, int64_t total_tokens) {
  if (IsSwapped(seq)) {
    Misuse("Grow on swapped seq " + std::to_string(seq));
    return false;
  }
  const kvmeta::BlockTable* t = mgr_->Find(MakeSeqId(seq));
  if (t == nullptr) return Applied(mgr_->Allocate(MakeSeqId(seq), total_tokens));
  if (total_tokens <= t->num_tokens()) return true;
  return Applied(mgr_->AppendSlots(MakeSeqId(seq), total_tokens - t->num_tokens()));
}

void FakeKvSpace::Truncate(int64_t seq, int64_t total_tokens) {
  if (!IsResident(seq)) {
    Misuse("Truncate of non-resident seq " + std::to_string(seq));
    return;
  }
  if (total_tokens > mgr_->Find(MakeSeqId(seq))->num_tokens()) {
    Misuse("Truncate of seq " + std::to_string(seq) + " past its slots");
    return;
  }
  if (!mgr_->Truncate(MakeSeqId(seq), total_tokens).ok())
    Misuse("BlockManager refused to truncate seq " + std::to_string(seq));
}

void FakeKvSpace::Free(int64_t seq) {
  if (IsResident(seq)) (void)mgr_->Free(MakeSeqId(seq));
  if (auto it = swapped_.find(seq); it != swapped_.end()) {
    swap_used_ -= HostBlocks(it->second);
    swapped_.erase(it);
  }
}

bool FakeKvSpace::Fork(int64_t parent, int64_t child) {
  if (IsSwapped(parent) || IsSwapped(child) || IsResident(child)) {
    Misuse("bad Fork " + std::to_string(parent) + " -> " + std::to_string(child));
    return false;
  }
  Status s = mgr_->Fork(MakeSeqId(parent), MakeSeqId(child));
  if (!s.ok()) Misuse("Fork error: " + s.ToString());
  return s.ok();
}

bool FakeKvSpace::CanSwapOut(int64_t seq) const {
  const kvmeta::BlockTable* t = mgr_->Find(MakeSeqId(seq));
  return t != nullptr && swap_used_ + HostBlocks(t->num_tokens()) <= swap_capacity_;
}

bool FakeKvSpace::SwapOut(int64_t seq) {
  if (!IsResident(seq)) {
    Misuse("SwapOut of non-resident seq " + std::to_string(seq));
    return false;
  }
  if (!CanSwapOut(seq)) return false;
  const int64_t slots = mgr_->Find(MakeSeqId(seq))->num_tokens();
  (void)mgr_->Free(MakeSeqId(seq));
  swapped_.emplace(seq, slots);
  swap_used_ += HostBlocks(slots);
  ++num_swap_outs_;
  return true;
}

bool FakeKvSpace::CanSwapIn(int64_t seq) const {
  auto it = swapped_.find(seq);
  return it != swapped_.end() && HostBlocks(it->second) <= num_free_blocks();
}

bool FakeKvSpace::SwapIn(int64_t seq) {
  auto it = swapped_.find(seq);
  if (it == swapped_.end()) {
    Misuse("SwapIn of non-swapped seq " + std::to_string(seq));
    return false;
  }
  if (!Applied(mgr_->Allocate(MakeSeqId(seq), it->second))) return false;
  swap_used_ -= HostBlocks(it->second);
  swapped_.erase(it);
  ++num_swap_ins_;
  return true;
}

Status FakeKvSpace::CheckInvariants() const {
  if (!misuse_.empty()) return Status::Internal("KvSpace misuse: " + misuse_.front());
  KVF_RETURN_IF_ERROR(mgr_->CheckInvariants());
  int64_t used = 0;
  for (const auto& [seq, slots] : swapped_) {
    if (IsResident(seq)) return Status::Internal("seq both resident and swapped");
    used += HostBlocks(slots);
  }
  if (used != swap_used_ || used > swap_capacity_) {
    return Status::Internal(base::StrFormat("swap area accounting: %lld used, %lld counted",
                                            static_cast<long long>(used),
                                            static_cast<long long>(swap_used_)));
  }
  return Status::Ok();
}

}  // namespace kvforge::sched::testing
