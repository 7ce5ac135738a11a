#include "tokenizer/bpe_pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <utility>

#include "base/log.h"

namespace kvforge::tokenizer {
namespace {

// ---------------------------------------------------------------------------------------------
// Patterns. Contractions are spelled with ASCII classes ('[sS]) as llama.cpp does: (?i:'s) under
// PCRE2_UCP would also fold U+017F and U+212A, which neither llama.cpp nor the test data expect.
// ---------------------------------------------------------------------------------------------

// GPT-2 / ByteLevel(use_regex) pattern.
constexpr const char kGpt2[] =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";

// Llama 3 (cl100k-style): letters with one leading non-letter, digits in threes.
constexpr const char kLlama3[] =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+)re"
    R"re(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// Llama 3 with a cascade of power-of-two whitespace runs (jais-2).
constexpr const char kJais2[] =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+)re"
    R"re(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S))re"
    R"re(|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S))re"
    R"re(|\s{1,2}(?!\S)|\s{1})re";

// Qwen2: like Llama 3 but single digits.
constexpr const char kQwen2[] =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+)re"
    R"re(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// Qwen3.5: combining marks stay with their letters.
constexpr const char kQwen35[] =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))re"
    R"re(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+)re"
    R"re(|\s+(?!\S)|\s+)re";

// Seed-Coder: single digits, punctuation runs never swallow newlines.
constexpr const char kSeedCoder[] =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+)re"
    R"re(|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// Qwen2 without the contraction group (Turkish apostrophe suffixes stay attached).
constexpr const char kUfakzeka[] =
    R"re([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// MiniCPM5 main pattern (digit runs were already cut into threes).
constexpr const char kMinicpm5[] =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+)re"
    R"re(|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// BailingMoE (possessive quantifiers as in its tokenizer.json).
constexpr const char kBailing[] =
    R"re('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N})re"
    R"re(| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re";

// EXAONE-MoE: words may span single spaces between letters.
constexpr const char kExaoneMoe[] =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))re"
    R"re(|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?)re"
    R"re(|\s*[\r\n]|\s+(?!\S)|\s+)re";

// Tekken: case-aware words (upper* lower+ | upper+ lower*), single digits.
constexpr const char kTekken[] =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)re"
    R"re(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)re"
    R"re(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// o200k (GPT-4o, Llama 4, ...): case-aware words with contractions, digits in threes.
constexpr const char kGpt4o[] =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)re"
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)re"
    R"re(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)re"
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)re"
    R"re(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// Youtu: o200k-style words, single digits.
constexpr const char kYoutuWords[] =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)re"
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)re"
    R"re(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)re"
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)re"
    R"re(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// Kimi-K2: Han runs first; other words exclude Han.
constexpr const char kKimiK2[] =
    R"re(\p{Han}+)re"
    R"re(|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])*)re"
    R"re((?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])+)re"
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)re"
    R"re(|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])+)re"
    R"re((?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])*)re"
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)re"
    R"re(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// DeepSeek-V3 / Hunyuan-dense main pattern.
constexpr const char kDeepseekV3Main[] =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+)re"
    R"re(| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

constexpr const char kSparkMain[] =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+)re"
    R"re(| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)re";

// CJK / kana blocks.
constexpr const char kHanKana[] = R"re([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re";
constexpr const char kDeepseekCjk[] =
    R"re([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re";

// DeepSeek LLM: cased letters (Lu/Ll/Lt ranges as listed in its tokenizer.json).
constexpr const char kDeepseekLetters[] =
    R"re(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})re"
    R"re(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-)re"
    R"re(\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-)re"
    R"re(\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-)re"
    R"re(\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-)re"
    R"re(\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D})re"
    R"re(\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-)re"
    R"re(\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-)re"
    R"re(\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126})re"
    R"re(\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149})re"
    R"re(\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2})re"
    R"re(\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-)re"
    R"re(\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-)re"
    R"re(\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2})re"
    R"re(\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)re";
constexpr const char kDeepseekPunct[] =
    R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re";

constexpr const char kPoro[] =
    R"re( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C})]+)re";

