// BPE tokenizers (byte-level "gpt2" families, Gemma 4) and every other GGUF vocabulary in
// shared/tokenizer-tests: exact ids against llama.cpp's vocab vectors (which come from each
// model's own Hugging Face tokenizer), round trips, streaming detokenization, special tokens,
// adversarial and fuzzed inputs, and the pre-tokenizer families.
//
// Skipped: ggml-vocab-bert-bge (vectors) and ggml-vocab-nomic-bert-moe are WordPiece (model
// "bert") and Unigram (model "t5") vocabularies; kvforge only runs decoder LLMs, which use
// SentencePiece or BPE, so those embedding-model tokenizers are not implemented (FromGguf returns
// Unimplemented, checked below).
#include "tokenizer/bpe_tokenizer.h"

#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "support/test_paths.h"
#include "tokenizer/bpe_pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace kvforge::tokenizer {
namespace {

using kvforge::testing::SharedDir;

// Vocabularies with llama.cpp test vectors (.inp/.out) that kvforge implements.
const std::vector<std::string> kVectorVocabs = {
    "command-r", "deepseek-coder", "deepseek-llm", "falcon",   "gemma-4",
    "gpt-2",     "llama-bpe",      "llama-spm",    "mpt",      "phi-3",
    "qwen2",     "qwen35",         "refact",       "starcoder"};
// Vector files kvforge deliberately does not run (see the header comment).
const std::vector<std::string> kSkippedVectorVocabs = {"bert-bge"};
// Every vocabulary kvforge loads (the vector ones plus those without vectors).
std::vector<std::string> AllVocabs() {
  std::vector<std::string> v = kVectorVocabs;
  for (const char* n : {"aquila", "baichuan", "gpt-neox"}) v.emplace_back(n);
  return v;
}

std::string VocabPath(const std::string& name) {
  return SharedDir() + "/tokenizer-tests/ggml-vocab-" + name + ".gguf";
}

// Building a tokenizer is the expensive part (Gemma 4: 262k tokens, 515k merges): one each.
const Tokenizer* Get(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(path);
  if (it != cache.end()) return it->second.get();
  std::unique_ptr<Tokenizer> tok;
  auto f = gguf::GgufFile::Open(path);
  if (!f.ok()) {
    ADD_FAILURE() << f.error().ToString();
  } else {
    auto t = Tokenizer::FromGguf(**f);
    if (t.ok()) {
      tok = std::move(*t);
    } else {
      ADD_FAILURE() << t.error().ToString();
    }
  }
  return cache.emplace(path, std::move(tok)).first->second.get();
}
const Tokenizer* GetVocab(const std::string& name) { return Get(VocabPath(name)); }

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

struct Case {
  std::string input;
  std::vector<TokenId> expected;
};

// NAME.gguf.inp: inputs each followed by "\n__ggml_vocab_test__\n" (gemma-4's last input has no
// separator, so a non-empty tail counts as one more input); .out: one line of ids per input.
std::vector<Case> LoadCases(const std::string& gguf_path) {
  std::string inp, out;
  if (!ReadFile(gguf_path + ".inp", &inp) || !ReadFile(gguf_path + ".out", &out)) return {};
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  size_t pos = 0, at;
  while ((at = inp.find(sep, pos)) != std::string::npos) {
    inputs.push_back(inp.substr(pos, at - pos));
    pos = at + sep.size();
  }
  if (pos < inp.size()) inputs.push_back(inp.substr(pos));
  std::vector<Case> cases;
  std::istringstream lines(out);
  std::string line;
  for (const std::string& in : inputs) {
    if (!std::getline(lines, line)) break;
    Case c;
    c.input = in;
    std::istringstream ids(line);
    long long id;
    while (ids >> id) c.expected.push_back(static_cast<TokenId>(id));
    cases.push_back(std::move(c));
  }
  return cases;
}

bool IsSpm(const Tokenizer& t) { return t.vocab().model == "llama"; }

// Text Decode() gives for `input` (SentencePiece vocabularies add a leading space).
std::string Expected(const Tokenizer& t, const std::string& input) {
  return IsSpm(t) && t.vocab().add_space_prefix && !input.empty() ? " " + input : input;
}

bool ValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

void AppendUtf8(char32_t cp, std::string* s) {
  if (cp < 0x80) {
    s->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    s->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    s->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Random valid UTF-8 over many scripts, whitespace kinds, digits, marks and emoji.
std::string RandomUnicode(std::mt19937* rng, int max_cps) {
  static const char32_t kRanges[][2] = {
      {0x20, 0x7E},     {0x20, 0x7E},      {0x30, 0x39},       {0x09, 0x0D},       {0xA0, 0x24F},
      {0x300, 0x36F},   {0x370, 0x3FF},    {0x400, 0x4FF},     {0x600, 0x6FF},     {0x900, 0x97F},
      {0x1780, 0x17FF}, {0x2000, 0x206F},  {0x3000, 0x303F},   {0x3040, 0x30FF},   {0x4E00, 0x9FFF},
      {0xAC00, 0xD7A3}, {0xFF01, 0xFF5E},  {0x1F300, 0x1F64F}, {0x1F900, 0x1F9FF}, {0x2581, 0x2581},
      {0x200D, 0x200D}, {0x10000, 0x1007F}};
  constexpr int kN = sizeof(kRanges) / sizeof(kRanges[0]);
  std::string s;
  const int n = static_cast<int>((*rng)() % static_cast<unsigned>(max_cps + 1));
  for (int i = 0; i < n; ++i) {
    const auto& r = kRanges[(*rng)() % kN];
    AppendUtf8(r[0] + (*rng)() % (r[1] - r[0] + 1), &s);
  }
  return s;
}

// True when all 256 GPT-2 byte symbols are normal tokens, so any bytes round-trip exactly.
bool ByteExact(const Tokenizer& t) {
  const std::string& m = t.vocab().model;
  if (m == "gemma4") {
    for (int b = 0; b < 256; ++b)
      if (t.vocab().byte_tokens[b] == kNoToken) return false;
    return true;
  }
  if (m != "gpt2") return false;
  uint32_t n = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    std::string ch;
    AppendUtf8(keep ? b : 256 + n++, &ch);
    const TokenId id = t.vocab().Find(ch);
    if (id == kNoToken || t.vocab().types[static_cast<size_t>(id)] != TokenType::kNormal)
      return false;
  }
  return true;
}

// gtest parameter names may not contain '-'.
std::string ParamName(const ::testing::TestParamInfo<std::string>& p) {
  std::string n = p.param;
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
}

// True when Decode(Encode(text)) must give `text` back (modulo SentencePiece's leading space):
// every byte has a token, and no literal U+2581 is read back as a space.
bool MustRoundTrip(const Tokenizer& t, std::string_view text) {
  const bool escapes = t.vocab().model != "gpt2";
  if (escapes && text.find("\xE2\x96\x81") != std::string_view::npos) return false;
  return IsSpm(t) || ByteExact(t);
}

bool IdsInRange(const Tokenizer& t, const std::vector<TokenId>& ids) {
  for (TokenId id : ids)
    if (id < 0 || id >= t.n_vocab()) return false;
  return true;
}

// ---------------------------------------------------------------------------------------------
// Test vectors.
// ---------------------------------------------------------------------------------------------

TEST(BpeVectorsCoverage, EveryVectorFileIsTestedOrSkippedWithReason) {
  DIR* d = opendir((SharedDir() + "/tokenizer-tests").c_str());
  ASSERT_NE(d, nullptr);
  std::vector<std::string> found;
  while (dirent* e = readdir(d)) {
    const std::string f = e->d_name;
    const std::string pre = "ggml-vocab-", post = ".gguf.inp";
    if (f.size() > pre.size() + post.size() && f.compare(0, pre.size(), pre) == 0 &&
        f.compare(f.size() - post.size(), post.size(), post) == 0)
      found.push_back(f.substr(pre.size(), f.size() - pre.size() - post.size()));
  }
  closedir(d);
  EXPECT_GE(found.size(), 15u);
  for (const std::string& v : found) {
    const bool tested = std::count(kVectorVocabs.begin(), kVectorVocabs.end(), v) > 0;
    const bool skipped =
        std::count(kSkippedVectorVocabs.begin(), kSkippedVectorVocabs.end(), v) > 0;
    EXPECT_TRUE(tested || skipped) << v << " has test vectors but is neither tested nor skipped";
  }
}

class VocabVectorsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabVectorsTest, MatchesModelTokenizerExactly) {
  const Tokenizer* tok = GetVocab(GetParam());
  ASSERT_NE(tok, nullptr);
  const auto cases = LoadCases(VocabPath(GetParam()));
  ASSERT_GE(cases.size(), 46u);
  int passed = 0;
  for (const Case& c : cases) {
    const auto ids = tok->Encode(c.input, /*add_special=*/false, /*parse_special=*/false);
    if (ids == c.expected) ++passed;
    EXPECT_EQ(ids, c.expected) << GetParam() << " input: '" << c.input << "'";
    EXPECT_EQ(tok->Decode(ids), Expected(*tok, c.input)) << GetParam();
  }
  EXPECT_EQ(passed, static_cast<int>(cases.size()));
  std::printf("[ vectors  ] %-15s %d/%zu exact\n", GetParam().c_str(), passed, cases.size());
}

INSTANTIATE_TEST_SUITE_P(Vocabs, VocabVectorsTest, ::testing::ValuesIn(kVectorVocabs), ParamName);

// ---------------------------------------------------------------------------------------------
// Properties over every loadable vocabulary.
// ---------------------------------------------------------------------------------------------

class AllVocabsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(AllVocabsTest, LoadsAndRoundTrips) {
  const Tokenizer* tok = GetVocab(GetParam());
  ASSERT_NE(tok, nullptr);
  for (const std::string text :
       {"Hello world", "  leading and trailing  ", "中文 English 日本語 한국어",
        "x = [1, 22, 333];\n", "\xC3\xA9t\xC3\xA9 \xF0\x9F\xA6\x99\t\r\n",
        "I've got 12345 things' 'RE"}) {
    const auto ids = tok->Encode(text, false, false);
    EXPECT_FALSE(ids.empty());
    EXPECT_TRUE(IdsInRange(*tok, ids));
    EXPECT_EQ(tok->Decode(ids), Expected(*tok, text)) << GetParam();
  }
  EXPECT_TRUE(tok->Encode("", false, false).empty());
  std::printf("[ vocab    ] %-15s model=%s pre=%s any-bytes-round-trip=%d\n", GetParam().c_str(),
              tok->vocab().model.c_str(), tok->vocab().pre.c_str(), ByteExact(*tok) ? 1 : 0);
}

TEST_P(AllVocabsTest, StreamingNeverSplitsACharacter) {
  const Tokenizer* tok = GetVocab(GetParam());
  ASSERT_NE(tok, nullptr);
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 150; ++iter) {
    const std::string text = RandomUnicode(&rng, 48);
    const auto ids = tok->Encode(text, false, false);
    ASSERT_TRUE(IdsInRange(*tok, ids));
    StreamDecoder d(*tok);
    std::string streamed;
    for (TokenId id : ids) {
      const std::string piece = d.Push(id);
      EXPECT_TRUE(ValidUtf8(piece)) << GetParam() << ": split character in streamed piece";
      streamed += piece;
    }
    streamed += d.Finish();
    EXPECT_EQ(streamed, tok->Decode(ids)) << GetParam();
    if (MustRoundTrip(*tok, text)) {
      EXPECT_EQ(streamed, Expected(*tok, text)) << GetParam();
    }
  }
}

