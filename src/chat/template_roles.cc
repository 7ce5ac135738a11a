#include "chat/template_roles.h"

#include <algorithm>
#include <cctype>

namespace kvforge::chat {
namespace {

bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Cursor {
 public:
  Cursor(std::string_view s, size_t at) : s_(s), at_(at) {}
  void SkipSpaces() {
    while (at_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[at_]))) ++at_;
  }
  bool Eat(std::string_view word) {
    if (s_.compare(at_, word.size(), word) != 0) return false;
    at_ += word.size();
    return true;
  }
  bool EatAny(std::string_view chars) {
    if (at_ < s_.size() && chars.find(s_[at_]) != std::string_view::npos) {
      ++at_;
      return true;
    }
    return false;
  }
  // A quoted identifier ('user' or "user"); empty when there is none here.
  std::string QuotedName() {
    if (at_ >= s_.size() || (s_[at_] != '\'' && s_[at_] != '"')) return "";
    const char quote = s_[at_];
    size_t end = at_ + 1;
    if (end >= s_.size() || !IsIdentStart(s_[end])) return "";
    while (end < s_.size() && IsIdentChar(s_[end])) ++end;
    if (end >= s_.size() || s_[end] != quote) return "";
    std::string name(s_.substr(at_ + 1, end - at_ - 1));
    at_ = end + 1;
    return name;
  }

 private:
  std::string_view s_;
  size_t at_;
};

// After "role" (and the quote/bracket closing a subscript): `== 'x'`, `!= 'x'`, `in ['x', 'y']`.
void ReadComparedNames(Cursor c, std::vector<std::string>* out) {
  c.EatAny("'\"");
  c.EatAny("]");
  c.SkipSpaces();
  if (c.Eat("==") || c.Eat("!=")) {
    c.SkipSpaces();
    if (std::string n = c.QuotedName(); !n.empty()) out->push_back(std::move(n));
    return;
  }
  if (!c.Eat("in")) return;
  c.SkipSpaces();
  if (!c.EatAny("[(")) return;
  for (;;) {
    c.SkipSpaces();
    std::string n = c.QuotedName();
    if (n.empty()) return;
    out->push_back(std::move(n));
    c.SkipSpaces();
    if (!c.EatAny(",")) return;
  }
}

}  // namespace

std::vector<std::string> RolesNamedByTemplate(std::string_view source) {
  std::vector<std::string> roles;
  constexpr std::string_view kRole = "role";
  for (size_t at = source.find(kRole); at != std::string_view::npos;
       at = source.find(kRole, at + 1)) {
    const size_t after = at + kRole.size();
    if (after < source.size() && IsIdentChar(source[after])) continue;  // "roles", "role_x"
    ReadComparedNames(Cursor(source, after), &roles);
  }
  std::sort(roles.begin(), roles.end());
  roles.erase(std::unique(roles.begin(), roles.end()), roles.end());
  return roles;
}

}  // namespace kvforge::chat