constexpr const char kYoutuCjk[] =
    R"re([\x{AC00}-\x{D7A3}\x{3131}-\x{318E}]+)re"
    R"re(|[\x{FF01}\x{2026}\x{201C}\x{201D}\x{2018}\x{2019}\x{2014}\x{FF1A}\x{FF1B}\x{FF0C})re"
    R"re(\x{3001}-\x{303F}\x{FE30}-\x{FE4F}]+|[\x{3105}-\x{312F}]+)re"
    R"re(|[\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re";

constexpr const char kAfmoeCjk[] =
    R"re([\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{F900}-\x{FAFF}\x{3040}-\x{309F}\x{30A0}-\x{30FF})re"
    R"re(\x{FF65}-\x{FF9F}\x{2F00}-\x{2FDF}\x{0E40}-\x{0E7F}\x{0E80}-\x{0EFF}\x{1780}-\x{17FF})re"
    R"re(\x{1000}-\x{109F}\x{AA60}-\x{AA7F}\x{A9E0}-\x{A9FF}\x{AC00}-\x{D7AF})re"
    R"re(\x{1100}-\x{11FF}]+)re";

// Steps that are not a plain regex.
constexpr const char kNewlineRuns[] = "<newline-runs>";  // [^\n]+|[\n]+ (byte scan)
constexpr const char kDigitGroups[] = "<digit-groups>";  // \p{N} runs cut in threes from the right
// \d{1,3}(?=(?:\d{3})*\b) without its lookahead rescanning each digit run (quadratic): inside a
// run of decimal digits \b only holds at the run's end, so the regex matches exactly when no word
// character follows the run, and then cuts it into threes from the right.
constexpr const char kDigitGroupsAtWordEnd[] = "<digit-groups-at-word-end>";
// (?=(\d{3})+(?!\d)) without rescanning: its empty matches are the positions from which a
// maximal run of decimal digits has a positive multiple of three digits left, i.e. cuts at the
// run's end minus 3, 6, ...
constexpr const char kDigitCutsFromRight[] = "<digit-cuts-from-right>";

struct FamilyDef {
  const char* family;
  std::vector<const char*> steps;
  PreTokenizer::Traits traits;
};

// Families, keyed by the canonical name; `names` lists every `pre` value that selects one.
struct NameDef {
  const char* name;
  const char* family;
  bool ignore_merges;
  bool default_add_bos;
};