// Long runs of one unit encode and round-trip. How encode time grows with the run's length
// (linear, not quadratic) is measured by bench/tokenizer_bench (BM_EncodeRun, Big-O fit), not
// here: a test asserts no wall-clock figure.
TEST_P(AllVocabsTest, LongRunsEncodeAndRoundTrip) {
  const Tokenizer* tok = GetVocab(GetParam());
  ASSERT_NE(tok, nullptr);
  // 100k bytes in optimized builds; unoptimized (and sanitizer) builds use less to stay quick.
#ifdef NDEBUG
  constexpr size_t kBig = 100000;
#else
  constexpr size_t kBig = 24000;
#endif
  for (const std::string unit :
       {" ", "a", "1", "\n", "!", "\xC3\xA9", "\xE6\x97\xA5", " a", "\t "}) {
    std::string small, big;
    while (small.size() < kBig / 4) small += unit;
    while (big.size() < kBig) big += unit;
    EXPECT_FALSE(tok->Encode(small, false, false).empty()) << GetParam() << " '" << unit << "'";
    if (!IsSpm(*tok)) {
      EXPECT_EQ(tok->Decode(tok->Encode(big, false, false)), big);
    }
  }
}

TEST_P(AllVocabsTest, InvalidUtf8AndEveryByteValue) {
  const Tokenizer* tok = GetVocab(GetParam());
  ASSERT_NE(tok, nullptr);
  const bool exact = ByteExact(*tok);
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  for (const std::string& text : {all, std::string("\xFF\xFE\xC3(\xE2\x82", 6),
                                  std::string("a\x80"
                                              "b\xC0\xAF"
                                              "c",
                                              7),
                                  std::string("\xED\xA0\x80\xF4\x90\x80\x80 \xF0\x9F", 10),
                                  std::string(1, '\0'), std::string("x\0y", 3)}) {
    for (bool parse_special : {false, true}) {
      const auto ids = tok->Encode(text, false, parse_special);
      EXPECT_TRUE(IdsInRange(*tok, ids));
      if (exact) {
        EXPECT_EQ(tok->Decode(ids, true), text) << GetParam();
      }
    }
  }
  // Each single byte alone.
  for (int b = 0; b < 256; ++b) {
    const std::string one(1, static_cast<char>(b));
    const auto ids = tok->Encode(one, false, false);
    EXPECT_TRUE(IdsInRange(*tok, ids));
    if (exact) {
      EXPECT_EQ(tok->Decode(ids), one) << GetParam() << " byte " << b;
    }
  }
}

