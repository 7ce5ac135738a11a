// kvforge/sampling_params.h — how a request wants its tokens chosen (vLLM-shaped fields).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvforge/kv_policy.h"
#include "kvforge/status.h"

namespace kvforge {

// Constrained decoding (vLLM's StructuredOutputsParams): the output must be a sentence of one
// grammar, given in one of these forms. At most one is set; none means unconstrained.
struct StructuredOutputs {
  std::string json;                 // a JSON Schema, as JSON text
  bool json_object = false;         // any JSON object (OpenAI's response_format json_object)
  std::string regex;                // full match of a regular expression
  std::vector<std::string> choice;  // exactly one of these strings
  std::string grammar;              // GBNF text (llama.cpp's grammar syntax)
  // Reasoning first: the constraint applies only after `reasoning_end` (e.g. "</think>") has
  // appeared in the output; before it every token is free but the end tokens. With
  // `reasoning_start` (e.g. "<think>") the reply may skip reasoning: unless its first token
  // starts with reasoning_start, the constraint applies from the first token. An empty
  // reasoning_end: the constraint applies from the start.
  std::string reasoning_start;
  std::string reasoning_end;

  // The forms set (the reasoning markers are not a form).
  int32_t NumSet() const {
    return !json.empty() + json_object + !regex.empty() + !choice.empty() + !grammar.empty();
  }
  bool enabled() const { return NumSet() > 0; }
};

struct SamplingParams {
  float temperature = 0.8f;         // <= 0: greedy
  int32_t top_k = 40;               // <= 0: disabled
  float top_p = 0.95f;              // >= 1: disabled
  float min_p = 0.05f;              // <= 0: disabled
  float repetition_penalty = 1.0f;  // 1: disabled (llama.cpp / CTRL style: divide positive logits)
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t penalty_last_n = 64;    // window of recent tokens the penalties look at (-1: all)
  uint64_t seed = 0xFFFFFFFFull;  // 0xFFFFFFFF: pick a random seed
  int32_t max_tokens = 128;
  bool ignore_eos = false;
  std::vector<std::string> stop;  // stop strings (not included in the output)
  std::vector<int32_t> stop_token_ids;
  int32_t logprobs = 0;         // top-N log-probabilities to report per token
  int32_t n = 1;                // completions per prompt (parallel sampling on shared blocks)
  int32_t beam_width = 0;       // > 1: beam search with this many beams (returns the best n)
  float length_penalty = 1.0f;  // beam score = cumulative logprob / length^length_penalty
  // Prefix-cache isolation (a request property, carried here for convenience): requests share
  // cached KV only when their salts are equal (vLLM's cache_salt; e.g. one salt per tenant).
  std::string cache_salt;
  // KV eviction for this request (a request property too): unset uses the engine's
  // EngineConfig::kv_policy; {kind none} turns the engine's off for this request.
  std::optional<KvPolicy> kv_policy;
  StructuredOutputs structured_outputs;
  // Added to the logits of these token ids before sampling (OpenAI's logit_bias: -100 bans a
  // token, 100 all but forces it).
  std::vector<std::pair<int32_t, float>> logit_bias;
  // false: control tokens (e.g. [TOOL_CALLS], <|python_tag|>) appear in the output text.
  bool skip_special_tokens = true;

  // Clear error for out-of-range values, before anything is scheduled.
  Status Validate() const;
};

}  // namespace kvforge
