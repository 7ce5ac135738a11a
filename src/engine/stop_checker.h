// engine/stop_checker.h — turns a sequence's token pieces into streamable text: holds back
// incomplete UTF-8 (StreamDecoder) and any suffix that could be the start of a stop string, and
// cuts the text at the first stop string found.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace kvforge::engine {

class StopChecker {
 public:
  StopChecker(const tokenizer::Tokenizer& tok, const std::vector<std::string>& stops)
      : decoder_(tok), stops_(stops) {}

  // Adds a token; returns the newly safe text. Sets *hit when a stop string completed (the text
  // is then cut before it and nothing more should be added).
  std::string Push(int32_t token, bool* hit);
  // End of generation without a stop hit: whatever was held back.
  std::string Flush();
  const std::string& text() const { return text_; }

 private:
  tokenizer::StreamDecoder decoder_;
  const std::vector<std::string>& stops_;
  std::string text_;
  size_t emitted_ = 0;
};

}  // namespace kvforge::engine
