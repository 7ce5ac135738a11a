#include "passkey_task.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string_view>

namespace kvforge::cli {
namespace {

constexpr const char* kInstruction =
    "There is an important piece of information hidden inside a lot of irrelevant text. Find it "
    "and memorize it. I will quiz you about it.";
constexpr const char* kFiller[] = {
    " The grass is green.", " The sky is blue.",      " The sun is yellow.",
    " Here we go.",         " There and back again.",
};
constexpr int64_t kFillerCycle = sizeof(kFiller) / sizeof(kFiller[0]);
constexpr const char* kQuestion = " What is the pass key? The pass key is:";

std::string Needle(const std::string& key) { return " The pass key is: " + key + ". Remember it."; }

std::string PromptText(int64_t sentences, int64_t needle_at, const std::string& key,
                       size_t* needle_offset) {
  std::string text = kInstruction;
  for (int64_t s = 0; s <= sentences; ++s) {
    if (s == needle_at) {
      *needle_offset = text.size();
      text += Needle(key);
    }
    if (s < sentences) text += kFiller[s % kFillerCycle];
  }
  return text + kQuestion;
}

}  // namespace

std::string RandomPasskey(int digits, std::mt19937_64& rng) {
  std::string pool = "0123456789";
  do {
    std::shuffle(pool.begin(), pool.end(), rng);
  } while (pool[0] == '0');
  return pool.substr(0, static_cast<size_t>(std::clamp(digits, 1, 10)));
}

Result<int64_t> FillerSentencesFor(const TokenizeFn& tokenize, int64_t target_tokens) {
  size_t ignored = 0;
  KVF_ASSIGN_OR_RETURN(auto bare, tokenize(PromptText(0, 0, "12345", &ignored)));
  const int64_t fixed = static_cast<int64_t>(bare.size());
  if (fixed > target_tokens)
    return Status::InvalidArgument("the passkey prompt needs at least " + std::to_string(fixed) +
                                   " tokens with this tokenizer");
  // Tokens per filler cycle, measured on a long run so boundaries average out.
  constexpr int64_t kProbe = 10 * kFillerCycle;
  KVF_ASSIGN_OR_RETURN(auto probe, tokenize(PromptText(kProbe, 0, "12345", &ignored)));
  const double per_sentence =
      std::max(1.0, static_cast<double>(static_cast<int64_t>(probe.size()) - fixed) / kProbe);
  int64_t n = static_cast<int64_t>((target_tokens - fixed) / per_sentence);
  // Shrink until the longest key still fits (tokenization is not exactly additive).
  for (;;) {
    KVF_ASSIGN_OR_RETURN(auto t, tokenize(PromptText(n, 0, "9876543210", &ignored)));
    if (static_cast<int64_t>(t.size()) <= target_tokens || n == 0) break;
    n = std::max<int64_t>(0, n - 1 - (static_cast<int64_t>(t.size()) - target_tokens) / 4);
  }
  return n;
}

Result<PasskeyPrompt> BuildPasskeyPrompt(const TokenizeFn& tokenize, int64_t sentences,
                                         double depth, const std::string& key) {
  if (!(depth >= 0 && depth <= 1)) return Status::InvalidArgument("depth must be in [0, 1]");
  const int64_t at = static_cast<int64_t>(std::llround(depth * static_cast<double>(sentences)));
  PasskeyPrompt p;
  p.key = key;
  size_t offset = 0;
  const std::string text = PromptText(sentences, at, key, &offset);
  KVF_ASSIGN_OR_RETURN(p.tokens, tokenize(text));
  KVF_ASSIGN_OR_RETURN(auto head, tokenize(text.substr(0, offset)));
  p.needle_token = static_cast<int64_t>(head.size());
  return p;
}

namespace {

// The first run of digits in `s` (empty if none).
std::string_view FirstDigits(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && !std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  size_t j = i;
  while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
  return s.substr(i, j - i);
}

}  // namespace

bool PasskeyRetrieved(const std::string& answer, const std::string& key) {
  return FirstDigits(answer) == key;
}

int PasskeyDigitsRetrieved(const std::string& answer, const std::string& key) {
  const std::string_view got = FirstDigits(answer);
  int n = 0;
  while (static_cast<size_t>(n) < std::min(got.size(), key.size()) && got[n] == key[n]) ++n;
  return n;
}

}  // namespace kvforge::cli
