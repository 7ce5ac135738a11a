#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

#include "base/log.h"
#include "base/strings.h"
#include "gguf/gguf_reader.h"

namespace kvforge::tokenizer {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581

// ---------------------------------------------------------------------------------------------
// UTF-8 and byte-level helpers.
// ---------------------------------------------------------------------------------------------

using base::AppendUtf8;

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68 bytes
// take U+0100.. in byte order.
std::array<uint32_t, 256> ByteToCodepoint() {
  std::array<uint32_t, 256> m{};
  uint32_t n = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    m[b] = keep ? b : 256 + n++;
  }
  return m;
}

// Byte length of the UTF-8 character whose lead byte is c (1 for anything that is not a lead).
size_t Utf8Len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;
}

// Decodes one UTF-8 character at s[i]; false (and *len = 1) when malformed.
bool DecodeUtf8(std::string_view s, size_t i, uint32_t* cp, size_t* len) {
  const auto c = static_cast<unsigned char>(s[i]);
  const size_t n = Utf8Len(c);
  *len = 1;
  if (n == 1) {
    *cp = c;
    return c < 0x80;
  }
  if (i + n > s.size()) return false;
  uint32_t v = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return false;
    v = (v << 6) | (cc & 0x3F);
  }
  *cp = v;
  *len = n;
  return true;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Byte of a "<0xXX>" token text, or -1.
int HexByteToken(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  const int hi = HexDigit(t[3]), lo = HexDigit(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// Fast hash of short strings: 8 bytes at a time, multiply-xorshift mixing.
uint64_t HashBytes(uint64_t seed, std::string_view s) {
  uint64_t h = (seed * 0x9E3779B97F4A7C15ull) ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t v;
    std::memcpy(&v, s.data() + i, 8);
    h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  uint64_t tail = 0;
  if (i < s.size()) std::memcpy(&tail, s.data() + i, s.size() - i);
  h = (h ^ tail) * 0x94D049BB133111EBull;
  return h ^ (h >> 29);
}

// ---------------------------------------------------------------------------------------------
// Merging: candidate pairs in a binary min-heap, lowest rank first, the leftmost on equal ranks.
// ---------------------------------------------------------------------------------------------

struct MergeCandidate {
  int32_t rank;
  int32_t left;   // symbol index of the left side
  int32_t right;  // symbol index of the right side
  int32_t left_id;
  int32_t right_id;
  int32_t merged;
};

inline bool Before(const MergeCandidate& a, const MergeCandidate& b) {
  return a.rank < b.rank || (a.rank == b.rank && a.left < b.left);
}

void SiftDown(MergeCandidate* h, size_t n, size_t i) {
  const MergeCandidate x = h[i];
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && Before(h[c + 1], h[c])) ++c;
    if (!Before(h[c], x)) break;
    h[i] = h[c];
    i = c;
  }
  h[i] = x;
}

void HeapMake(std::vector<MergeCandidate>* heap) {
  for (size_t i = heap->size() / 2; i-- > 0;) SiftDown(heap->data(), heap->size(), i);
}

void HeapPushBack(std::vector<MergeCandidate>* heap) {  // restores the heap after push_back()
  MergeCandidate* h = heap->data();
  size_t i = heap->size() - 1;
  const MergeCandidate x = h[i];
  while (i > 0) {
    const size_t parent = (i - 1) / 2;
    if (!Before(x, h[parent])) break;
    h[i] = h[parent];
    i = parent;
  }
  h[i] = x;
}

MergeCandidate HeapPop(std::vector<MergeCandidate>* heap) {
  const MergeCandidate top = heap->front();
  heap->front() = heap->back();
  heap->pop_back();
  if (!heap->empty()) SiftDown(heap->data(), heap->size(), 0);
  return top;
}

// ---------------------------------------------------------------------------------------------
// Per-thread caches (no locking; entries are tagged with the owning tokenizer's instance id,
// which is never reused, so tokenizers can share a thread and come and go).
// ---------------------------------------------------------------------------------------------

