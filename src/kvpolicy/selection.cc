#include "kvpolicy/selection.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvforge::kvpolicy {

bool IsOneShot(KvPolicyKind kind) {
  return kind == KvPolicyKind::kSnapKV || kind == KvPolicyKind::kPyramidKV;
}

bool ObservesAttention(KvPolicyKind kind) {
  return kind == KvPolicyKind::kH2O || kind == KvPolicyKind::kTova || IsOneShot(kind);
}

bool RepositionsKeys(KvPolicyKind kind) { return kind == KvPolicyKind::kStreaming; }

int64_t ObservationWindow(const KvPolicy& p) { return p.window >= 0 ? p.window : 32; }

int64_t FrontKept(const KvPolicy& p) { return p.kind == KvPolicyKind::kStreaming ? p.sinks : 0; }

int64_t RecentKept(const KvPolicy& p, int64_t budget) {
  switch (p.kind) {
    case KvPolicyKind::kStreaming:
      return budget - p.sinks;
    case KvPolicyKind::kH2O:
      return p.window >= 0 ? p.window : budget / 2;
    case KvPolicyKind::kSnapKV:
    case KvPolicyKind::kPyramidKV:
      return ObservationWindow(p);
    default:
      return 1;
  }
}

int64_t BudgetTokens(const KvPolicy& p, int64_t prompt_tokens) {
  int64_t b = p.budget >= 1
                  ? static_cast<int64_t>(p.budget)
                  : static_cast<int64_t>(std::ceil(p.budget * static_cast<double>(prompt_tokens)));
  int64_t forced = FrontKept(p) + 1;
  if (p.kind == KvPolicyKind::kH2O && p.window >= 0) forced = p.window + 1;
  if (IsOneShot(p.kind)) forced = ObservationWindow(p) + 1;
  return std::max(b, forced);
}

std::vector<int32_t> SelectKept(std::span<const int32_t> live, std::span<const float> score,
                                int64_t budget, int64_t front, int64_t back) {
  const auto n = static_cast<int64_t>(live.size());
  if (n <= budget) return std::vector<int32_t>(live.begin(), live.end());
  budget = std::max<int64_t>(budget, 0);
  front = std::clamp<int64_t>(front, 0, budget);
  back = std::clamp<int64_t>(back, 0, budget - front);
  std::vector<char> keep(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < front; ++i) keep[static_cast<size_t>(i)] = 1;
  for (int64_t i = n - back; i < n; ++i) keep[static_cast<size_t>(i)] = 1;
  // The rest by score: candidates are the middle slots [front, n - back).
  std::vector<int64_t> mid(static_cast<size_t>(n - back - front));
  std::iota(mid.begin(), mid.end(), front);
  const int64_t want = budget - front - back;
  if (want > 0 && !mid.empty()) {
    const auto better = [&](int64_t a, int64_t b) {
      const float sa = score[static_cast<size_t>(a)], sb = score[static_cast<size_t>(b)];
      return sa != sb ? sa > sb : a > b;
    };
    const auto k = static_cast<long>(std::min<int64_t>(want, static_cast<int64_t>(mid.size())));
    std::nth_element(mid.begin(), mid.begin() + (k - 1), mid.end(), better);
    for (long i = 0; i < k; ++i) keep[static_cast<size_t>(mid[static_cast<size_t>(i)])] = 1;
  }
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(budget));
  for (int64_t i = 0; i < n; ++i)
    if (keep[static_cast<size_t>(i)]) out.push_back(live[static_cast<size_t>(i)]);
  return out;
}

