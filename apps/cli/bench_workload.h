// bench_workload.h — seeded synthetic request streams for `kvforge bench throughput`.
//
// A workload is a set of conversations; each has one or more turns. The first turn of every
// conversation is submitted at t=0; a later turn is submitted when the previous one finishes,
// and its prompt is the previous prompt + the tokens the model generated + the new user tokens
// (so multi-turn chat reuses the whole history, as a chat front end would send it).
//   sharegpt      log-normal prompt and output lengths resembling ShareGPT (one turn each)
//   fixed         input_len-token prompts, output_len outputs
//   shared-prefix one common prefix_len-token prefix ("system prompt", RAG context) + a distinct
//                 input_len-token suffix per request
//   multi-turn    `turns` turns per conversation, input_len tokens for the first user message
//                 and 32 per later one
//   few-shot      a header plus a varying number of examples (lengths not multiples of any block
//                 size) from a shared pool, then a distinct question: prompts share prefixes that
//                 end at arbitrary, non-block-aligned positions
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvforge::cli {

struct Turn {
  std::vector<int32_t> user;  // tokens appended for this turn (the whole prompt for turn 0)
  int32_t output_len = 0;
};

struct Workload {
  std::vector<std::vector<Turn>> conversations;
  int64_t num_requests() const;
};

struct WorkloadSpec {
  std::string kind = "sharegpt";
  int64_t num_prompts = 64;  // conversations (one request each, except multi-turn)
  int64_t input_len = 128;
  int64_t output_len = 128;
  int64_t prefix_len = 400;  // shared-prefix
  int64_t turns = 4;         // multi-turn
  int64_t max_len = 2048;    // the model's context: nothing may exceed it
  int64_t vocab = 32000;
  uint64_t seed = 1;
};

bool IsWorkloadKind(const std::string& kind);
Workload MakeWorkload(const WorkloadSpec& spec);

}  // namespace kvforge::cli