TEST_P(AllVocabsTest, FuzzRandomBytesNeverCrash) {
  const Tokenizer* tok = GetVocab(GetParam());
  ASSERT_NE(tok, nullptr);
  const bool exact = ByteExact(*tok);
  // Special-token texts mixed in make the partition paths run too.
  std::vector<std::string> specials;
  for (size_t i = 0; i < tok->vocab().special_tokens.size() && i < 64; ++i)
    specials.push_back(tok->vocab().texts[static_cast<size_t>(tok->vocab().special_tokens[i])]);
  std::mt19937 rng(std::hash<std::string>{}(GetParam()));
  for (int iter = 0; iter < 1500; ++iter) {
    std::string text;
    const int n = static_cast<int>(rng() % 80);
    for (int i = 0; i < n; ++i) {
      const unsigned r = rng() % 16;
      if (r == 0 && !specials.empty()) {
        text += specials[rng() % specials.size()];
      } else if (r < 4) {
        text.push_back(" \n\t'"[rng() % 4]);
      } else if (r < 8) {
        text.push_back(static_cast<char>('a' + rng() % 26));
      } else {
        text.push_back(static_cast<char>(rng() % 256));
      }
    }
    const bool parse_special = (iter & 1) != 0;
    const auto ids = tok->Encode(text, (iter & 2) != 0, parse_special);
    ASSERT_TRUE(IdsInRange(*tok, ids)) << GetParam();
    const std::string dec = tok->Decode(ids, /*render_special=*/true);
    if (exact && (iter & 2) == 0 && MustRoundTrip(*tok, text)) {
      EXPECT_EQ(dec, text) << GetParam();
    }
    StreamDecoder d(*tok, true);
    std::string streamed;
    for (TokenId id : ids) streamed += d.Push(id);
    streamed += d.Finish();
    EXPECT_EQ(streamed, dec);
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, AllVocabsTest, ::testing::ValuesIn(AllVocabs()), ParamName);

// ---------------------------------------------------------------------------------------------
// Special tokens and metadata.
// ---------------------------------------------------------------------------------------------

// llama.cpp's partition, written out the slow way: for each special token (longest first), split
// every remaining text fragment at each of its occurrences.
std::vector<TokenId> ReferenceEncode(const Tokenizer& tok, const std::string& text,
                                     bool parse_special) {
  struct Frag {
    TokenId token;
    std::string text;
  };
  std::vector<Frag> frags;
  if (!text.empty()) frags.push_back({kNoToken, text});
  const Vocab& v = tok.vocab();
  for (TokenId id : v.special_tokens) {
    const TokenType type = v.types[static_cast<size_t>(id)];
    if (!parse_special && (type == TokenType::kControl || type == TokenType::kUnknown)) continue;
    const std::string& st = v.texts[static_cast<size_t>(id)];
    if (text.find(st) == std::string::npos) continue;  // then no fragment holds it either
    std::vector<Frag> next;
    for (const Frag& f : frags) {
      if (f.token != kNoToken) {
        next.push_back(f);
        continue;
      }
      size_t start = 0, p;
      while ((p = f.text.find(st, start)) != std::string::npos) {
        if (p > start) next.push_back({kNoToken, f.text.substr(start, p - start)});
        next.push_back({id, ""});
        start = p + st.size();
      }
      if (start < f.text.size()) next.push_back({kNoToken, f.text.substr(start)});
    }
    frags.swap(next);
  }
  std::vector<TokenId> out;
  for (const Frag& f : frags) {
    if (f.token != kNoToken) {
      out.push_back(f.token);
    } else {
      const auto ids = tok.Encode(f.text, false, parse_special);  // no specials left inside
      out.insert(out.end(), ids.begin(), ids.end());
    }
  }
  return out;
}

TEST(BpeSpecialTokensTest, PartitionMatchesReferenceAlgorithm) {
  for (const char* name : {"mpt", "qwen2", "command-r", "deepseek-llm", "starcoder", "gemma-4"}) {
    const Tokenizer* tok = GetVocab(name);
    ASSERT_NE(tok, nullptr);
    std::vector<std::string> pieces = {" ", "  ", "   ", "a", "<", ">", "|", "\n", "x y"};
    const auto& sp = tok->vocab().special_tokens;
    for (size_t i = 0; i < sp.size(); i += std::max<size_t>(1, sp.size() / 40))
      pieces.push_back(tok->vocab().texts[static_cast<size_t>(sp[i])]);
    std::mt19937 rng(99);
    for (int iter = 0; iter < 300; ++iter) {
      std::string text;
      const int n = static_cast<int>(rng() % 12);
      for (int i = 0; i < n; ++i) {
        const std::string& p = pieces[rng() % pieces.size()];
        // Sometimes only part of a special token, to exercise near misses.
        text += (rng() % 4 == 0 && p.size() > 2) ? p.substr(0, p.size() - 1) : p;
      }
      for (bool parse : {false, true})
        ASSERT_EQ(tok->Encode(text, false, parse), ReferenceEncode(*tok, text, parse))
            << name << " text '" << text << "' parse_special=" << parse;
    }
  }
}

TEST(BpeSpecialTokensTest, ControlTokensOnlyWithParseSpecial) {
  const Tokenizer* tok = GetVocab("qwen2");
  ASSERT_NE(tok, nullptr);
  const TokenId im_start = tok->vocab().Find("<|im_start|>");
  const TokenId im_end = tok->vocab().Find("<|im_end|>");
  ASSERT_NE(im_start, kNoToken);
  const std::string chat = "<|im_start|>user\nhi<|im_end|>";
  const auto parsed = tok->Encode(chat, false, true);
  ASSERT_GE(parsed.size(), 3u);
  EXPECT_EQ(parsed.front(), im_start);
  EXPECT_EQ(parsed.back(), im_end);
  const auto plain = tok->Encode(chat, false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), im_start), 0);
  EXPECT_EQ(tok->Decode(plain), chat);
  // Control tokens render only when asked.
  EXPECT_EQ(tok->TokenToPiece(im_start), "");
  EXPECT_EQ(tok->TokenToPiece(im_start, true), "<|im_start|>");
  EXPECT_EQ(tok->Decode(parsed, true), chat);
}