const std::vector<FamilyDef>& Families() {
  static const std::vector<FamilyDef> kFamilies = {
      {"default", {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re", "[0-9][0-9][0-9]"}, {}},
      {"gpt2", {kGpt2}, {}},
      {"llama3", {kLlama3}, {}},
      {"jais2", {kJais2}, {}},
      {"deepseek-llm",
       {"[\\r\\n]", kDeepseekLetters, kDeepseekPunct, R"re(\s+$)re", kDeepseekCjk, R"re(\p{N}+)re"},
       {}},
      {"deepseek-v3", {R"re(\p{N}{1,3})re", kHanKana, kDeepseekV3Main}, {}},
      {"spark2_5", {R"re(\p{N}{1,3})re", kHanKana, kSparkMain, R"re(\p{N})re"}, {}},
      {"youtu", {kYoutuCjk, kYoutuWords}, {}},
      {"deepseek-coder",
       {"[\\r\\n]", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", kDeepseekCjk, R"re(\p{N})re"},
       {}},
      {"falcon", {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, "[0-9][0-9][0-9]"}, {}},
      {"starcoder", {R"re(\p{N})re", kGpt2}, {}},
      {"qwen2", {kQwen2}, {}},
      {"qwen35", {kQwen35}, {}},
      {"poro", {kPoro}, {}},
      {"viking", {kPoro, R"re(\p{N})re"}, {}},
      {"tekken", {kTekken}, {}},
      {"chameleon",
       {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )",
        R"re(\p{N})re", R"re([\p{P}!-/:-@\[-`{-~])re", kGpt2},
       {}},
      {"gpt-4o", {kGpt4o}, {}},
      {"tiny_aya", {kDigitGroupsAtWordEnd, kGpt4o}, {}},
      {"kimi-k2", {kKimiK2}, {}},
      {"superbpe", {R"re(\p{N}+)re", kDigitCutsFromRight}, {}},
      {"bailingmoe", {kBailing}, {}},
      {"seed-coder", {kSeedCoder}, {}},
      {"ufakzeka", {kUfakzeka}, {}},
      {"afmoe", {kDigitGroups, kAfmoeCjk, kDeepseekV3Main}, {}},
      {"laguna", {kNewlineRuns, kQwen2}, {}},
      {"exaone-moe", {kExaoneMoe}, {}},
      {"minicpm5", {R"re(\p{N}{1,3})re", kMinicpm5}, {}},
      // SentencePiece-style BPE on raw UTF-8 with U+2581 for spaces; only newlines split words.
      {"gemma4", {kNewlineRuns}, {/*byte_encode=*/false, /*escape_whitespace=*/true}},
  };
  return kFamilies;
}

const std::vector<NameDef>& Names() {
  static const std::vector<NameDef> kNames = {
      {"default", "default", false, false},
      {"minicpm5", "minicpm5", true, false},
      {"llama3", "llama3", true, true},
      {"llama-v3", "llama3", true, true},
      {"llama-bpe", "llama3", true, true},
      {"falcon3", "llama3", true, true},
      {"falcon-h1", "llama3", true, true},
      {"pixtral", "llama3", true, true},
      {"midm-2.0", "llama3", true, true},
      {"lfm2", "llama3", true, true},
      {"jina-v5-nano", "llama3", true, true},
      {"dbrx", "llama3", false, false},
      {"smaug-bpe", "llama3", false, false},
      {"glm4", "llama3", false, false},
      {"chatglm-bpe", "llama3", false, false},
      {"jais-2", "jais2", false, false},
      {"deepseek-llm", "deepseek-llm", false, false},
      {"deepseek-coder", "deepseek-coder", false, false},
      {"deepseek-v3", "deepseek-v3", false, false},
      {"hunyuan-dense", "deepseek-v3", false, false},
      {"hy_v4", "deepseek-v3", false, false},
      {"joyai-llm", "deepseek-v3", false, false},
      {"spark2_5", "spark2_5", false, false},
      {"youtu", "youtu", true, false},
      {"falcon", "falcon", false, false},
      {"mpt", "gpt2", false, false},
      {"starcoder", "starcoder", false, false},
      {"refact", "starcoder", false, false},
      {"command-r", "starcoder", false, false},
      {"smollm", "starcoder", false, false},
      {"codeshell", "starcoder", false, false},
      {"exaone", "starcoder", false, false},
      {"minerva-7b", "starcoder", false, false},
      {"mellum2", "starcoder", false, false},
      {"gpt-2", "gpt2", false, false},
      {"phi-2", "gpt2", false, false},
      {"jina-es", "gpt2", false, false},
      {"jina-de", "gpt2", false, false},
      {"gigachat", "gpt2", false, false},
      {"jina-v2-es", "gpt2", false, false},
      {"jina-v2-de", "gpt2", false, false},
      {"jina-v1-en", "gpt2", false, false},
      {"jina-v2-code", "gpt2", false, false},
      {"roberta-bpe", "gpt2", false, false},
      {"a.x-4.0", "gpt2", false, false},
      {"mellum", "gpt2", false, false},
      {"modern-bert", "gpt2", false, false},
      {"olmo", "gpt2", false, false},
      {"jais", "gpt2", false, false},
      {"trillion", "gpt2", false, false},
      {"granite-docling", "gpt2", false, false},
      {"exaone4", "gpt2", false, false},
      {"qwen2", "qwen2", false, false},
      {"deepseek-r1-qwen", "qwen2", false, false},
      {"kormo", "qwen2", false, false},
      {"f2llmv2", "qwen2", false, false},
      {"stablelm2", "qwen2", false, false},
      {"hunyuan", "qwen2", false, false},
      {"solar-open", "qwen2", false, false},
      {"megrez", "qwen2", false, false},
      {"grok-2", "qwen2", false, false},
      {"qwen35", "qwen35", false, false},
      {"poro-chat", "poro", false, false},
      {"bloom", "poro", false, false},
      {"gpt3-finnish", "poro", false, false},
      {"viking", "viking", false, false},
      {"tekken", "tekken", true, true},
      {"chameleon", "chameleon", false, true},
      {"gpt-4o", "gpt-4o", false, false},
      {"llama4", "gpt-4o", false, false},
      {"kanana2", "gpt-4o", false, false},
      {"talkie", "gpt-4o", false, false},
      {"minimax-m2", "gpt-4o", false, false},
      {"granite-embed-multi-97m", "gpt-4o", true, false},
      {"tiny_aya", "tiny_aya", false, false},
      {"cohere2moe", "tiny_aya", false, false},
      {"kimi-k2", "kimi-k2", false, false},
      {"superbpe", "superbpe", false, false},
      {"bailingmoe", "bailingmoe", false, false},
      {"bailingmoe2", "bailingmoe", false, false},
      {"llada-moe", "bailingmoe", false, false},
      {"seed-coder", "seed-coder", false, false},
      {"ufakzeka", "ufakzeka", false, false},
      {"afmoe", "afmoe", false, false},
      {"laguna", "laguna", false, false},
      {"exaone-moe", "exaone-moe", false, false},
      {"gemma4", "gemma4", false, true},
      {"granite-embed-multi-311m", "gemma4", false, true},
      {"sarvam-moe", "gemma4", false, false},
  };
  return kNames;
}

// Length of the valid UTF-8 sequence at s[i] (1..4), or 0 when s[i] does not start one
// (stray continuation, overlong form, surrogate, > U+10FFFF, truncated).
size_t ValidUtf8Len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  const size_t left = s.size() - i;
  auto cont = [&](size_t k) { return k < left && (b(k) & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(1) >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(1) >= 0x90) return 0;  // > U+10FFFF
    return 4;
  }
  return 0;
}

size_t Utf8LeadLen(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;
}

std::atomic<bool> g_warned_match_error{false};

}  // namespace