// Encoded words: 2-way set-associative, one cache line per entry, kCacheSets * 2 words at most.
// Only short words with few tokens fit; others are encoded every time.
struct alignas(64) CachedWord {
  uint64_t owner;  // 0 = empty
  uint8_t len;
  uint8_t n_ids;
  char key[22];
  TokenId ids[8];
};
static_assert(sizeof(CachedWord) == 64);
constexpr size_t kMaxCachedWordBytes = sizeof(CachedWord::key);
constexpr size_t kMaxCachedWordIds = sizeof(CachedWord::ids) / sizeof(TokenId);
constexpr size_t kCacheSets = 4096;

// Recent merge-pair lookups: a large table (Gemma 4: 515k merges, 16 MB) misses the CPU caches on
// nearly every probe, while text reuses few pairs. Reset when another tokenizer uses the thread.
struct PairSlot {
  uint64_t key;  // MergeTable key; kNoPair = empty
  int32_t rank;  // -1: the pair does not merge
  int32_t merged;
};
constexpr uint64_t kNoPair = ~uint64_t{0};
constexpr int kPairSlotBits = 13;

struct ThreadCache {
  std::vector<CachedWord> words;  // allocated on first use
  uint64_t pair_owner = 0;
  std::vector<PairSlot> pairs;

  void PreparePairs(uint64_t owner) {
    if (pair_owner == owner) return;
    pairs.assign(size_t{1} << kPairSlotBits, PairSlot{kNoPair, -1, 0});
    pair_owner = owner;
  }
  PairSlot& Pair(uint64_t key) {
    return pairs[static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> (64 - kPairSlotBits))];
  }
  // The set of (owner, word): two adjacent entries, the most recently used first.
  CachedWord* WordSet(uint64_t owner, std::string_view w) {
    if (words.empty()) words.assign(kCacheSets * 2, CachedWord{});
    return &words[(HashBytes(owner, w) & (kCacheSets - 1)) * 2];
  }
  static bool Matches(const CachedWord& e, uint64_t owner, std::string_view w) {
    return e.owner == owner && e.len == w.size() && std::memcmp(e.key, w.data(), w.size()) == 0;
  }
};

ThreadCache* GetThreadCache() {
  thread_local ThreadCache cache;
  return &cache;
}

std::atomic<uint64_t> g_next_instance_id{1};

}  // namespace

// (left symbol, right symbol) -> (rank, merged symbol); open addressing, first insert wins.
struct BpeTokenizer::MergeTable {
  struct Entry {
    uint64_t key;
    int32_t rank;
    int32_t merged;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  explicit MergeTable(size_t n) {
    size_t cap = 16;
    int bits = 4;
    while (cap * 3 < n * 4) {  // load factor <= 3/4
      cap <<= 1;
      ++bits;
    }
    slots.assign(cap, Entry{kEmpty, 0, 0});
    mask = cap - 1;
    shift = 64 - bits;
  }
  // Symbols are >= 0, so no key equals kEmpty.
  static uint64_t Key(int32_t l, int32_t r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
  }
  size_t Slot(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift);
  }
  void Insert(uint64_t key, int32_t rank, int32_t merged) {
    for (size_t i = Slot(key);; i = (i + 1) & mask) {
      if (slots[i].key == key) return;  // a duplicate merge keeps its first (lowest) rank
      if (slots[i].key == kEmpty) {
        slots[i] = Entry{key, rank, merged};
        return;
      }
    }
  }
  const Entry* Find(uint64_t key) const {
    for (size_t i = Slot(key);; i = (i + 1) & mask) {
      if (slots[i].key == key) return &slots[i];
      if (slots[i].key == kEmpty) return nullptr;
    }
  }

  std::vector<Entry> slots;
  size_t mask = 0;
  int shift = 60;
};

// Per-Encode working memory.
struct BpeTokenizer::Scratch {
  struct Sym {
    int32_t id;  // symbol id (< 0: a character outside every table)
    int32_t prev;
    int32_t next;
    uint32_t start;  // byte range in the word
    uint32_t len;    // 0 once merged into its left neighbour
  };
  ThreadCache* cache = nullptr;
  std::string escaped;
  std::string encoded;
  std::vector<Sym> syms;
  std::vector<MergeCandidate> heap;
};

