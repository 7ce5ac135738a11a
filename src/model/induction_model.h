// induction_model.h — writes a two-layer llama GGUF whose weights are set by hand so that it
// implements an induction-head circuit: at position i it predicts the token that followed the
// earlier place where the bigram (token[i-1], token[i]) occurred. A model that provably
// retrieves lets a passkey test measure what a KV policy loses (trained TinyStories models
// cannot retrieve at all).
//
// The circuit (d_model 512, 2 heads of 256, feed-forward zeroed, every norm weight 1):
//   residual  [const 1 | emb c | prev1 c | prev2 c | out c]   c = 100, unit token codes
//   layer 0   head h (h = 0, 1) attends by position only: q and k read the constant channel and
//             live in the high-frequency RoPE pairs, phased so the score peaks at distance h + 1;
//             its value (the token's code) lands in prev1 / prev2
//   layer 1   head 0 matches content in the RoPE pairs that barely rotate (freq_base 1e30):
//             q = [code(t_i) ; prev1_i], k = [prev1_j ; prev2_j], so the score is highest where
//             (t_{j-2}, t_{j-1}) == (t_{i-1}, t_i); its value (code(t_j)) lands in out
//   output    logits = scale * code(t) . out
// The position-head weights are fitted to the context length: the make-model command reports
// the smallest logit margin between distance h + 1 and any other distance below `ctx`.
#pragma once

#include <cstdint>
#include <string>

#include "kvforge/status.h"
#include "tensor/dtype.h"

namespace kvforge::gguf {
class GgufFile;
}

namespace kvforge::model {

struct InductionModelSpec {
  int64_t ctx = 4096;  // context_length; the position heads are checked up to this distance
  tensor::DType dtype = tensor::DType::kF16;
  uint64_t seed = 1;  // token codes
  // Padding for speed measurements: blocks after the two circuit layers whose attention output
  // and feed-forward weights are zero (they change nothing but are read and multiplied like any
  // others), and the feed-forward width of every block. layers 16, ffn 44032 make a model of
  // about a billion parameters that still copies.
  int64_t layers = 2;
  int64_t ffn = 32;
};

struct InductionModelReport {
  int64_t n_vocab = 0;
  double position_margin = 0;  // logits: score at distance h+1 minus the best other distance
  double content_margin = 0;   // logits: full bigram match minus a one-token match
};

// Validates the spec and writes the model to `path`, copying every tokenizer.* key from `vocab`.
Result<InductionModelReport> WriteInductionModel(const InductionModelSpec& spec,
                                                 const gguf::GgufFile& vocab,
                                                 const std::string& path);

}  // namespace kvforge::model
