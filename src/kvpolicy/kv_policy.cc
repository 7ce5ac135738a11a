#include "kvforge/kv_policy.h"

#include <cmath>

#include "base/strings.h"

namespace kvforge {
namespace {

struct NamedKind {
  KvPolicyKind kind;
  std::string_view name;
};
constexpr NamedKind kKinds[] = {
    {KvPolicyKind::kNone, "none"},
    {KvPolicyKind::kStreaming, "streaming"},
    {KvPolicyKind::kH2O, "h2o"},
    {KvPolicyKind::kTova, "tova"},
    {KvPolicyKind::kKnorm, "knorm"},
    {KvPolicyKind::kSnapKV, "snapkv"},
    {KvPolicyKind::kPyramidKV, "pyramidkv"},
    {KvPolicyKind::kRandom, "random"},
    {KvPolicyKind::kQuest, "quest"},
    {KvPolicyKind::kNsa, "nsa"},
};

}  // namespace

std::string_view KvPolicyName(KvPolicyKind kind) {
  for (const auto& k : kKinds)
    if (k.kind == kind) return k.name;
  return "?";
}

std::string KvPolicyNames() {
  std::string out;
  for (const auto& k : kKinds) {
    if (!out.empty()) out += ", ";
    out += k.name;
  }
  return out;
}

Result<KvPolicyKind> ParseKvPolicyKind(std::string_view name) {
  for (const auto& k : kKinds)
    if (k.name == name) return k.kind;
  return Status::InvalidArgument(base::StrFormat("unknown KV policy '%.*s' (known: %s)",
                                                 static_cast<int>(name.size()), name.data(),
                                                 KvPolicyNames().c_str()));
}

std::string_view KvHeadSelectionName(KvHeadSelection h) {
  switch (h) {
    case KvHeadSelection::kShared:
      return "shared";
    case KvHeadSelection::kPerHead:
      return "per_head";
    case KvHeadSelection::kAdaptive:
      return "adaptive";
  }
  return "?";
}

Result<KvHeadSelection> ParseKvHeadSelection(std::string_view name) {
  for (KvHeadSelection h :
       {KvHeadSelection::kShared, KvHeadSelection::kPerHead, KvHeadSelection::kAdaptive})
    if (KvHeadSelectionName(h) == name) return h;
  return Status::InvalidArgument(
      base::StrFormat("unknown KV head selection '%.*s' (known: shared, per_head, adaptive)",
                      static_cast<int>(name.size()), name.data()));
}

Status ValidateKvPolicy(const KvPolicy& p) {
  if (!p.enabled()) return Status::Ok();
  const std::string_view name = KvPolicyName(p.kind);
  if (name == "?") return Status::InvalidArgument("unknown KV policy");
  if (!(p.budget > 0) || !std::isfinite(p.budget) || p.budget > 1e9 ||
      (p.budget > 1 && p.budget != std::floor(p.budget)))
    return Status::InvalidArgument(base::StrFormat(
        "kv budget must be a whole number of tokens >= 1 or a fraction in (0, 1), got %g",
        p.budget));
  if (p.sinks < 0 || p.sinks > 1 << 20)
    return Status::InvalidArgument(base::StrFormat("kv sinks must be >= 0, got %d", p.sinks));
  if (p.window < -1 || p.window > 1 << 20)
    return Status::InvalidArgument(
        base::StrFormat("kv window must be >= 0 (or -1 for the default), got %d", p.window));
  if (p.pool_kernel < 1 || p.pool_kernel % 2 == 0 || p.pool_kernel > 1023)
    return Status::InvalidArgument(
        base::StrFormat("kv pooling kernel must be odd and in [1, 1023], got %d", p.pool_kernel));
  if (!(p.beta >= 1) || !std::isfinite(p.beta))
    return Status::InvalidArgument(base::StrFormat("pyramidkv beta must be >= 1, got %g", p.beta));
  if (p.heads != KvHeadSelection::kShared) {
    const KvPolicyKind k = p.kind;
    if (k == KvPolicyKind::kStreaming || k == KvPolicyKind::kQuest || k == KvPolicyKind::kNsa)
      return Status::InvalidArgument(base::StrFormat(
          "kv heads %s: %.*s keeps the same tokens in every KV head (head selection applies to "
          "h2o, tova, knorm, snapkv, pyramidkv and random)",
          KvHeadSelectionName(p.heads).data(), static_cast<int>(name.size()), name.data()));
  }
  if (p.budget >= 1) {
    const auto budget = static_cast<int64_t>(p.budget);
    if (p.kind == KvPolicyKind::kStreaming && p.sinks >= budget)
      return Status::InvalidArgument(
          base::StrFormat("streaming: %d sinks leave no room for recent tokens in a budget of %lld",
                          p.sinks, (long long)budget));
    if ((p.kind == KvPolicyKind::kH2O || p.kind == KvPolicyKind::kSnapKV ||
         p.kind == KvPolicyKind::kPyramidKV) &&
        p.window >= budget)
      return Status::InvalidArgument(
          base::StrFormat("%.*s: window %d must be smaller than the budget %lld",
                          static_cast<int>(name.size()), name.data(), p.window, (long long)budget));
  }
  return Status::Ok();
}

}  // namespace kvforge