// One compiled step. `kind` distinguishes regexes from the hand-written splitters.
struct PreTokenizer::Step {
  enum class Kind {
    kRegex,
    kNewlineRuns,
    kDigitGroups,
    kDigitGroupsAtWordEnd,
    kDigitCutsFromRight
  };
  Kind kind = Kind::kRegex;
  std::string pattern;
  pcre2_code* code = nullptr;       // owned
  pcre2_code* word_char = nullptr;  // owned; kDigitGroupsAtWordEnd: anchored \w
  bool jit = false;
  // Bytes that can start a match (from PCRE2's start-of-match analysis) and the shortest match;
  // a piece without such a byte, or shorter, is passed on unsplit.
  bool filter = false;
  std::array<bool, 256> may_start{};
  size_t min_length = 0;

  Step() = default;
  Step(Step&& o) noexcept
      : kind(o.kind),
        pattern(std::move(o.pattern)),
        code(std::exchange(o.code, nullptr)),
        word_char(std::exchange(o.word_char, nullptr)),
        jit(o.jit),
        filter(o.filter),
        may_start(o.may_start),
        min_length(o.min_length) {}
  Step& operator=(Step&&) = delete;
  Step(const Step&) = delete;
  ~Step() {
    if (code != nullptr) pcre2_code_free(code);
    if (word_char != nullptr) pcre2_code_free(word_char);
  }
};

PreTokenizer::PreTokenizer() = default;
PreTokenizer::~PreTokenizer() = default;

std::vector<std::string_view> PreTokenizer::KnownNames() {
  std::vector<std::string_view> out;
  for (const NameDef& n : Names()) out.emplace_back(n.name);
  return out;
}

