#include "tokenizer/tokenizer.h"

#include "gguf/gguf_reader.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/spm_tokenizer.h"

namespace kvforge::tokenizer {

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const gguf::GgufFile& file) {
  KVF_ASSIGN_OR_RETURN(Vocab v, Vocab::FromGguf(file));
  if (v.model == "llama") return std::unique_ptr<Tokenizer>(new SpmTokenizer(std::move(v)));
  // Byte-level BPE, and Gemma 4's BPE over raw UTF-8.
  if (v.model == "gpt2" || v.model == "gemma4") return BpeTokenizer::Create(std::move(v), file);
  return Status::Unimplemented(file.path() + ": tokenizer model '" + v.model +
                               "' is not supported (supported: llama/SentencePiece, gpt2 and "
                               "gemma4/BPE; not bert/WordPiece, t5/Unigram, rwkv, plamo2)");
}

std::string Tokenizer::Decode(const std::vector<TokenId>& ids, bool render_special) const {
  std::string out;
  for (TokenId id : ids) out += TokenToPiece(id, render_special);
  return out;
}

std::vector<Tokenizer::Fragment> Tokenizer::PartitionSpecial(std::string_view text,
                                                             bool parse_special) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({kNoToken, text});
  for (TokenId id : vocab_.special_tokens) {
    const TokenType type = vocab_.types[static_cast<size_t>(id)];
    if (!parse_special && (type == TokenType::kControl || type == TokenType::kUnknown)) continue;
    const std::string& st = vocab_.texts[static_cast<size_t>(id)];
    std::vector<Fragment> next;
    next.reserve(frags.size());
    bool changed = false;
    for (const Fragment& fr : frags) {
      if (fr.token != kNoToken) {
        next.push_back(fr);
        continue;
      }
      std::string_view rest = fr.text;
      size_t pos;
      while ((pos = rest.find(st)) != std::string_view::npos) {
        if (pos > 0) next.push_back({kNoToken, rest.substr(0, pos)});
        next.push_back({id, {}});
        rest.remove_prefix(pos + st.size());
        changed = true;
      }
      if (!rest.empty()) next.push_back({kNoToken, rest});
    }
    if (changed) frags.swap(next);
  }
  return frags;
}

size_t CompleteUtf8Prefix(std::string_view s) {
  // Walk back over at most 3 continuation bytes to the last lead byte.
  size_t n = s.size();
  size_t i = n;
  int back = 0;
  while (i > 0 && back < 4) {
    const unsigned char c = static_cast<unsigned char>(s[i - 1]);
    if ((c & 0xC0) != 0x80) {
      size_t need = c < 0x80             ? 1
                    : (c & 0xE0) == 0xC0 ? 2
                    : (c & 0xF0) == 0xE0 ? 3
                    : (c & 0xF8) == 0xF0 ? 4
                                         : 1;
      return (n - (i - 1)) >= need ? n : i - 1;
    }
    --i;
    ++back;
  }
  return n;  // only continuation bytes (invalid): nothing will complete them
}

std::string StreamDecoder::Push(TokenId id) {
  pending_ += tok_.TokenToPiece(id, render_special_);
  const size_t k = CompleteUtf8Prefix(pending_);
  std::string out = pending_.substr(0, k);
  pending_.erase(0, k);
  return out;
}

std::string StreamDecoder::Finish() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace kvforge::tokenizer
