// spec/ngram_drafter.h — prompt lookup decoding (Saxena 2023; vLLM's "ngram", llama.cpp's
// ngram-simple): the tokens that followed the latest earlier occurrence of the sequence's last n
// tokens that k tokens follow (else the latest with the longest continuation), for n from max_n
// down to min_n, are the draft. No model: a scan of the sequence's own prompt and output,
// O(tokens x n) per call.
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kvforge::spec {

// Up to `k` tokens to follow `tokens` (empty: no suffix of min_n..max_n tokens occurred before).
// 1 <= min_n <= max_n.
std::vector<int32_t> ProposeNgram(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n,
                                  int32_t k);

}  // namespace kvforge::spec
