#include "engine/structured_output.h"

#include <algorithm>
#include <limits>

#include "grammar/choice_gbnf.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/regex_gbnf.h"

namespace kvforge::engine {
namespace {

// The cache key: the form and its text (choices joined by a byte no UTF-8 text holds).
std::string CacheKey(const StructuredOutputs& so) {
  if (!so.json.empty()) return "json\n" + so.json;
  if (so.json_object) return "json_object";
  if (!so.regex.empty()) return "regex\n" + so.regex;
  if (!so.grammar.empty()) return "grammar\n" + so.grammar;
  std::string key = "choice";
  for (const std::string& c : so.choice) key += "\xFF" + c;
  return key;
}

}  // namespace

Result<std::string> StructuredOutputGbnf(const StructuredOutputs& so) {
  if (so.NumSet() > 1)
    return Status::InvalidArgument(
        "structured_outputs: set only one of json, json_object, regex, choice, grammar");
  if (!so.json.empty()) {
    auto text = grammar::JsonSchemaToGbnf(so.json);
    if (!text.ok()) return text.status().WithContext("structured_outputs.json");
    return text;
  }
  if (so.json_object) return grammar::JsonObjectGbnf();
  if (!so.regex.empty()) {
    auto text = grammar::RegexToGbnf(so.regex);
    if (!text.ok()) return text.status().WithContext("structured_outputs.regex");
    return text;
  }
  if (!so.choice.empty()) {
    auto text = grammar::ChoiceToGbnf(so.choice);
    if (!text.ok()) return text.status().WithContext("structured_outputs.choice");
    return text;
  }
  if (!so.grammar.empty()) return so.grammar;
  return Status::InvalidArgument("structured_outputs: no constraint set");
}

Status CheckStructuredOutput(const StructuredOutputs& so) {
  KVF_ASSIGN_OR_RETURN(std::string text, StructuredOutputGbnf(so));
  auto g = grammar::ParseGbnf(text);
  if (!g.ok()) return g.status().WithContext("structured_outputs");
  return Status::Ok();
}

const grammar::TokenTrie& GrammarCache::Trie() {
  if (!trie_) {
    const tokenizer::Vocab& vocab = tok_.vocab();
    std::vector<std::string> pieces(static_cast<size_t>(vocab.size()));
    std::vector<bool> excluded(pieces.size(), false);
    for (int32_t id = 0; id < vocab.size(); ++id) {
      const tokenizer::TokenType type = vocab.types[static_cast<size_t>(id)];
      // Control, unknown and unused tokens never stand for text a grammar could match.
      excluded[static_cast<size_t>(id)] = type == tokenizer::TokenType::kControl ||
                                          type == tokenizer::TokenType::kUnknown ||
                                          type == tokenizer::TokenType::kUnused || vocab.IsEog(id);
      if (!excluded[static_cast<size_t>(id)])
        pieces[static_cast<size_t>(id)] = tok_.TokenToPiece(id);
    }
    trie_ = std::make_shared<grammar::TokenTrie>(std::move(pieces), excluded);
  }
  return *trie_;
}

const std::vector<int32_t>& GrammarCache::eog_tokens() {
  if (!eog_ready_) {
    for (int32_t id = 0; id < tok_.n_vocab(); ++id)
      if (tok_.IsEog(id)) eog_.push_back(id);
    eog_ready_ = true;
  }
  return eog_;
}

Result<std::shared_ptr<grammar::GrammarMasker>> GrammarCache::Get(const StructuredOutputs& so) {
  const std::string key = CacheKey(so);
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    if (it->first != key) continue;
    lru_.splice(lru_.begin(), lru_, it);
    return lru_.front().second;
  }
  KVF_ASSIGN_OR_RETURN(std::string text, StructuredOutputGbnf(so));
  auto g = grammar::ParseGbnf(text);
  if (!g.ok()) return g.status().WithContext("structured_outputs");
  Trie();
  auto masker = std::make_shared<grammar::GrammarMasker>(*g, trie_);
  lru_.emplace_front(key, masker);
  if (lru_.size() > kMaxEntries) lru_.pop_back();
  return masker;
}

std::vector<int32_t> EndTokens(GrammarCache& cache, const SamplingParams& params) {
  std::vector<int32_t> ends = params.stop_token_ids;
  if (!params.ignore_eos) {
    const std::vector<int32_t>& eog = cache.eog_tokens();
    ends.insert(ends.end(), eog.begin(), eog.end());
  }
  std::sort(ends.begin(), ends.end());
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
  return ends;
}