std::vector<std::vector<int32_t>> SelectKeptAdaptive(std::span<const std::vector<int32_t>> live,
                                                     std::span<const std::vector<float>> score,
                                                     int64_t budget, int64_t front, int64_t back,
                                                     double alpha) {
  const size_t heads = live.size();
  int64_t longest = 0;
  for (const auto& l : live) longest = std::max<int64_t>(longest, static_cast<int64_t>(l.size()));
  if (longest <= budget) return std::vector<std::vector<int32_t>>(live.begin(), live.end());
  budget = std::max<int64_t>(budget, 0);
  front = std::clamp<int64_t>(front, 0, budget);
  back = std::clamp<int64_t>(back, 0, budget - front);
  const int64_t want = budget - front - back;  // scored places per head
  const auto safe = static_cast<int64_t>(std::floor(alpha * static_cast<double>(want)));
  struct Candidate {
    float score;
    int32_t slot;
    uint32_t head;
    uint32_t index;  // in live[head]
  };
  const auto better = [](const Candidate& a, const Candidate& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.slot != b.slot) return a.slot > b.slot;
    return a.head < b.head;
  };
  std::vector<std::vector<char>> keep(heads);
  std::vector<Candidate> pool;  // middle slots not taken by a head's safeguard
  int64_t places = static_cast<int64_t>(heads) * want;
  for (size_t h = 0; h < heads; ++h) {
    const auto n = static_cast<int64_t>(live[h].size());
    keep[h].assign(static_cast<size_t>(n), 0);
    const int64_t f = std::min(front, n), b = std::min(back, n - f);
    for (int64_t i = 0; i < f; ++i) keep[h][static_cast<size_t>(i)] = 1;
    for (int64_t i = n - b; i < n; ++i) keep[h][static_cast<size_t>(i)] = 1;
    std::vector<Candidate> mid;
    for (int64_t i = f; i < n - b; ++i)
      mid.push_back({score[h][static_cast<size_t>(i)], live[h][static_cast<size_t>(i)],
                     static_cast<uint32_t>(h), static_cast<uint32_t>(i)});
    std::sort(mid.begin(), mid.end(), better);
    const int64_t guaranteed = std::min<int64_t>(safe, static_cast<int64_t>(mid.size()));
    for (int64_t i = 0; i < guaranteed; ++i) keep[h][mid[static_cast<size_t>(i)].index] = 1;
    places -= guaranteed;
    pool.insert(pool.end(), mid.begin() + guaranteed, mid.end());
  }
  const auto k =
      static_cast<size_t>(std::clamp<int64_t>(places, 0, static_cast<int64_t>(pool.size())));
  if (k > 0) {
    std::nth_element(pool.begin(), pool.begin() + static_cast<long>(k - 1), pool.end(), better);
    for (size_t i = 0; i < k; ++i) keep[pool[i].head][pool[i].index] = 1;
  }
  std::vector<std::vector<int32_t>> out(heads);
  for (size_t h = 0; h < heads; ++h)
    for (size_t i = 0; i < live[h].size(); ++i)
      if (keep[h][i]) out[h].push_back(live[h][i]);
  return out;
}

std::vector<float> AvgPool1d(std::span<const float> x, int32_t kernel) {
  const auto n = static_cast<int64_t>(x.size());
  const int64_t half = kernel / 2;
  std::vector<double> prefix(static_cast<size_t>(n + 1), 0.0);
  for (int64_t i = 0; i < n; ++i) prefix[static_cast<size_t>(i + 1)] = prefix[i] + x[i];
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t lo = std::max<int64_t>(0, i - half), hi = std::min(n, i + half + 1);
    out[static_cast<size_t>(i)] =
        static_cast<float>((prefix[static_cast<size_t>(hi)] - prefix[static_cast<size_t>(lo)]) /
                           static_cast<double>(hi - lo));
  }
  return out;
}

std::vector<int64_t> PyramidBudgets(int64_t budget, int64_t window, int32_t n_layer, float beta) {
  std::vector<int64_t> out(static_cast<size_t>(n_layer), budget);
  if (n_layer <= 1) return out;
  // PyramidKV's arithmetic sequence, with a fractional step (the reference rounds the step down,
  // which for few prompt tokens over many layers gives every layer ~2x the budget) and rounding
  // per layer, so the mean stays the budget.
  const auto prompt = static_cast<double>(std::max<int64_t>(budget - window, 0));
  const double min_num = std::floor(prompt / static_cast<double>(beta));
  const double max_num = 2 * prompt - min_num;
  const double step = (max_num - min_num) / (n_layer - 1);
  for (int32_t l = 0; l < n_layer; ++l)
    out[static_cast<size_t>(l)] =
        static_cast<int64_t>(std::llround(std::max(max_num - l * step, 0.0))) + window;
  return out;
}

void SlotScores::Ensure(int32_t n_layer, int64_t slots) {
  if (n_layer == n_layer_ && slots <= stride_) return;
  const int64_t stride = std::max(slots, stride_ + stride_ / 2);
  std::vector<float> grown(static_cast<size_t>(n_layer * stride), 0.0f);
  for (int32_t l = 0; l < std::min(n_layer, n_layer_); ++l)
    std::copy(values_.begin() + l * stride_, values_.begin() + (l + 1) * stride_,
              grown.begin() + l * stride);
  values_ = std::move(grown);
  n_layer_ = n_layer;
  stride_ = stride;
}

void SlotScores::Clear() { std::fill(values_.begin(), values_.end(), 0.0f); }

void SlotScores::Compact(const std::vector<std::vector<int32_t>>& keep) {
  for (int32_t l = 0; l < n_layer_ && l < static_cast<int32_t>(keep.size()); ++l) {
    float* row = values_.data() + l * stride_;
    const auto& k = keep[static_cast<size_t>(l)];
    for (size_t i = 0; i < k.size(); ++i) row[i] = row[k[i]];  // ascending: read before written
    std::fill(row + k.size(), row + stride_, 0.0f);
  }
}

}  // namespace kvforge::kvpolicy