BpeTokenizer::BpeTokenizer(Vocab vocab)
    : Tokenizer(std::move(vocab)), instance_id_(g_next_instance_id.fetch_add(1)) {}
BpeTokenizer::~BpeTokenizer() = default;

Result<std::unique_ptr<Tokenizer>> BpeTokenizer::Create(Vocab vocab, const gguf::GgufFile& file) {
  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer(std::move(vocab)));
  KVF_RETURN_IF_ERROR(t->Init(file));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

const std::string& BpeTokenizer::SymbolText(int32_t sym) const {
  return sym < n_vocab_ ? vocab_.texts[static_cast<size_t>(sym)]
                        : extra_texts_[static_cast<size_t>(sym - n_vocab_)];
}

// Symbol index slots: hash tag in the high 32 bits, symbol id + 1 in the low 32 (0 = empty).
int32_t BpeTokenizer::FindSymbol(std::string_view text) const {
  const uint64_t h = HashBytes(0, text);
  const auto tag = static_cast<uint32_t>(h >> 32);
  for (size_t i = h & sym_mask_;; i = (i + 1) & sym_mask_) {
    const uint64_t slot = sym_slots_[i];
    if (slot == 0) return -1;
    if (static_cast<uint32_t>(slot >> 32) != tag) continue;
    const auto sym = static_cast<int32_t>(static_cast<uint32_t>(slot) - 1);
    if (SymbolText(sym) == text) return sym;
  }
}

void BpeTokenizer::IndexSymbol(int32_t sym) {
  if ((sym_count_ + 1) * 2 > sym_slots_.size()) {  // keep the load factor <= 1/2
    std::vector<uint64_t> old;
    old.swap(sym_slots_);
    sym_slots_.assign(std::max<size_t>(1024, old.size() * 2), 0);
    sym_mask_ = sym_slots_.size() - 1;
    for (uint64_t slot : old) {
      if (slot == 0) continue;
      size_t i = HashBytes(0, SymbolText(static_cast<int32_t>(static_cast<uint32_t>(slot) - 1))) &
                 sym_mask_;
      while (sym_slots_[i] != 0) i = (i + 1) & sym_mask_;
      sym_slots_[i] = slot;
    }
  }
  const uint64_t h = HashBytes(0, SymbolText(sym));
  size_t i = h & sym_mask_;
  while (sym_slots_[i] != 0) i = (i + 1) & sym_mask_;
  sym_slots_[i] = (h >> 32 << 32) | (static_cast<uint64_t>(sym) + 1);
  ++sym_count_;
}

int32_t BpeTokenizer::SymbolId(std::string_view text, bool create) {
  const int32_t found = FindSymbol(text);
  if (found >= 0 || !create) return found;
  const auto sym = static_cast<int32_t>(n_vocab_ + static_cast<int64_t>(extra_texts_.size()));
  extra_texts_.emplace_back(text);
  IndexSymbol(sym);
  return sym;
}

TokenId BpeTokenizer::FindToken(std::string_view text) const {
  const int32_t sym = FindSymbol(text);
  return sym >= 0 && sym < n_vocab_ ? sym : kNoToken;
}

