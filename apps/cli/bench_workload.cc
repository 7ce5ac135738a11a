#include "bench_workload.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace kvforge::cli {

int64_t Workload::num_requests() const {
  int64_t n = 0;
  for (const auto& c : conversations) n += static_cast<int64_t>(c.size());
  return n;
}

bool IsWorkloadKind(const std::string& kind) {
  return kind == "sharegpt" || kind == "fixed" || kind == "shared-prefix" || kind == "multi-turn" ||
         kind == "few-shot";
}

namespace {

std::vector<int32_t> RandomTokens(std::mt19937_64& rng, int64_t vocab, int64_t n) {
  std::uniform_int_distribution<int32_t> tok(3, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> t(static_cast<size_t>(std::max<int64_t>(0, n)));
  for (auto& x : t) x = tok(rng);
  return t;
}

}  // namespace

Workload MakeWorkload(const WorkloadSpec& s) {
  Workload w;
  std::mt19937_64 rng(s.seed);
  std::lognormal_distribution<double> in_d(std::log(static_cast<double>(s.input_len)), 0.8);
  std::lognormal_distribution<double> out_d(std::log(static_cast<double>(s.output_len)), 0.7);
  const auto out_len = static_cast<int32_t>(s.output_len);
  auto with_bos = [](std::vector<int32_t> t) {
    t.insert(t.begin(), 1);
    return t;
  };
  if (s.kind == "sharegpt" || s.kind == "fixed") {
    for (int64_t i = 0; i < s.num_prompts; ++i) {
      int64_t il = s.input_len, ol = s.output_len;
      if (s.kind == "sharegpt") {
        il = std::clamp<int64_t>(static_cast<int64_t>(in_d(rng)), 4, s.max_len / 2);
        ol = std::clamp<int64_t>(static_cast<int64_t>(out_d(rng)), 4, s.max_len / 2);
      }
      w.conversations.push_back(
          {{with_bos(RandomTokens(rng, s.vocab, il - 1)), static_cast<int32_t>(ol)}});
    }
  } else if (s.kind == "shared-prefix") {
    const std::vector<int32_t> prefix = with_bos(RandomTokens(rng, s.vocab, s.prefix_len - 1));
    for (int64_t i = 0; i < s.num_prompts; ++i) {
      std::vector<int32_t> p = prefix;
      const auto q = RandomTokens(rng, s.vocab, s.input_len);
      p.insert(p.end(), q.begin(), q.end());
      w.conversations.push_back({{std::move(p), out_len}});
    }
  } else if (s.kind == "multi-turn") {
    for (int64_t i = 0; i < s.num_prompts; ++i) {
      std::vector<Turn> conv;
      conv.push_back({with_bos(RandomTokens(rng, s.vocab, s.input_len - 1)), out_len});
      for (int64_t t = 1; t < s.turns; ++t)
        conv.push_back({RandomTokens(rng, s.vocab, 32), out_len});
      w.conversations.push_back(std::move(conv));
    }
  } else {  // few-shot
    const std::vector<int32_t> header = with_bos(RandomTokens(rng, s.vocab, 36));
    std::vector<std::vector<int32_t>> examples;
    std::uniform_int_distribution<int64_t> ex_len(41, 97);
    for (int k = 0; k < 6; ++k) examples.push_back(RandomTokens(rng, s.vocab, ex_len(rng)));
    std::uniform_int_distribution<int> shots(1, 6);
    for (int64_t i = 0; i < s.num_prompts; ++i) {
      std::vector<int32_t> p = header;
      const int k = shots(rng);
      for (int e = 0; e < k; ++e) p.insert(p.end(), examples[e].begin(), examples[e].end());
      const auto q = RandomTokens(rng, s.vocab, s.input_len);
      p.insert(p.end(), q.begin(), q.end());
      w.conversations.push_back({{std::move(p), out_len}});
    }
  }
  return w;
}

}  // namespace kvforge::cli
