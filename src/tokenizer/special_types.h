// tokenizer/special_types.h — llama.cpp's load-time retyping of special tokens, applied to every
// vocabulary (SentencePiece and BPE alike) before its special-token list is built: end-of-
// generation and fill-in-the-middle texts become control tokens (Phi-3's "</s>" is user-defined
// in the GGUF but control in llama.cpp, so plain text "</s>" stays text with special parsing
// off), gpt-oss / harmony channel markers become user-defined, Gemma 4's "</s>" normal.
// Internal to the tokenizer module (Vocab::FromGguf calls it).
#pragma once

#include "tokenizer/vocab.h"

namespace kvforge::tokenizer {

void ApplyLlamaCppTokenTypes(const gguf::GgufFile& file, Vocab* vocab);

}  // namespace kvforge::tokenizer