TEST(BpeSpecialTokensTest, UserDefinedTokensAlwaysMatched) {
  // MPT / GPT-NeoX mark runs of spaces as user-defined tokens: matched even without
  // parse_special (Hugging Face added tokens), longest first.
  const Tokenizer* tok = GetVocab("mpt");
  ASSERT_NE(tok, nullptr);
  const std::string spaces(24, ' ');
  const TokenId run24 = tok->vocab().Find(spaces);
  ASSERT_NE(run24, kNoToken);
  EXPECT_EQ(tok->vocab().types[static_cast<size_t>(run24)], TokenType::kUserDefined);
  const auto ids = tok->Encode("a" + spaces + "b", false, false);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), run24), 1);
  EXPECT_EQ(tok->Decode(ids), "a" + spaces + "b");
}

TEST(BpeSpecialTokensTest, AddSpecialFollowsMetadataAndFamilyDefaults) {
  // Llama 3 has no add_bos_token key; its family adds BOS.
  const Tokenizer* llama3 = GetVocab("llama-bpe");
  ASSERT_NE(llama3, nullptr);
  EXPECT_EQ(llama3->Encode("", true, false), (std::vector<TokenId>{128000}));
  EXPECT_EQ(llama3->Encode("Hi", true, false).front(), 128000);
  // Qwen2 adds nothing.
  const Tokenizer* qwen = GetVocab("qwen2");
  ASSERT_NE(qwen, nullptr);
  EXPECT_TRUE(qwen->Encode("", true, false).empty());
  // DeepSeek: add_bos_token = true in the file.
  const Tokenizer* ds = GetVocab("deepseek-llm");
  ASSERT_NE(ds, nullptr);
  EXPECT_EQ(ds->Encode("", true, false), (std::vector<TokenId>{100000}));
  // Gemma 4 always adds <bos>.
  const Tokenizer* gemma = GetVocab("gemma-4");
  ASSERT_NE(gemma, nullptr);
  EXPECT_EQ(gemma->Encode("", true, false), (std::vector<TokenId>{gemma->bos()}));
  EXPECT_EQ(gemma->TokenToPiece(gemma->bos()), "");
  EXPECT_EQ(gemma->TokenToPiece(gemma->bos(), true), "<bos>");
}