Result<std::unique_ptr<PreTokenizer>> PreTokenizer::Create(std::string_view pre) {
  const NameDef* name = nullptr;
  for (const NameDef& n : Names())
    if (pre == n.name) name = &n;
  static const NameDef kMissing{"", "default", false, false};
  static const NameDef kUnknown{"", "gpt2", false, false};
  if (name == nullptr) {
    if (pre.empty()) {
      KVF_LOG_WARN(
          "tokenizer: GGUF has no tokenizer.ggml.pre; using llama.cpp's 'default' BPE "
          "pre-tokenizer (generation quality may be degraded; regenerate the GGUF)");
      name = &kMissing;
    } else {
      KVF_LOG_WARN(
          "tokenizer: unknown tokenizer.ggml.pre '%.*s'; falling back to the GPT-2 pre-tokenizer "
          "pattern (tokenization may differ from the model's own tokenizer)",
          static_cast<int>(pre.size()), pre.data());
      name = &kUnknown;
    }
  }
  const FamilyDef* fam = nullptr;
  for (const FamilyDef& f : Families())
    if (std::string_view(f.family) == name->family) fam = &f;
  if (fam == nullptr) return Status::Internal("pre-tokenizer family table is inconsistent");

  Traits traits = fam->traits;
  traits.ignore_merges = name->ignore_merges;
  traits.default_add_bos = name->default_add_bos;
  std::vector<std::string> steps(fam->steps.begin(), fam->steps.end());
  KVF_ASSIGN_OR_RETURN(auto p, FromPatterns(steps, traits));
  p->family_ = fam->family;
  return p;
}

Result<std::unique_ptr<PreTokenizer>> PreTokenizer::FromPatterns(
    const std::vector<std::string>& steps, Traits traits) {
  std::unique_ptr<PreTokenizer> p(new PreTokenizer());
  p->family_ = "custom";
  p->traits_ = traits;
  for (const std::string& pat : steps) {
    Step st;
    st.pattern = pat;
    if (st.pattern == kNewlineRuns) {
      st.kind = Step::Kind::kNewlineRuns;
    } else {
      // The digit-group steps find digit runs with PCRE2 and cut them by hand.
      std::string src = st.pattern;
      if (st.pattern == kDigitGroups) {
        st.kind = Step::Kind::kDigitGroups;
        src = R"re(\p{N}+)re";
      } else if (st.pattern == kDigitGroupsAtWordEnd) {
        st.kind = Step::Kind::kDigitGroupsAtWordEnd;
        src = R"re(\d+)re";
      } else if (st.pattern == kDigitCutsFromRight) {
        st.kind = Step::Kind::kDigitCutsFromRight;
        src = R"re(\d+)re";
      }
      int err = 0;
      PCRE2_SIZE err_off = 0;
      st.code =
          pcre2_compile(reinterpret_cast<PCRE2_SPTR>(src.data()), src.size(),
                        PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_off, nullptr);
      if (st.code != nullptr && st.kind == Step::Kind::kDigitGroupsAtWordEnd) {
        const std::string w = R"re(\w)re";
        st.word_char =
            pcre2_compile(reinterpret_cast<PCRE2_SPTR>(w.data()), w.size(),
                          PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &err, &err_off, nullptr);
        if (st.word_char == nullptr) {
          pcre2_code_free(st.code);
          st.code = nullptr;
        }
      }
      if (st.code == nullptr) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof(msg));
        return Status::InvalidArgument("pre-tokenizer regex /" + pat +
                                       "/ does not compile at offset " + std::to_string(err_off) +
                                       ": " + reinterpret_cast<const char*>(msg));
      }
      st.jit = pcre2_jit_compile(st.code, PCRE2_JIT_COMPLETE) == 0;
      uint32_t min_len = 0, first_type = 0, first_unit = 0;
      const uint8_t* bitmap = nullptr;
      if (pcre2_pattern_info(st.code, PCRE2_INFO_MINLENGTH, &min_len) == 0)
        st.min_length = min_len;  // in code points, so also a lower bound in bytes
      if (pcre2_pattern_info(st.code, PCRE2_INFO_FIRSTCODETYPE, &first_type) == 0) {
        if (first_type == 1 &&
            pcre2_pattern_info(st.code, PCRE2_INFO_FIRSTCODEUNIT, &first_unit) == 0 &&
            first_unit < 256) {
          st.filter = true;
          st.may_start[first_unit] = true;
        } else if (first_type == 0 &&
                   pcre2_pattern_info(st.code, PCRE2_INFO_FIRSTBITMAP, &bitmap) == 0 &&
                   bitmap != nullptr) {
          st.filter = true;
          for (int c = 0; c < 256; ++c) st.may_start[c] = (bitmap[c / 8] >> (c % 8)) & 1;
        }
      }
    }
    p->steps_.push_back(std::move(st));
  }
  return p;
}