Status BpeTokenizer::Init(const gguf::GgufFile& file) {
  const bool gemma4_model = vocab_.model == "gemma4";
  KVF_ASSIGN_OR_RETURN(pre_, PreTokenizer::Create(gemma4_model ? "gemma4" : vocab_.pre));
  byte_encode_ = pre_->traits().byte_encode;
  escape_whitespace_ = pre_->traits().escape_whitespace;
  ignore_merges_ = pre_->traits().ignore_merges;
  n_vocab_ = static_cast<int32_t>(vocab_.size());
  // Index every token text (the first of duplicates wins, as in Vocab::to_id).
  sym_slots_.assign(1024, 0);
  sym_mask_ = sym_slots_.size() - 1;
  for (int32_t id = 0; id < n_vocab_; ++id)
    if (FindSymbol(vocab_.texts[static_cast<size_t>(id)]) < 0) IndexSymbol(id);

  if (vocab_.merges.empty())
    return Status::InvalidArgument(file.path() + ": BPE vocabulary without tokenizer.ggml.merges");
  if (vocab_.merges.size() >= (1u << 30))
    return Status::InvalidArgument(file.path() + ": too many BPE merges");

  // Byte-level alphabet first, so its symbols exist even when a vocabulary lacks one of them.
  const std::array<uint32_t, 256> b2c = ByteToCodepoint();
  for (int b = 0; b < 256; ++b) {
    byte_chars_[b].clear();
    AppendUtf8(b2c[b], &byte_chars_[b]);
    byte_sym_[b] = SymbolId(byte_chars_[b], /*create=*/true);
    single_byte_tok_[b] = FindToken(std::string(1, static_cast<char>(b)));
    static const char* kHex = "0123456789ABCDEF";
    const char hex[7] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>', 0};
    hex_byte_tok_[b] = FindToken(hex);
  }

  // Merges ("left right", by rank). Split at the first space after the first byte, as
  // llama.cpp does; lines without one are ignored.
  merges_ = std::make_unique<MergeTable>(vocab_.merges.size());
  std::string joined;
  for (size_t i = 0; i < vocab_.merges.size(); ++i) {
    const std::string& m = vocab_.merges[i];
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos || sp + 1 >= m.size()) continue;
    const std::string_view left(m.data(), sp);
    const std::string_view right(m.data() + sp + 1, m.size() - sp - 1);
    joined.assign(left);
    joined.append(right);
    const int32_t l = SymbolId(left, true), r = SymbolId(right, true);
    const int32_t merged = SymbolId(joined, true);
    merges_->Insert(MergeTable::Key(l, r), static_cast<int32_t>(i), merged);
  }
  if (!byte_encode_) {
    // Symbol of every BMP character (canonical UTF-8), for raw-UTF-8 merging.
    char_sym_.resize(0x10000);
    std::string ch;
    for (uint32_t cp = 0; cp < 0x10000; ++cp) {
      ch.clear();
      AppendUtf8(cp, &ch);
      char_sym_[cp] = SymbolId(ch, false);
    }
  }

  // add_bos: the GGUF key when present, else the family default; Gemma 4 always adds BOS.
  const bool has_add_bos = file.Find("tokenizer.ggml.add_bos_token") != nullptr;
  if (!has_add_bos && pre_->traits().default_add_bos) vocab_.add_bos = true;
  if (pre_->family() == "gemma4" && vocab_.pre != "sarvam-moe") vocab_.add_bos = true;
  if (vocab_.add_bos && vocab_.bos == kNoToken) vocab_.add_bos = false;
  if (vocab_.add_eos && vocab_.eos == kNoToken) vocab_.add_eos = false;

  // TokenToPiece cache.
  std::array<int, 512> cp2byte;
  cp2byte.fill(-1);
  for (int b = 0; b < 256; ++b) cp2byte[b2c[b]] = b;
  pieces_.resize(static_cast<size_t>(n_vocab_));
  for (size_t id = 0; id < pieces_.size(); ++id) {
    const std::string& t = vocab_.texts[id];
    std::string& p = pieces_[id];
    switch (vocab_.types[id]) {
      case TokenType::kNormal:
        if (!byte_encode_) {
          for (size_t k = 0; k < t.size();) {
            if (t.compare(k, kSpace.size(), kSpace) == 0) {
              p.push_back(' ');
              k += kSpace.size();
            } else {
              p.push_back(t[k++]);
            }
          }
          break;
        }
        for (size_t k = 0; k < t.size();) {
          uint32_t cp = 0;
          size_t len = 1;
          const bool ok = DecodeUtf8(t, k, &cp, &len);
          if (ok && cp < cp2byte.size() && cp2byte[cp] >= 0) {
            p.push_back(static_cast<char>(cp2byte[cp]));
          } else {
            p.append(t, k, len);  // not of the byte-level alphabet: keep the text as is
          }
          k += len;
        }
        break;
      case TokenType::kByte: {
        const int b = HexByteToken(t);
        if (b >= 0) {
          p.assign(1, static_cast<char>(b));
        } else {
          p = t;
        }
        break;
      }
      case TokenType::kUserDefined:
      case TokenType::kControl:
      case TokenType::kUnknown:
        p = t;
        break;
      case TokenType::kUnused:
      case TokenType::kUndefined:
        break;
    }
  }

  // Special-token matcher.
  specials_.clear();
  for (TokenId id : vocab_.special_tokens)
    specials_.push_back({id, static_cast<int32_t>(specials_.size())});
  std::string general_name, general_arch;
  if (const gguf::Value* v = file.Find("general.name"); v && v->type == gguf::ValueType::kString)
    general_name = std::string(v->str);
  if (const gguf::Value* v = file.Find("general.architecture");
      v && v->type == gguf::ValueType::kString)
    general_arch = std::string(v->str);
  for (char& c : general_name)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  auto set_strip = [&](std::string_view text, bool lstrip, bool value) {
    for (SpecialEntry& e : specials_) {
      if (vocab_.texts[static_cast<size_t>(e.id)] != text) continue;
      (lstrip ? e.lstrip : e.rstrip) = value;
    }
  };
  auto contains = [](const std::string& s, std::string_view sub) {
    return s.find(sub) != std::string::npos;
  };
  // llama.cpp's per-model attributes (they are not stored in GGUF).
  if (contains(vocab_.pre, "jina-v2-de") || contains(vocab_.pre, "jina-v2-es") ||
      contains(vocab_.pre, "jina-v2-code") || contains(general_arch, "nomic-bert-moe") ||
      contains(general_arch, "jina-bert-v3")) {
    set_strip("<mask>", true, true);
  } else if (contains(general_name, "phi-3") || contains(general_name, "phi3")) {
    for (SpecialEntry& e : specials_) e.rstrip = true;
    set_strip("</s>", false, true);
    for (const char* t : {"<unk>", "<s>", "<|endoftext|>"}) set_strip(t, false, false);
  } else if (contains(general_name, "modern-bert")) {
    set_strip("[MASK]", true, true);
  }
  special_bucket_start_.assign(65537, 0);
  for (const SpecialEntry& e : specials_) {
    const std::string& t = vocab_.texts[static_cast<size_t>(e.id)];
    const auto c0 = static_cast<unsigned char>(t[0]);
    special_first_byte_[c0] = true;
    if (t.size() == 1) {
      special_single_[c0].push_back(e.priority);
    } else {
      ++special_bucket_start_[(c0 << 8 | static_cast<unsigned char>(t[1])) + 1];
    }
  }
  for (size_t k = 1; k < special_bucket_start_.size(); ++k)
    special_bucket_start_[k] += special_bucket_start_[k - 1];
  special_by_prefix_.assign(special_bucket_start_.back(), 0);
  std::vector<uint32_t> fill(special_bucket_start_.begin(), special_bucket_start_.end() - 1);
  for (const SpecialEntry& e : specials_) {
    const std::string& t = vocab_.texts[static_cast<size_t>(e.id)];
    if (t.size() < 2) continue;
    const size_t key = static_cast<unsigned char>(t[0]) << 8 | static_cast<unsigned char>(t[1]);
    special_by_prefix_[fill[key]++] = e.priority;
  }
  return Status::Ok();
}

