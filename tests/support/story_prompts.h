// story_prompts.h — prompts for engine tests from llama.cpp's stories260K goldens
// (tests/data/reference/stories260K-greedy.json).
#pragma once

#include <cstdint>
#include <vector>

namespace kvforge::testing {

using Prompts = std::vector<std::vector<int32_t>>;

// The goldens' prompt ids, in file order.
Prompts GoldenPrompts();
// A shared "system prompt" (every golden prompt concatenated, BOS once) followed by each golden
// prompt: long prompts that share a prefix.
Prompts SharedPrefixPrompts();

}  // namespace kvforge::testing