std::vector<std::string> PreTokenizer::step_patterns() const {
  std::vector<std::string> out;
  for (const Step& st : steps_) out.push_back(st.pattern);
  return out;
}

void PreTokenizer::Split(std::string_view text, std::vector<std::string_view>* words) const {
  Split(
      text,
      [](void* ctx, std::string_view piece) {
        static_cast<std::vector<std::string_view>*>(ctx)->push_back(piece);
      },
      words);
}

// Walks the steps depth first: each piece of step k is split by step k+1 as soon as it is found,
// so nothing proportional to the input is held besides the caller's output.
class PreTokenizer::Splitter {
 public:
  Splitter(const PreTokenizer& p, std::string_view text, PieceFn fn, void* ctx)
      : p_(p),
        text_(text),
        base_(reinterpret_cast<const unsigned char*>(text.data())),
        fn_(fn),
        ctx_(ctx) {}
  ~Splitter() {
    if (md_ != nullptr) pcre2_match_data_free(md_);
  }
  Splitter(const Splitter&) = delete;
  Splitter& operator=(const Splitter&) = delete;

  void Run() {
    // Maximal valid UTF-8 runs go through the steps; each invalid byte is a piece by itself.
    size_t run = 0, i = 0;
    while (i < text_.size()) {
      const size_t n = ValidUtf8Len(text_, i);
      if (n > 0) {
        i += n;
        continue;
      }
      if (i > run) Piece(0, run, i);
      Emit(i, i + 1);
      run = ++i;
    }
    if (i > run) Piece(0, run, i);
  }

 private:
  void Emit(size_t b, size_t e) { fn_(ctx_, text_.substr(b, e - b)); }

  // [b, e) is a piece after step k-1; apply step k and the ones after it.
  void Piece(size_t k, size_t b, size_t e) {
    if (k == p_.steps_.size()) {
      Emit(b, e);
      return;
    }
    const Step& st = p_.steps_[k];
    switch (st.kind) {
      case Step::Kind::kNewlineRuns:
        for (size_t i = b; i < e;) {
          const bool nl = text_[i] == '\n';
          size_t j = i + 1;
          while (j < e && (text_[j] == '\n') == nl) ++j;
          Piece(k + 1, i, j);
          i = j;
        }
        return;
      case Step::Kind::kRegex:
        Regex(k, b, e, /*digit_groups=*/false);
        return;
      case Step::Kind::kDigitGroups:
        Regex(k, b, e, /*digit_groups=*/true);
        return;
      case Step::Kind::kDigitGroupsAtWordEnd:
        DigitRunsAtWordEnd(k, b, e);
        return;
      case Step::Kind::kDigitCutsFromRight:
        DigitCutsFromRight(k, b, e);
        return;
    }
  }