TEST(BpeSpecialTokensTest, ControlLookingTokensAreRetyped) {
  // Gemma 4 stores <|tool_response> as user-defined; llama.cpp treats it as an end-of-generation
  // control token, so it is only parsed with parse_special.
  const Tokenizer* gemma = GetVocab("gemma-4");
  ASSERT_NE(gemma, nullptr);
  const TokenId tr = gemma->vocab().Find("<|tool_response>");
  ASSERT_NE(tr, kNoToken);
  EXPECT_EQ(gemma->vocab().types[static_cast<size_t>(tr)], TokenType::kControl);
  const auto plain = gemma->Encode("<|tool_response>", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), tr), 0);
  EXPECT_EQ(gemma->Encode("<|tool_response>", false, true), (std::vector<TokenId>{tr}));
}

TEST(BpeTokenizerTest, TinyRandomQwen2PromptsMatchLlamaCpp) {
  const Tokenizer* tok = Get(SharedDir() + "/models/tiny-random-qwen2.gguf");
  ASSERT_NE(tok, nullptr);
  std::string json;
  ASSERT_TRUE(ReadFile(SharedDir() + "/reference/tiny-random-qwen2-greedy.json", &json));
  const auto ref = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(ref.is_discarded());
  ASSERT_GE(ref["cases"].size(), 1u);
  for (const auto& c : ref["cases"]) {
    const std::string prompt = c["prompt"].get<std::string>();
    const auto want = c["prompt_ids"].get<std::vector<TokenId>>();
    EXPECT_EQ(tok->Encode(prompt, /*add_special=*/true, /*parse_special=*/true), want) << prompt;
  }
}

TEST(BpeTokenizerTest, ConcurrentEncodesAcrossTokenizersAgree) {
  // Per-thread caches are shared by all tokenizers on a thread: alternate tokenizers on several
  // threads and compare with results computed before any cache was warm for them.
  std::vector<const Tokenizer*> toks;
  for (const char* name : {"gpt-2", "mpt", "qwen2", "gemma-4"}) {
    toks.push_back(GetVocab(name));
    ASSERT_NE(toks.back(), nullptr);
  }
  std::mt19937 rng(3);
  std::vector<std::string> texts;
  for (int i = 0; i < 40; ++i) texts.push_back(RandomUnicode(&rng, 30) + " the cat sat on the mat");
  std::vector<std::vector<std::vector<TokenId>>> want(toks.size());
  for (size_t t = 0; t < toks.size(); ++t)
    for (const std::string& x : texts) want[t].push_back(toks[t]->Encode(x, false, false));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&, th] {
      for (int rep = 0; rep < 5; ++rep)
        for (size_t i = 0; i < texts.size(); ++i)
          for (size_t t = 0; t < toks.size(); ++t) {
            const size_t tt = (t + static_cast<size_t>(th)) % toks.size();
            if (toks[tt]->Encode(texts[i], false, false) != want[tt][i]) ++mismatches;
          }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(BpeTokenizerTest, WordPieceAndUnigramVocabsAreRejectedCleanly) {
  for (const char* name : {"bert-bge", "nomic-bert-moe"}) {
    auto f = gguf::GgufFile::Open(VocabPath(name));
    ASSERT_TRUE(f.ok()) << f.error().ToString();
    auto t = Tokenizer::FromGguf(**f);
    ASSERT_FALSE(t.ok()) << name;
    EXPECT_EQ(t.error().code(), StatusCode::kUnimplemented);
  }
}

TEST(BpeTokenizerTest, SentencePieceVariantsBaichuanAndGemma) {
  // Baichuan is a SentencePiece ("llama") vocabulary with byte fallback: no vectors upstream, so
  // check that it loads, round-trips and uses byte tokens only for what it lacks.
  const Tokenizer* bc = GetVocab("baichuan");
  ASSERT_NE(bc, nullptr);
  EXPECT_EQ(bc->vocab().model, "llama");
  const std::string text = "百川大模型 Baichuan 2 \xF0\x9F\xA6\x99!";
  const auto ids = bc->Encode(text, false, false);
  EXPECT_EQ(bc->Decode(ids), " " + text);
  EXPECT_LT(ids.size(), text.size());
  // Gemma 4 is tokenizer.ggml.model = "gemma4": BPE over raw UTF-8 with U+2581 for spaces.
  const Tokenizer* gemma = GetVocab("gemma-4");
  ASSERT_NE(gemma, nullptr);
  EXPECT_EQ(gemma->vocab().model, "gemma4");
  EXPECT_EQ(gemma->Decode(gemma->Encode(" two  spaces\n\n", false, false)), " two  spaces\n\n");
  auto* bpe = dynamic_cast<const BpeTokenizer*>(gemma);
  ASSERT_NE(bpe, nullptr);
  EXPECT_EQ(bpe->pre_family(), "gemma4");
  EXPECT_EQ(bpe->PreTokenize(" a b\nc"), (std::vector<std::string>{"\xE2\x96\x81"
                                                                   "a\xE2\x96\x81"
                                                                   "b",
                                                                   "\n", "c"}));
}

// ---------------------------------------------------------------------------------------------
// Small synthetic vocabularies, for paths the real ones do not reach.
// ---------------------------------------------------------------------------------------------

struct SyntheticVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
  std::string model = "gpt2";
  std::string pre = "gpt-2";
  std::string name;
  void Add(const std::string& t, TokenType type = TokenType::kNormal) {
    tokens.push_back(t);
    types.push_back(static_cast<int32_t>(type));
  }
  int Id(const std::string& t) const {
    return static_cast<int>(std::find(tokens.begin(), tokens.end(), t) - tokens.begin());
  }
  Result<std::unique_ptr<Tokenizer>> Build() const {
    gguf::GgufWriter w;
    w.SetString("general.architecture", "llama");
    if (!name.empty()) w.SetString("general.name", name);
    w.SetString("tokenizer.ggml.model", model);
    if (!pre.empty()) w.SetString("tokenizer.ggml.pre", pre);
    w.SetStringArray("tokenizer.ggml.tokens", tokens);
    w.SetI32Array("tokenizer.ggml.token_type", types);
    if (!merges.empty()) w.SetStringArray("tokenizer.ggml.merges", merges);
    if (model == "gemma4") {
      w.SetU32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(Id("<bos>")));
      w.SetU32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(Id("<eos>")));
    }
    const std::vector<uint8_t> bytes = w.Serialize();
    KVF_ASSIGN_OR_RETURN(auto f,
                         gguf::GgufFile::FromMemory(bytes.data(), bytes.size(), "synthetic"));
    return Tokenizer::FromGguf(*f);  // the tokenizer copies what it needs
  }
};

