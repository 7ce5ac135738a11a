#include "support/story_prompts.h"

#include <nlohmann/json.hpp>

#include "support/test_paths.h"

namespace kvforge::testing {

Prompts GoldenPrompts() {
  const auto j =
      nlohmann::json::parse(ReadFileOrDie(SharedDir() + "/reference/stories260K-greedy.json"));
  Prompts golden;
  for (const auto& c : j["cases"]) golden.push_back(c["prompt_ids"].get<std::vector<int32_t>>());
  return golden;
}

Prompts SharedPrefixPrompts() {
  const Prompts golden = GoldenPrompts();
  std::vector<int32_t> system = golden[0];
  for (size_t i = 1; i < golden.size(); ++i)
    system.insert(system.end(), golden[i].begin() + 1, golden[i].end());
  Prompts out;
  for (const auto& g : golden) {
    std::vector<int32_t> p = system;
    p.insert(p.end(), g.begin() + 1, g.end());
    out.push_back(p);
  }
  return out;
}

}  // namespace kvforge::testing
