// story_prompts.h — prompts for engine tests from llama.cpp's stories260K goldens
// (tests/data/reference/stories260K-greedy.json).
#pragma once

#include <cstdint>
#include <vector>

#include "kvforge/sampling_params.h"

namespace kvforge::testing {

using Prompts = std::vector<std::vector<int32_t>>;

// The goldens' prompt ids, in file order.
Prompts GoldenPrompts();
// A shared "system prompt" (every golden prompt concatenated, BOS once) followed by each golden
// prompt: long prompts that share a prefix.
Prompts SharedPrefixPrompts();

// Greedy decoding of exactly `max_tokens` tokens (EOS ignored), so runs compare token for token.
inline SamplingParams Greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

}  // namespace kvforge::testing
