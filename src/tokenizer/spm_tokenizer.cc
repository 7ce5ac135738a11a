#include "tokenizer/spm_tokenizer.h"

#include <queue>
#include <unordered_map>

namespace kvforge::tokenizer {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

size_t Utf8Len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;  // stray continuation / invalid lead byte: one byte on its own
}

std::string EscapeWhitespace(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (char c : s) {
    if (c == ' ')
      out += kSpace;
    else
      out.push_back(c);
  }
  return out;
}

struct Symbol {
  size_t start;
  size_t len;
  int prev;
  int next;
};

struct Bigram {
  int left;
  int right;
  float score;
  size_t len;
  // Highest score first; ties go to the leftmost pair.
  bool operator<(const Bigram& o) const {
    return score < o.score || (score == o.score && left > o.left);
  }
};

}  // namespace

SpmTokenizer::SpmTokenizer(Vocab vocab) : Tokenizer(std::move(vocab)) {
  split_words_ = true;
  for (const std::string& t : vocab_.texts) {
    for (size_t at = t.find(kSpace, 1); at != std::string::npos; at = t.find(kSpace, at + 1)) {
      if (at < kSpace.size() || t.compare(at - kSpace.size(), kSpace.size(), kSpace) != 0) {
        split_words_ = false;
        return;
      }
    }
  }
}

std::vector<TokenId> SpmTokenizer::Encode(std::string_view text, bool add_special,
                                          bool parse_special) const {
  std::vector<TokenId> out;
  if (add_special && vocab_.add_bos) out.push_back(vocab_.bos);
  bool prev_special = true;  // a leading space goes before the first fragment
  for (const Fragment& fr : PartitionSpecial(text, parse_special)) {
    if (fr.token != kNoToken) {
      out.push_back(fr.token);
      prev_special = true;
      continue;
    }
    std::string raw;
    if (vocab_.add_space_prefix && prev_special) raw = " ";
    raw.append(fr.text);
    EncodeFragment(EscapeWhitespace(raw), &out);
    prev_special = false;
  }
  if (add_special && vocab_.add_eos) out.push_back(vocab_.eos);
  return out;
}

void SpmTokenizer::EncodeFragment(std::string_view s, std::vector<TokenId>* out) const {
  if (!split_words_) return EncodeWord(s, out);
  // Words start at a U+2581 that follows something else; repeated words are encoded once.
  std::unordered_map<std::string_view, std::pair<size_t, size_t>> seen;  // word -> span in *out
  size_t begin = 0;
  auto flush = [&](size_t end) {
    if (end <= begin) return;
    const std::string_view w = s.substr(begin, end - begin);
    if (auto it = seen.find(w); it != seen.end()) {
      const auto [at, n] = it->second;
      for (size_t k = 0; k < n; ++k) out->push_back((*out)[at + k]);
    } else {
      const size_t at = out->size();
      EncodeWord(w, out);
      if (w.size() <= 64) seen.emplace(w, std::make_pair(at, out->size() - at));
    }
    begin = end;
  };
  for (size_t i = kSpace.size(); i + kSpace.size() <= s.size(); ++i) {
    if (s.compare(i, kSpace.size(), kSpace) == 0 &&
        s.compare(i - kSpace.size(), kSpace.size(), kSpace) != 0) {
      flush(i);
      i += kSpace.size() - 1;
    }
  }
  flush(s.size());
}

void SpmTokenizer::EncodeWord(std::string_view s, std::vector<TokenId>* out) const {
  if (s.empty()) return;
  std::vector<Symbol> sym;
  sym.reserve(s.size());
  for (size_t off = 0; off < s.size();) {
    const size_t len = std::min(Utf8Len(static_cast<unsigned char>(s[off])), s.size() - off);
    const int idx = static_cast<int>(sym.size());
    sym.push_back({off, len, idx - 1, off + len == s.size() ? -1 : idx + 1});
    off += len;
  }
  std::priority_queue<Bigram> queue;
  auto try_add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const std::string_view t = s.substr(sym[l].start, sym[l].len + sym[r].len);
    const TokenId id = vocab_.Find(t);
    if (id == kNoToken) return;
    queue.push({l, r, vocab_.scores[static_cast<size_t>(id)], t.size()});
  };
  for (int i = 1; i < static_cast<int>(sym.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    // Stale entry: one side was merged away since it was queued.
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  for (int i = 0; i != -1; i = sym[i].next) {
    const std::string_view piece = s.substr(sym[i].start, sym[i].len);
    const TokenId id = vocab_.Find(piece);
    if (id != kNoToken) {
      out->push_back(id);
      continue;
    }
    // Byte fallback for characters the vocabulary lacks.
    for (unsigned char c : piece) {
      const TokenId bt = vocab_.byte_tokens[c];
      out->push_back(bt != kNoToken ? bt : vocab_.unk);
    }
  }
}

std::string SpmTokenizer::TokenToPiece(TokenId id, bool render_special) const {
  if (id < 0 || id >= vocab_.size()) return "";
  const auto i = static_cast<size_t>(id);
  const std::string& t = vocab_.texts[i];
  switch (vocab_.types[i]) {
    case TokenType::kNormal:
    case TokenType::kUndefined: {
      std::string out;
      out.reserve(t.size());
      for (size_t k = 0; k < t.size();) {
        if (t.compare(k, kSpace.size(), kSpace) == 0) {
          out.push_back(' ');
          k += kSpace.size();
        } else {
          out.push_back(t[k++]);
        }
      }
      return out;
    }
    case TokenType::kByte:
      for (int b = 0; b < 256; ++b)
        if (vocab_.byte_tokens[b] == id) return std::string(1, static_cast<char>(b));
      return "";
    case TokenType::kUserDefined:
      return t;
    case TokenType::kUnknown:
      return render_special ? t : "\xE2\x96\x85";
    case TokenType::kControl:
    case TokenType::kUnused:
      return render_special ? t : "";
  }
  return "";
}

}  // namespace kvforge::tokenizer
