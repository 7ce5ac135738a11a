#include "grammar/choice_gbnf.h"

#include "base/strings.h"
#include "grammar/gbnf_text.h"
#include "grammar/recognizer.h"

namespace kvforge::grammar {
namespace {

bool IsValidUtf8(const std::string& s) {
  Utf8Decoder dec;
  for (unsigned char b : s) {
    uint32_t cp = 0;
    if (dec.Feed(b, &cp) == Utf8Decoder::Fed::kInvalid) return false;
  }
  return !dec.Pending();
}

}  // namespace

Result<std::string> ChoiceToGbnf(const std::vector<std::string>& choices, int32_t max_choices) {
  if (choices.empty()) return Status::InvalidArgument("choice: the list is empty");
  if (static_cast<int64_t>(choices.size()) > max_choices)
    return Status::InvalidArgument(base::StrFormat("choice: %zu choices, above max_choices (%d)",
                                                   choices.size(), max_choices));
  std::string out = "root ::= ";
  for (size_t i = 0; i < choices.size(); ++i) {
    if (!IsValidUtf8(choices[i]))
      return Status::InvalidArgument(base::StrFormat("choice %zu is not valid UTF-8", i));
    out += (i ? " | " : "") + GbnfLiteral(choices[i]);
  }
  return out + "\n";
}

}  // namespace kvforge::grammar
