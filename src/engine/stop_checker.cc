#include "engine/stop_checker.h"

#include <algorithm>

namespace kvforge {
namespace {

// Longest suffix of `text` that is a proper prefix of some stop string.
size_t Holdback(const std::string& text, const std::vector<std::string>& stops) {
  size_t hold = 0;
  for (const auto& s : stops) {
    for (size_t k = std::min(s.size() - 1, text.size()); k > hold; --k) {
      if (text.compare(text.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  return hold;
}

}  // namespace

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kAbort:
      return "abort";
  }
  return "unknown";
}

namespace engine {

bool StopChecker::IsEndToken(int32_t token) const {
  const std::vector<int32_t>& ids = params_.stop_token_ids;
  return (tok_.IsEog(token) && !params_.ignore_eos) ||
         std::find(ids.begin(), ids.end(), token) != ids.end();
}

TokenOutcome StopChecker::Accept(int32_t token, int32_t n_generated) {
  TokenOutcome out;
  if (IsEndToken(token)) {
    out.keep_token = false;
    out.finished = true;
    out.reason = FinishReason::kStop;
    out.text = Flush();
    return out;
  }
  bool hit = false;
  out.text = Push(token, &hit);
  if (hit) {
    out.finished = true;
    out.reason = FinishReason::kStop;
  } else if (n_generated + 1 >= params_.max_tokens) {
    out.finished = true;
    out.reason = FinishReason::kLength;
    out.text += Flush();
  }
  return out;
}

std::string StopChecker::Push(int32_t token, bool* hit) {
  *hit = false;
  const size_t before = text_.size();
  text_ += decoder_.Push(token);
  for (const auto& s : params_.stop) {
    // Only a stop string overlapping the new text can be new.
    const size_t from = before >= s.size() ? before - s.size() + 1 : 0;
    const size_t at = text_.find(s, from);
    if (at != std::string::npos) {
      text_.resize(at);
      *hit = true;
      // A later stop string can only hit before this cut, so the last hit is where the text ends.
      matched_ = s;
    }
  }
  const size_t safe = *hit ? text_.size() : text_.size() - Holdback(text_, params_.stop);
  std::string out;
  if (safe > emitted_) {
    out = text_.substr(emitted_, safe - emitted_);
    emitted_ = safe;
  }
  return out;
}

std::string StopChecker::Flush() {
  text_ += decoder_.Finish();
  std::string out = text_.size() > emitted_ ? text_.substr(emitted_) : "";
  emitted_ = text_.size();
  return out;
}

}  // namespace engine
}  // namespace kvforge