// GPT-2 byte alphabet (ids 0..255 in byte order) plus a few merges.
SyntheticVocab ByteLevelVocab() {
  SyntheticVocab v;
  uint32_t extra = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    std::string ch;
    AppendUtf8(keep ? b : 256 + extra++, &ch);
    v.Add(ch);
  }
  for (const char* t : {"he", "ll", "hell", "hello", "\xC4\xA0w", "or", "\xC4\xA0wor", "ld",
                        "\xC4\xA0world", "xyz"})
    v.Add(t);
  v.Add("<|end|>", TokenType::kControl);
  v.Add("<mask>", TokenType::kUserDefined);
  v.Add("<unused0>", TokenType::kUnused);
  v.Add("<undef>", TokenType::kUndefined);
  v.merges = {"h e",          "l l", "he ll",          "hell o", "\xC4\xA0 w", "o r",
              "\xC4\xA0w or", "l d", "\xC4\xA0wor ld", "h e",  // duplicate: keeps rank 0
              "x y",                                           // "xy" is not a token...
              "xy z",                                          // ...but takes part in making "xyz"
              "nospace"};
  return v;
}

TEST(BpeSyntheticTest, MergesByRankWithNonTokenIntermediates) {
  const SyntheticVocab v = ByteLevelVocab();
  auto tok = v.Build();
  ASSERT_TRUE(tok.ok()) << tok.error().ToString();
  const Tokenizer& t = **tok;
  EXPECT_EQ(t.Encode("hello world", false, false),
            (std::vector<TokenId>{v.Id("hello"), v.Id("\xC4\xA0world")}));
  EXPECT_EQ(t.Encode("xyz", false, false), (std::vector<TokenId>{v.Id("xyz")}));
  // "xy" ends as a non-token symbol: llama.cpp emits the tokens of its single bytes.
  EXPECT_EQ(t.Encode("xy", false, false), (std::vector<TokenId>{v.Id("x"), v.Id("y")}));
  EXPECT_EQ(t.Decode(t.Encode("hello xyz xy\xFF", false, false)), "hello xyz xy\xFF");
  // Unused and undefined tokens print nothing; control only when asked.
  EXPECT_EQ(t.TokenToPiece(v.Id("<unused0>"), true), "");
  EXPECT_EQ(t.TokenToPiece(v.Id("<undef>"), true), "");
  EXPECT_EQ(t.TokenToPiece(v.Id("<|end|>")), "");
  EXPECT_EQ(t.TokenToPiece(v.Id("<|end|>"), true), "<|end|>");
  EXPECT_EQ(t.TokenToPiece(-1), "");
  EXPECT_EQ(t.TokenToPiece(static_cast<TokenId>(t.n_vocab())), "");
}

