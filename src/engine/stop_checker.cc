#include "engine/stop_checker.h"

#include <algorithm>

namespace kvforge::engine {
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

std::string StopChecker::Push(int32_t token, bool* hit) {
  *hit = false;
  const size_t before = text_.size();
  text_ += decoder_.Push(token);
  for (const auto& s : stops_) {
    // Only a stop string overlapping the new text can be new.
    const size_t from = before >= s.size() ? before - s.size() + 1 : 0;
    const size_t at = text_.find(s, from);
    if (at != std::string::npos) {
      text_.resize(at);
      *hit = true;
    }
  }
  const size_t safe = *hit ? text_.size() : text_.size() - Holdback(text_, stops_);
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

}  // namespace kvforge::engine