  void DigitCutsFromRight(size_t k, size_t b, size_t e) {
    const Step& st = p_.steps_[k];
    if (md_ == nullptr) md_ = pcre2_match_data_create(1, nullptr);
    const PCRE2_SIZE len = e - b;
    PCRE2_SIZE pos = 0;
    size_t start = b;
    std::vector<size_t> cps;
    while (pos < len && md_ != nullptr) {
      const int rc = pcre2_match(st.code, base_ + b, len, pos, PCRE2_NO_UTF_CHECK, md_, nullptr);
      if (rc < 0) break;
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md_);
      const size_t ms = b + ov[0], me = b + ov[1];
      pos = ov[1];
      cps.clear();
      for (size_t i = ms; i < me; i += Utf8LeadLen(base_[i])) cps.push_back(i);
      for (size_t c = cps.size() % 3; c + 3 <= cps.size(); c += 3) {
        if (cps[c] > start) Piece(k + 1, start, cps[c]);
        start = std::max(start, cps[c]);
      }
    }
    if (start < e) Piece(k + 1, start, e);
  }

  // Runs of \d in [b, e) that no word character follows are cut into threes from the right and
  // isolated; everything else stays in the text between them.
  void DigitRunsAtWordEnd(size_t k, size_t b, size_t e) {
    const Step& st = p_.steps_[k];
    if (md_ == nullptr) md_ = pcre2_match_data_create(1, nullptr);
    const PCRE2_SIZE len = e - b;
    PCRE2_SIZE pos = 0, start = 0;
    while (pos < len && md_ != nullptr) {
      const int rc = pcre2_match(st.code, base_ + b, len, pos, PCRE2_NO_UTF_CHECK, md_, nullptr);
      if (rc < 0) break;
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md_);
      const PCRE2_SIZE ms = ov[0], me = ov[1];
      pos = me;
      const bool word_end = me == len || pcre2_match(st.word_char, base_ + b, len, me,
                                                     PCRE2_NO_UTF_CHECK, md_, nullptr) < 0;
      if (!word_end) continue;
      if (ms > start) Piece(k + 1, b + start, b + ms);
      DigitGroups(k, b + ms, b + me);
      start = me;
    }
    if (start < len) Piece(k + 1, b + start, e);
  }

  // Isolated split of [b, e) by step k's regex; with digit_groups, each match (a \p{N}+ run) is
  // further cut into a leading (length mod 3) code points and then threes.
  void Regex(size_t k, size_t b, size_t e, bool digit_groups) {
    const Step& st = p_.steps_[k];
    // No byte of the piece can start a match: nothing to split (cheaper than calling PCRE2).
    if (e - b < st.min_length || !AnyStart(st, b, e)) {
      Piece(k + 1, b, e);
      return;
    }
    if (md_ == nullptr) md_ = pcre2_match_data_create(1, nullptr);
    const PCRE2_SPTR subj = base_ + b;
    const PCRE2_SIZE len = e - b;
    PCRE2_SIZE pos = 0, start = 0;
    while (pos < len && md_ != nullptr) {
      int rc = st.jit ? pcre2_jit_match(st.code, subj, len, pos, 0, md_, nullptr)
                      : pcre2_match(st.code, subj, len, pos, PCRE2_NO_UTF_CHECK, md_, nullptr);
      if (rc < 0 && rc != PCRE2_ERROR_NOMATCH && st.jit) {
        // JIT stack exhausted (deep backtracking): the interpreter keeps its frames on the heap.
        rc = pcre2_match(st.code, subj, len, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md_, nullptr);
      }
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        // Match/heap limit: keep the rest of this piece whole rather than fail the encode.
        if (!g_warned_match_error.exchange(true))
          KVF_LOG_WARN("tokenizer: pre-tokenizer regex failed (PCRE2 error %d); piece kept whole",
                       rc);
        break;
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md_);
      const PCRE2_SIZE ms = ov[0], me = ov[1];  // copied: deeper steps reuse md_
      if (ms > start) Piece(k + 1, b + start, b + ms);
      if (me > ms) {
        if (digit_groups) {
          DigitGroups(k, b + ms, b + me);
        } else {
          Piece(k + 1, b + ms, b + me);
        }
        start = pos = me;
        continue;
      }
      // Empty match: a boundary at ms; search again one character later.
      start = ms;
      if (ms >= len) break;
      pos = ms + Utf8LeadLen(subj[ms]);
    }
    if (start < len) Piece(k + 1, b + start, e);
  }

  void DigitGroups(size_t k, size_t b, size_t e) {
    size_t n = 0;  // code points
    for (size_t i = b; i < e; i += Utf8LeadLen(base_[i])) ++n;
    size_t group = n % 3 == 0 ? 3 : n % 3;
    for (size_t i = b; i < e;) {
      size_t j = i;
      for (size_t c = 0; c < group && j < e; ++c) j += Utf8LeadLen(base_[j]);
      Piece(k + 1, i, j);
      i = j;
      group = 3;
    }
  }

  bool AnyStart(const Step& st, size_t b, size_t e) const {
    if (!st.filter) return true;
    for (size_t i = b; i < e; ++i)
      if (st.may_start[base_[i]]) return true;
    return false;
  }

  const PreTokenizer& p_;
  std::string_view text_;
  const unsigned char* base_;
  PieceFn fn_;
  void* ctx_;
  pcre2_match_data* md_ = nullptr;
};

void PreTokenizer::Split(std::string_view text, PieceFn fn, void* ctx) const {
  if (text.empty()) return;
  Splitter sp(*this, text, fn, ctx);
  sp.Run();
}

}  // namespace kvforge::tokenizer
