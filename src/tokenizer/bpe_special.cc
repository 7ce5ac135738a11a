// bpe_special.cc — special-token handling of BpeTokenizer: llama.cpp-compatible retyping of
// control-looking tokens and the partition of text into special tokens and raw fragments.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

#include "base/log.h"
#include "gguf/gguf_reader.h"
#include "tokenizer/bpe_tokenizer.h"

namespace kvforge::tokenizer {
namespace {

bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

}  // namespace

void BpeTokenizer::FixSpecialTypes(const gguf::GgufFile& file) {
  auto find = [&](std::string_view t) { return FindToken(t); };
  auto type = [&](TokenId id) -> TokenType& { return vocab_.types[static_cast<size_t>(id)]; };
  auto make_control = [&](TokenId id) {
    if (type(id) != TokenType::kControl && type(id) != TokenType::kUnknown)
      type(id) = TokenType::kControl;
  };
  std::vector<TokenId> eog;
  auto add_eog = [&](TokenId id) {
    if (id != kNoToken && std::find(eog.begin(), eog.end(), id) == eog.end()) eog.push_back(id);
  };
  auto key_id = [&](const char* key) -> TokenId {
    auto x = file.GetIntOr(key, -1);
    return x.ok() && *x >= 0 && *x < vocab_.size() ? static_cast<TokenId>(*x) : kNoToken;
  };
  struct FimKind {
    const char* key;
    const char* old_key;
    std::vector<const char*> texts;
    bool eog;
  };
  const std::vector<FimKind> fim = {
      {"tokenizer.ggml.fim_pre_token_id",
       "tokenizer.ggml.prefix_token_id",
       {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
        "<\xEF\xBD\x9C"
        "fim\xE2\x96\x81"
        "begin\xEF\xBD\x9C>",
        "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"},
       false},
      {"tokenizer.ggml.fim_suf_token_id",
       "tokenizer.ggml.suffix_token_id",
       {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
        "<\xEF\xBD\x9C"
        "fim\xE2\x96\x81"
        "hole\xEF\xBD\x9C>",
        "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"},
       false},
      {"tokenizer.ggml.fim_mid_token_id",
       "tokenizer.ggml.middle_token_id",
       {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
        "<\xEF\xBD\x9C"
        "fim\xE2\x96\x81"
        "end\xEF\xBD\x9C>",
        "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"},
       false},
      {"tokenizer.ggml.fim_pad_token_id",
       nullptr,
       {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"},
       true},
      {"tokenizer.ggml.fim_rep_token_id",
       nullptr,
       {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"},
       true},
      {"tokenizer.ggml.fim_sep_token_id", nullptr, {"<|file_sep|>"}, true},
  };
  for (const FimKind& k : fim) {
    TokenId id = key_id(k.key);
    if (id == kNoToken && k.old_key != nullptr) id = key_id(k.old_key);
    if (id == kNoToken) {
      for (const char* t : k.texts) {
        id = find(t);
        if (id != kNoToken) {
          make_control(id);
          break;
        }
      }
    }
    if (k.eog) add_eog(id);
  }
  static const char* const kEogTexts[] = {"<|eot_id|>",
                                          "<|im_end|>",
                                          "<|end|>",
                                          "<|return|>",
                                          "<|call|>",
                                          "<|flush|>",
                                          "<|calls|>",
                                          "<end_of_turn>",
                                          "<|endoftext|>",
                                          "</s>",
                                          "<|eom_id|>",
                                          "<EOT>",
                                          "_<EOT>",
                                          "[EOT]",
                                          "[EOS]",
                                          "<|end_of_text|>",
                                          "<end_of_utterance>",
                                          "<eos>",
                                          "<turn|>",
                                          "<|tool_response>",
                                          "<\xEF\xBD\x9C"
                                          "end\xE2\x96\x81"
                                          "of\xE2\x96\x81"
                                          "sentence\xEF\xBD\x9C>",
                                          "[e~["};
  for (const char* t : kEogTexts) {
    const TokenId id = find(t);
    if (id == kNoToken) continue;
    add_eog(id);
    make_control(id);
  }
  for (const char* t : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    const TokenId id = find(t);
    if (id != kNoToken) type(id) = TokenType::kUserDefined;
  }
  add_eog(vocab_.eos);
  add_eog(vocab_.eot);
  auto in_eog = [&](const char* t) {
    const TokenId id = find(t);
    return id != kNoToken && std::find(eog.begin(), eog.end(), id) != eog.end();
  };
  if (in_eog("<|end|>") && ((in_eog("<|return|>") && in_eog("<|call|>")) ||
                            (in_eog("<|calls|>") && in_eog("<|flush|>"))))
    type(find("<|end|>")) = TokenType::kUserDefined;
  if (in_eog("<|tool_response>") && in_eog("</s>")) type(find("</s>")) = TokenType::kNormal;

  // Vocab's end-of-turn detection wants control tokens; run it again on the new types.
  if (vocab_.eot == kNoToken) {
    for (const char* t :
         {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>"}) {
      const TokenId id = find(t);
      if (id != kNoToken && id != vocab_.eos && type(id) == TokenType::kControl) {
        vocab_.eot = id;
        break;
      }
    }
  }

  // Rebuild the special-token list with the new types (longest first, as Vocab orders it).
  vocab_.special_tokens.clear();
  for (size_t i = 0; i < vocab_.texts.size(); ++i) {
    const TokenType t = vocab_.types[i];
    if ((t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) &&
        !vocab_.texts[i].empty())
      vocab_.special_tokens.push_back(static_cast<TokenId>(i));
  }
  std::stable_sort(vocab_.special_tokens.begin(), vocab_.special_tokens.end(),
                   [&](TokenId a, TokenId b) {
                     return vocab_.texts[static_cast<size_t>(a)].size() >
                            vocab_.texts[static_cast<size_t>(b)].size();
                   });
}

std::vector<Tokenizer::Fragment> BpeTokenizer::Partition(std::string_view text,
                                                         bool parse_special) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  const size_t n = text.size();
  auto active = [&](size_t prio) {
    const TokenType t = vocab_.types[static_cast<size_t>(specials_[prio].id)];
    return parse_special || (t != TokenType::kControl && t != TokenType::kUnknown);
  };

  // 1. Which active special tokens occur at all (one pass, candidates by their first two bytes).
  std::vector<uint8_t> occurs;
  for (size_t i = 0; i < n; ++i) {
    const auto c0 = static_cast<unsigned char>(text[i]);
    if (!special_first_byte_[c0]) continue;
    if (occurs.empty()) occurs.assign(specials_.size(), 0);
    for (int32_t p : special_single_[c0]) occurs[static_cast<size_t>(p)] = 1;
    if (i + 1 >= n) continue;
    const size_t key = c0 << 8 | static_cast<unsigned char>(text[i + 1]);
    for (uint32_t k = special_bucket_start_[key]; k < special_bucket_start_[key + 1]; ++k) {
      const auto p = static_cast<size_t>(special_by_prefix_[k]);
      if (occurs[p]) continue;
      const std::string& t = vocab_.texts[static_cast<size_t>(specials_[p].id)];
      if (t.size() <= n - i && std::memcmp(text.data() + i, t.data(), t.size()) == 0) occurs[p] = 1;
    }
  }

  // 2. Token by token (longest first), take the leftmost non-overlapping occurrences that lie in
  // text no earlier token claimed: exactly what llama.cpp's repeated find() over the remaining
  // text fragments yields. Memory stays O(text), time O(text) per distinct token present.
  std::vector<uint8_t> state;  // 0 raw text, 1 special token, 2 stripped whitespace
  struct Hit {
    size_t pos;
    size_t len;
    TokenId id;
  };
  std::vector<Hit> hits;
  for (size_t prio = 0; prio < occurs.size(); ++prio) {
    if (!occurs[prio] || !active(prio)) continue;
    if (state.empty()) state.assign(n, 0);
    const SpecialEntry& e = specials_[prio];
    const std::string& t = vocab_.texts[static_cast<size_t>(e.id)];
    const size_t len = t.size();
    size_t from = 0;
    size_t pos;
    while ((pos = text.find(t, from)) != std::string_view::npos) {
      // Skip past the last claimed byte inside the window, if any.
      size_t blocked = pos + len;
      for (size_t j = pos + len; j-- > pos;) {
        if (state[j] != 0) {
          blocked = j;
          break;
        }
      }
      if (blocked < pos + len) {
        from = blocked + 1;
        continue;
      }
      std::fill(state.begin() + static_cast<std::ptrdiff_t>(pos),
                state.begin() + static_cast<std::ptrdiff_t>(pos + len), 1);
      hits.push_back({pos, len, e.id});
      from = pos + len;
      if (e.lstrip)
        for (size_t j = pos; j > 0 && state[j - 1] == 0 && IsAsciiSpace(text[j - 1]); --j)
          state[j - 1] = 2;
      if (e.rstrip)
        while (from < n && state[from] == 0 && IsAsciiSpace(text[from])) state[from++] = 2;
    }
  }
  if (hits.empty()) {
    frags.push_back({kNoToken, text});
    return frags;
  }

  // 3. Fragments in text order: raw runs between the tokens, skipping stripped whitespace.
  std::sort(hits.begin(), hits.end(), [](const Hit& x, const Hit& y) { return x.pos < y.pos; });
  auto raw_runs = [&](size_t from, size_t to) {
    size_t i = from;
    while (i < to) {
      while (i < to && state[i] != 0) ++i;
      size_t j = i;
      while (j < to && state[j] == 0) ++j;
      if (j > i) frags.push_back({kNoToken, text.substr(i, j - i)});
      i = j;
    }
  };
  size_t at = 0;
  for (const Hit& h : hits) {
    raw_runs(at, h.pos);
    frags.push_back({h.id, {}});
    at = h.pos + h.len;
  }
  raw_runs(at, n);
  return frags;
}

}  // namespace kvforge::tokenizer
