// passkey_task.h — the passkey retrieval prompt (Mohtashami & Jaggi 2023, as LongLoRA and the
// eviction papers use it): an instruction, filler sentences, a needle "The pass key is: NNNNN.
// Remember it." planted at a depth, more filler, and the question "What is the pass key? The
// pass key is:". A model retrieves when its greedy continuation starts with the key's digits.
// The needle's "is:" occurs nowhere else, so a model that copies after the last matching bigram
// (kvforge make-model --induction) finds it; the key's digits are distinct so that its own
// bigrams are unique too.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kvforge/status.h"

namespace kvforge::cli {

// Text -> token ids (BOS included); the engine's tokenizer.
using TokenizeFn = std::function<Result<std::vector<int32_t>>(const std::string&)>;

struct PasskeyPrompt {
  std::string key;  // the digits
  std::vector<int32_t> tokens;
  int64_t needle_token = 0;  // where the needle starts, in tokens (approximately: its sentence)
};

// `digits` distinct random digits (the first not 0); 1 <= digits <= 10.
std::string RandomPasskey(int digits, std::mt19937_64& rng);

// How many filler sentences bring the prompt to at most `target_tokens`; error when even the
// instruction, needle and question do not fit.
Result<int64_t> FillerSentencesFor(const TokenizeFn& tokenize, int64_t target_tokens);

// The prompt with the needle after round(depth * sentences) filler sentences; depth in [0, 1].
Result<PasskeyPrompt> BuildPasskeyPrompt(const TokenizeFn& tokenize, int64_t sentences,
                                         double depth, const std::string& key);

// True when the first run of digits in `answer` is exactly `key`.
bool PasskeyRetrieved(const std::string& answer, const std::string& key);
// How many of the key's digits the first run of digits in `answer` starts with (partial credit:
// a policy that keeps the needle's start but not its end retrieves a prefix).
int PasskeyDigitsRetrieved(const std::string& answer, const std::string& key);

}  // namespace kvforge::cli