TEST(BpeSyntheticTest, UnknownPreFallsBackToGpt2Pattern) {
  SyntheticVocab v = ByteLevelVocab();
  v.pre = "definitely-not-a-pre-tokenizer";
  auto tok = v.Build();
  ASSERT_TRUE(tok.ok()) << tok.error().ToString();
  auto* bpe = dynamic_cast<const BpeTokenizer*>(tok->get());
  ASSERT_NE(bpe, nullptr);
  EXPECT_EQ(bpe->pre_family(), "gpt2");
  EXPECT_EQ((*tok)->Encode("hello world", false, false),
            (std::vector<TokenId>{v.Id("hello"), v.Id("\xC4\xA0world")}));
  v.pre = "";  // missing: llama.cpp's "default" steps
  auto tok2 = v.Build();
  ASSERT_TRUE(tok2.ok());
  EXPECT_EQ(dynamic_cast<const BpeTokenizer*>(tok2->get())->pre_family(), "default");
}

TEST(BpeSyntheticTest, MissingMergesIsAnError) {
  SyntheticVocab v = ByteLevelVocab();
  v.merges.clear();
  auto tok = v.Build();
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.error().code(), StatusCode::kInvalidArgument);
}

TEST(BpeSyntheticTest, StripAttributesFollowLlamaCpp) {
  // general.name containing "phi-3": every special token strips the whitespace after it.
  SyntheticVocab v = ByteLevelVocab();
  v.name = "Phi-3 synthetic";
  auto tok = v.Build();
  ASSERT_TRUE(tok.ok()) << tok.error().ToString();
  const TokenId end = v.Id("<|end|>"), mask = v.Id("<mask>");
  EXPECT_EQ((*tok)->Encode("<|end|>  hello", false, true),
            (std::vector<TokenId>{end, v.Id("hello")}));
  EXPECT_EQ((*tok)->Encode("<mask> \n hello", false, false),
            (std::vector<TokenId>{mask, v.Id("hello")}));
  // jina-v2 pre-tokenizers: <mask> strips the whitespace before it.
  SyntheticVocab j = ByteLevelVocab();
  j.pre = "jina-v2-es";
  auto tj = j.Build();
  ASSERT_TRUE(tj.ok()) << tj.error().ToString();
  EXPECT_EQ((*tj)->Encode("hello  <mask>", false, false),
            (std::vector<TokenId>{j.Id("hello"), mask}));
  // Without either, whitespace stays.
  auto plain = ByteLevelVocab().Build();
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)->Decode((*plain)->Encode("hello  <mask> x", false, false)), "hello  <mask> x");
}

TEST(BpeSyntheticTest, Gemma4StyleRawUtf8WithByteFallback) {
  SyntheticVocab v;
  v.model = "gemma4";
  v.pre = "";
  for (const char* t : {"<pad>", "<eos>", "<bos>"}) v.Add(t, TokenType::kControl);
  static const char* kHex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b)
    v.Add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", TokenType::kByte);
  for (const char* t : {"\xE2\x96\x81", "h", "i", "\xE2\x96\x81h", "\xE2\x96\x81hi", "\n", "\n\n"})
    v.Add(t);
  v.merges = {"\xE2\x96\x81 h", "\xE2\x96\x81h i", "\n \n"};
  auto tok = v.Build();
  ASSERT_TRUE(tok.ok()) << tok.error().ToString();
  const Tokenizer& t = **tok;
  const TokenId c3 = v.Id("<0xC3>"), b6 = v.Id("<0xB6>");
  EXPECT_EQ(t.Encode(" hi\n\n\xC3\xB6", false, false),
            (std::vector<TokenId>{v.Id("\xE2\x96\x81hi"), v.Id("\n\n"), c3, b6}));
  EXPECT_EQ(t.Decode(t.Encode(" hi\n\n\xC3\xB6", false, false)), " hi\n\n\xC3\xB6");
  // No add_bos_token key: Gemma 4 adds <bos> anyway.
  EXPECT_EQ(t.Encode("", true, false), (std::vector<TokenId>{v.Id("<bos>")}));
  EXPECT_EQ(t.Decode(t.Encode(std::string("\xFF\x00 h", 4), false, false)),
            std::string("\xFF\x00 h", 4));
}

// ---------------------------------------------------------------------------------------------
// Pre-tokenizer.
// ---------------------------------------------------------------------------------------------

std::vector<std::string> SplitWith(const PreTokenizer& p, std::string_view text) {
  std::vector<std::string_view> w;
  p.Split(text, &w);
  return std::vector<std::string>(w.begin(), w.end());
}

TEST(PreTokenizerTest, EveryKnownFamilyCompilesAndPartitions) {
  std::mt19937 rng(5);
  std::vector<std::string> texts = {
      "", "Hello world's 12345 na\xC3\xAFve \xE6\x97\xA5\xE6\x9C\xAC!!\n\n  end",
      std::string("\xFF"
                  "ab\xC3",
                  4),
      "1234567 x 12"};
  for (int i = 0; i < 40; ++i) texts.push_back(RandomUnicode(&rng, 40));
  for (std::string_view name : PreTokenizer::KnownNames()) {
    auto p = PreTokenizer::Create(name);
    ASSERT_TRUE(p.ok()) << name << ": " << p.error().ToString();
    for (const std::string& t : texts) {
      std::string joined;
      for (const std::string& w : SplitWith(**p, t)) {
        EXPECT_FALSE(w.empty()) << name;
        joined += w;
      }
      EXPECT_EQ(joined, t) << name;
    }
  }
}