// llama.cpp retypes tokens by their text at load; the ids it compares against later are the same.
std::vector<TokenId> BpeTokenizer::Encode(std::string_view text, bool add_special,
                                          bool parse_special) const {
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && vocab_.add_bos) out.push_back(vocab_.bos);
  Scratch s;
  for (const Fragment& fr : Partition(text, parse_special)) {
    if (fr.token != kNoToken) {
      out.push_back(fr.token);
    } else {
      EncodeRaw(fr.text, &s, &out);
    }
  }
  if (add_special && vocab_.add_eos) out.push_back(vocab_.eos);
  return out;
}

void BpeTokenizer::EncodeRaw(std::string_view text, Scratch* s, std::vector<TokenId>* out) const {
  std::string_view src = text;
  if (escape_whitespace_) {
    s->escaped.clear();
    for (char c : text) {
      if (c == ' ') {
        s->escaped.append(kSpace);
      } else {
        s->escaped.push_back(c);
      }
    }
    src = s->escaped;
  }
  if (s->cache == nullptr) {
    s->cache = GetThreadCache();
    s->cache->PreparePairs(instance_id_);
  }
  struct Ctx {
    const BpeTokenizer* self;
    Scratch* s;
    std::vector<TokenId>* out;
  } ctx{this, s, out};
  pre_->Split(
      src,
      [](void* c, std::string_view w) {
        auto* x = static_cast<Ctx*>(c);
        x->self->EncodeCachedWord(w, x->s, x->out);
      },
      &ctx);
}