namespace {

constexpr float kRefused = -std::numeric_limits<float>::infinity();

std::shared_ptr<const GateTokens> ScanGateTokens(const grammar::TokenTrie& trie,
                                                 const std::string& start, const std::string& end) {
  auto g = std::make_shared<GateTokens>();
  for (int32_t id = 0; id < trie.vocab_size(); ++id) {
    const std::string& p = trie.piece(id);
    if (p.empty()) continue;
    if (!start.empty() && p.compare(0, start.size(), start) == 0) g->opening.push_back(id);
    bool closes = p.find(end) != std::string::npos;
    for (size_t k = 1; k < end.size() && !closes; ++k)
      closes = p.compare(0, end.size() - k, end, k, std::string::npos) == 0;
    if (closes) g->closing.push_back(id);
  }
  return g;
}

// The length of the longest suffix of `s` that is a proper prefix of `marker`.
size_t PendingPrefix(const std::string& s, const std::string& marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.compare(s.size() - n, n, marker, 0, n) == 0) return n;
  return 0;
}

}  // namespace

SequenceGrammar::SequenceGrammar(std::shared_ptr<grammar::GrammarMasker> masker,
                                 std::vector<int32_t> end_tokens, const StructuredOutputs& so)
    : matcher_masker_(masker), matcher_(std::move(masker)), end_tokens_(std::move(end_tokens)) {
  if (so.reasoning_end.empty()) return;
  start_ = so.reasoning_start;
  end_ = so.reasoning_end;
  phase_ = start_.empty() ? Phase::kReasoning : Phase::kOpening;
  gate_ = ScanGateTokens(matcher_masker_->trie(), start_, end_);
}

bool SequenceGrammar::TakeReasoning(const std::string& text) {
  const std::string s = tail_ + text;
  const size_t at = s.find(end_);
  if (at == std::string::npos) {
    tail_ = s.substr(s.size() - std::min(s.size(), end_.size() - 1));
    return false;
  }
  phase_ = Phase::kActive;
  tail_.clear();
  (void)matcher_.AcceptText(std::string_view(s).substr(at + end_.size()));
  return true;
}

bool SequenceGrammar::MaskReasoning(float* logits, int64_t n_logits) {
  for (int32_t id : end_tokens_)
    if (id < n_logits) logits[id] = kRefused;
  // A token that closes the reasoning must leave text the grammar can start with.
  const std::string pending = tail_.substr(tail_.size() - PendingPrefix(tail_, end_));
  for (int32_t id : gate_->closing) {
    if (id >= n_logits) continue;
    const std::string s = pending + Piece(id);
    const size_t at = s.find(end_);
    if (at == std::string::npos || at + end_.size() == s.size()) continue;
    grammar::GrammarMatcher probe = matcher_;
    if (!probe.AcceptText(std::string_view(s).substr(at + end_.size()))) logits[id] = kRefused;
  }
  return true;
}

void SequenceGrammar::MaskOpening(float* logits, int64_t n_logits) {
  // The first token either opens the reasoning or is the grammar's first token.
  std::vector<float> kept;
  for (int32_t id : gate_->opening) kept.push_back(id < n_logits ? logits[id] : kRefused);
  phase_ = Phase::kActive;
  (void)Mask(logits, n_logits);
  phase_ = Phase::kOpening;
  for (size_t k = 0; k < kept.size(); ++k)
    if (gate_->opening[k] < n_logits) logits[gate_->opening[k]] = kept[k];
}

bool SequenceGrammar::Mask(float* logits, int64_t n_logits) {
  if (phase_ == Phase::kReasoning) return MaskReasoning(logits, n_logits);
  if (phase_ == Phase::kOpening) {
    MaskOpening(logits, n_logits);
    for (int64_t id = 0; id < n_logits; ++id)
      if (logits[id] != kRefused) return true;
    return false;
  }
  matcher_.AllowedTokens(&allowed_);
  const bool can_end = matcher_.CanEnd();
  const auto bits = static_cast<int64_t>(allowed_.size()) * 64;
  // End tokens are allowed exactly where the grammar may end (a stop token id that is also
  // text obeys this too, or it would cut the sentence short).
  ends_logits_.clear();
  for (int32_t id : end_tokens_) ends_logits_.push_back(id < n_logits ? logits[id] : kRefused);
  bool any = false;
  for (int64_t id = 0; id < n_logits; ++id) {
    const bool ok = id < bits && ((allowed_[static_cast<size_t>(id >> 6)] >> (id & 63)) & 1);
    if (!ok) logits[id] = kRefused;
    any = any || ok;
  }
  for (size_t k = 0; k < end_tokens_.size(); ++k) {
    const int32_t id = end_tokens_[k];
    if (id >= n_logits) continue;
    logits[id] = can_end ? ends_logits_[k] : kRefused;
    any = any || can_end;
  }
  return any;
}

void SequenceGrammar::Accept(int32_t token) {
  if (std::binary_search(end_tokens_.begin(), end_tokens_.end(), token)) return;
  if (phase_ == Phase::kOpening) {
    if (std::binary_search(gate_->opening.begin(), gate_->opening.end(), token)) {
      phase_ = Phase::kReasoning;
      (void)TakeReasoning(Piece(token).substr(start_.size()));
      return;
    }
    phase_ = Phase::kActive;
  } else if (phase_ == Phase::kReasoning) {
    (void)TakeReasoning(Piece(token));
    return;
  }
  (void)matcher_.AcceptToken(token);
}

}  // namespace kvforge::engine