TEST(PreTokenizerTest, FamiliesSplitAsTheirRegexes) {
  auto gpt2 = PreTokenizer::Create("gpt-2");
  ASSERT_TRUE(gpt2.ok());
  EXPECT_EQ(SplitWith(**gpt2, "Hello world's  12345!!\n"),
            (std::vector<std::string>{"Hello", " world", "'s", " ", " 12345", "!!", "\n"}));
  auto llama3 = PreTokenizer::Create("llama-bpe");
  ASSERT_TRUE(llama3.ok());
  EXPECT_EQ((*llama3)->family(), "llama3");
  EXPECT_EQ(SplitWith(**llama3, "I'M 12345 ok\n\n  end"),
            (std::vector<std::string>{"I", "'M", " ", "123", "45", " ok", "\n\n", " ", " end"}));
  auto qwen = PreTokenizer::Create("qwen2");
  ASSERT_TRUE(qwen.ok());
  EXPECT_EQ(SplitWith(**qwen, "a 123"), (std::vector<std::string>{"a", " ", "1", "2", "3"}));
  auto superbpe = PreTokenizer::Create("superbpe");
  ASSERT_TRUE(superbpe.ok());
  EXPECT_EQ(SplitWith(**superbpe, "x1234567y"),
            (std::vector<std::string>{"x", "1", "234", "567", "y"}));
  auto gemma = PreTokenizer::Create("gemma4");
  ASSERT_TRUE(gemma.ok());
  EXPECT_FALSE((*gemma)->traits().byte_encode);
  EXPECT_EQ(SplitWith(**gemma, "a b\n\nc"), (std::vector<std::string>{"a b", "\n\n", "c"}));
  // Invalid bytes are pieces of their own; the valid text around them splits normally.
  EXPECT_EQ(SplitWith(**gpt2, std::string("ab\xFF"
                                          "cd \xC3",
                                          7)),
            (std::vector<std::string>{"ab", "\xFF", "cd", " ", "\xC3"}));
}

// The hand-written steps are exact stand-ins for regexes whose lookaheads would rescan digit runs.
TEST(PreTokenizerTest, HandWrittenStepsEqualTheirRegexes) {
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> pairs = {
      {{"<digit-groups-at-word-end>"}, {R"re(\d{1,3}(?=(?:\d{3})*\b))re"}},
      {{"<digit-cuts-from-right>"}, {R"re((?=(\d{3})+(?!\d)))re"}},
      {{R"re(\p{N}+)re", "<digit-cuts-from-right>"},
       {R"re(\p{N}+)re", R"re((?=(\d{3})+(?!\d)))re"}},
      {{"<digit-groups>"}, {R"re(\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N})))re"}},
      {{"<newline-runs>"}, {"[^\\n]+|[\\n]+"}},
  };
  // Mixed decimal digits (ASCII, Arabic-Indic U+0663), other numbers (U+00B2), letters,
  // underscores, marks, spaces and newlines.
  const std::vector<std::string> alphabet = {"1",        "2",  "3",        "0", "\xD9\xA3",
                                             "\xC2\xB2", "a",  "Z",        "_", " ",
                                             "\n",       "\n", "\xCC\x81", "-", "\xE6\x97\xA5"};
  std::mt19937 rng(17);
  std::vector<std::string> texts = {"", "1", "12", "123", "1234567", "x1234567y", "12ab 34567"};
  for (int i = 0; i < 600; ++i) {
    std::string t;
    const int n = static_cast<int>(rng() % 24);
    for (int k = 0; k < n; ++k) t += alphabet[rng() % alphabet.size()];
    texts.push_back(t);
  }
  for (const auto& [mine, regex] : pairs) {
    auto a = PreTokenizer::FromPatterns(mine);
    auto b = PreTokenizer::FromPatterns(regex);
    ASSERT_TRUE(a.ok()) << a.error().ToString();
    ASSERT_TRUE(b.ok()) << b.error().ToString();
    for (const std::string& t : texts)
      ASSERT_EQ(SplitWith(**a, t), SplitWith(**b, t)) << mine[0] << " on '" << t << "'";
  }
  EXPECT_FALSE(PreTokenizer::FromPatterns({"(unclosed"}).ok());
}

// Every family splits long runs (linear growth is bench/tokenizer_bench's BM_PreTokenizeRun).
TEST(PreTokenizerTest, EveryFamilySplitsLongRuns) {
#ifdef NDEBUG
  constexpr size_t kBig = 200000;
#else
  constexpr size_t kBig = 40000;
#endif
  std::vector<std::string> families_seen;
  for (std::string_view name : PreTokenizer::KnownNames()) {
    auto p = PreTokenizer::Create(name);
    ASSERT_TRUE(p.ok());
    const std::string fam = (*p)->family();
    if (std::count(families_seen.begin(), families_seen.end(), fam) > 0) continue;
    families_seen.push_back(fam);
    for (const std::string unit :
         {" ", "a", "1", "\n", "!", "\xE6\x97\xA5", " a", "\t ", "a\xCC\x81", "'s"}) {
      std::string t;
      while (t.size() < kBig) t += unit;
      const auto words = SplitWith(**p, t);
      EXPECT_FALSE(words.empty()) << name << " unit '" << unit << "'";
      size_t bytes = 0;
      for (const auto& w : words) bytes += w.size();
      EXPECT_EQ(bytes, t.size()) << name << " unit '" << unit << "': words cover the input";
    }
  }
}

TEST(PreTokenizerTest, UnknownAndMissingNamesFallBack) {
  auto unknown = PreTokenizer::Create("no-such-pre-tokenizer");
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ((*unknown)->family(), "gpt2");
  auto missing = PreTokenizer::Create("");
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ((*missing)->family(), "default");
}

}  // namespace
}  // namespace kvforge::tokenizer