void BpeTokenizer::EncodeCachedWord(std::string_view w, Scratch* s,
                                    std::vector<TokenId>* out) const {
  if (w.size() > kMaxCachedWordBytes) {
    EncodeWord(w, s, out);
    return;
  }
  CachedWord* set = s->cache->WordSet(instance_id_, w);
  for (int k = 0; k < 2; ++k) {
    if (ThreadCache::Matches(set[k], instance_id_, w)) {
      out->insert(out->end(), set[k].ids, set[k].ids + set[k].n_ids);
      if (k == 1) std::swap(set[0], set[1]);  // most recently used first
      return;
    }
  }
  const size_t before = out->size();
  EncodeWord(w, s, out);
  const size_t n = out->size() - before;
  if (n > kMaxCachedWordIds) return;
  set[1] = set[0];  // the older entry of the set is dropped
  CachedWord& e = set[0];
  e.owner = instance_id_;
  e.len = static_cast<uint8_t>(w.size());
  e.n_ids = static_cast<uint8_t>(n);
  std::memcpy(e.key, w.data(), w.size());
  std::copy(out->begin() + static_cast<std::ptrdiff_t>(before), out->end(), e.ids);
}

std::vector<std::string> BpeTokenizer::PreTokenize(std::string_view text) const {
  std::string escaped;
  std::string_view src = text;
  if (escape_whitespace_) {
    for (char c : text) {
      if (c == ' ') {
        escaped.append(kSpace);
      } else {
        escaped.push_back(c);
      }
    }
    src = escaped;
  }
  std::vector<std::string_view> words;
  pre_->Split(src, &words);
  return std::vector<std::string>(words.begin(), words.end());
}

