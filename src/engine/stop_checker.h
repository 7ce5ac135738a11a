// engine/stop_checker.h — the one end-of-sequence rule of both engines (Engine and EngineCore),
// and the text a sequence may stream: holds back incomplete UTF-8 (StreamDecoder) and any suffix
// that could be the start of a stop string, and cuts the text at the first stop string found.
#pragma once

#include <string>
#include <vector>

#include "kvforge/finish_reason.h"
#include "kvforge/sampling_params.h"
#include "tokenizer/tokenizer.h"

namespace kvforge::engine {

// What one sampled token does to its sequence.
struct TokenOutcome {
  bool keep_token = true;  // false: an end-of-generation or stop token id (not in the output)
  bool finished = false;
  FinishReason reason = FinishReason::kLength;  // meaningful when finished
  std::string text;  // newly safe text (what was held back too, when the sequence ended)
};

class StopChecker {
 public:
  StopChecker(const tokenizer::Tokenizer& tok, const SamplingParams& params)
      : tok_(tok), params_(params), decoder_(tok, !params.skip_special_tokens) {}

  // Applies the rule to a sampled token, `n_generated` tokens having been kept before it:
  // an end-of-generation token (unless ignore_eos) or a stop token id ends with "stop" and is
  // dropped; a completed stop string ends with "stop" (text cut before it); reaching max_tokens
  // ends with "length".
  TokenOutcome Accept(int32_t token, int32_t n_generated);
  // The token half of the rule: an end-of-generation token (unless ignore_eos) or a stop token
  // id. Beam search asks it of each candidate before choosing.
  bool IsEndToken(int32_t token) const;
  // End of generation for another reason (the context is full, the caller aborted): whatever
  // was held back.
  std::string Flush();
  // Feeds the text of a token already accepted elsewhere (a beam cloned from its parent).
  void Replay(int32_t token) {
    bool hit = false;
    (void)Push(token, &hit);
  }
  const std::string& text() const { return text_; }
  // The stop string that ended the sequence (the text is cut before it); empty when none did.
  const std::string& matched_stop() const { return matched_; }

 private:
  // Adds a token's text; returns the newly safe text; sets *hit when a stop string completed.
  std::string Push(int32_t token, bool* hit);

  const tokenizer::Tokenizer& tok_;
  const SamplingParams& params_;
  tokenizer::StreamDecoder decoder_;
  std::string text_;
  size_t emitted_ = 0;
  std::string matched_;
};

}  // namespace kvforge::engine