void BpeTokenizer::EncodeWord(std::string_view word, Scratch* s, std::vector<TokenId>* out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    std::string& enc = s->encoded;
    if (byte_encode_) {
      enc.clear();
      for (char c : word) enc += byte_chars_[static_cast<unsigned char>(c)];
    } else {
      enc.assign(word);
    }
    const TokenId id = FindToken(enc);
    if (id != kNoToken) {
      out->push_back(id);
      return;
    }
  }
  if (!byte_encode_ && word.find_first_not_of('\n') == std::string_view::npos) {
    // Runs of newlines that are tokens are taken whole (llama.cpp's Gemma 4 rule).
    const TokenId id = FindToken(word);
    if (id != kNoToken) {
      out->push_back(id);
      return;
    }
  }

  auto& syms = s->syms;
  syms.clear();
  const auto n = static_cast<uint32_t>(word.size());
  if (byte_encode_) {
    for (uint32_t i = 0; i < n; ++i)
      syms.push_back({byte_sym_[static_cast<unsigned char>(word[i])], static_cast<int32_t>(i) - 1,
                      static_cast<int32_t>(i) + 1, i, 1});
  } else {
    for (uint32_t i = 0; i < n;) {
      const auto c = static_cast<unsigned char>(word[i]);
      const auto len = static_cast<uint32_t>(std::min<size_t>(Utf8Len(c), n - i));
      int32_t id = -1;
      const auto cont = [&](uint32_t k) {
        return (static_cast<unsigned char>(word[i + k]) & 0xC0) == 0x80;
      };
      if (c < 0x80) {
        id = char_sym_[c];
      } else if (len == 2 && Utf8Len(c) == 2 && c >= 0xC2 && cont(1)) {
        id = char_sym_[(c & 0x1Fu) << 6 | (static_cast<unsigned char>(word[i + 1]) & 0x3Fu)];
      } else if (len == 3 && Utf8Len(c) == 3 && cont(1) && cont(2) &&
                 (c != 0xE0 || static_cast<unsigned char>(word[i + 1]) >= 0xA0)) {
        id = char_sym_[(c & 0x0Fu) << 12 | (static_cast<unsigned char>(word[i + 1]) & 0x3Fu) << 6 |
                       (static_cast<unsigned char>(word[i + 2]) & 0x3Fu)];
      } else {
        const std::string_view ch = word.substr(i, len);
        id = FindSymbol(ch);
      }
      const auto idx = static_cast<int32_t>(syms.size());
      syms.push_back({id, idx - 1, idx + 1, i, len});
      i += len;
    }
  }
  syms.back().next = -1;

  if (syms.size() > 1) {
    auto& heap = s->heap;
    heap.clear();
    const auto try_pair = [&](int32_t l, int32_t r, bool heapify) {
      if (l < 0 || r < 0) return;
      const int32_t li = syms[static_cast<size_t>(l)].id, ri = syms[static_cast<size_t>(r)].id;
      if (li < 0 || ri < 0) return;
      const uint64_t key = MergeTable::Key(li, ri);
      PairSlot& slot = s->cache->Pair(key);
      if (slot.key != key) {
        const MergeTable::Entry* e = merges_->Find(key);
        slot = PairSlot{key, e != nullptr ? e->rank : -1, e != nullptr ? e->merged : 0};
      }
      if (slot.rank < 0) return;
      heap.push_back({slot.rank, l, r, li, ri, slot.merged});
      if (heapify) HeapPushBack(&heap);
    };
    for (size_t i = 0; i + 1 < syms.size(); ++i)
      try_pair(static_cast<int32_t>(i), static_cast<int32_t>(i + 1), false);
    HeapMake(&heap);
    while (!heap.empty()) {
      const MergeCandidate p = HeapPop(&heap);
      Scratch::Sym& l = syms[static_cast<size_t>(p.left)];
      Scratch::Sym& r = syms[static_cast<size_t>(p.right)];
      // Stale: one side was merged since the pair was queued.
      if (l.len == 0 || r.len == 0 || l.next != p.right || l.id != p.left_id || r.id != p.right_id)
        continue;
      l.id = p.merged;
      l.len += r.len;
      r.len = 0;
      l.next = r.next;
      if (r.next >= 0) syms[static_cast<size_t>(r.next)].prev = p.left;
      try_pair(l.prev, p.left, true);
      try_pair(p.left, l.next, true);
    }
  }
  for (int32_t i = 0; i != -1; i = syms[static_cast<size_t>(i)].next) {
    const Scratch::Sym& sym = syms[static_cast<size_t>(i)];
    EmitSymbol(word, sym.id, sym.start, sym.len, out);
  }
}

void BpeTokenizer::EmitSymbol(std::string_view word, int32_t sym, uint32_t start, uint32_t len,
                              std::vector<TokenId>* out) const {
  if (sym >= 0 && sym < n_vocab_) {
    out->push_back(sym);
    return;
  }
  // Not a token: llama.cpp emits the single-byte tokens of the symbol's text (byte-level) or the
  // <0xXX> tokens of its bytes (raw UTF-8), dropping bytes that have none.
  for (uint32_t k = start; k < start + len; ++k) {
    const auto b = static_cast<unsigned char>(word[k]);
    if (!byte_encode_) {
      if (hex_byte_tok_[b] != kNoToken) out->push_back(hex_byte_tok_[b]);
      continue;
    }
    for (char c : byte_chars_[b]) {
      const TokenId t = single_byte_tok_[static_cast<unsigned char>(c)];
      if (t != kNoToken) out->push_back(t);
    }
  }
}

std::string BpeTokenizer::TokenToPiece(TokenId id, bool render_special) const {
  if (id < 0 || id >= vocab_.size()) return "";
  const TokenType t = vocab_.types[static_cast<size_t>(id)];
  if (!render_special && (t == TokenType::kControl || t == TokenType::kUnknown)) return "";
  return pieces_[static_cast<size_t>(id)];
}

}  // namespace kvforge::tokenizer
