// Fuzz-style robustness: thousands of seeded random mutations of real chat templates (byte flips,
// token insertions, deletions, truncations) must each give a clean parse error or a render (ok or
// error) — never a crash, hang or exception. CI runs this under ASan/UBSan.
#include <gtest/gtest.h>

#include <random>

#include "chat/chat_template.h"
#include "chat/json.h"
#include "support/test_paths.h"

namespace kvforge::chat {
namespace {

const char* const kTemplates[] = {
    "Qwen-Qwen2.5-7B-Instruct.jinja",
    "meta-llama-Llama-3.1-8B-Instruct.jinja",
    "google-gemma-2-2b-it.jinja",
    "Qwen3-Coder.jinja",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
    "deepseek-ai-DeepSeek-V3.1.jinja",
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
};

const char* const kSnippets[] = {
    "{{",
    "}}",
    "{%",
    "%}",
    "{#",
    "#}",
    "{%-",
    "-%}",
    "{% endif %}",
    "{% endfor %}",
    "{% else %}",
    "{% for x in messages %}",
    "{% if x %}",
    "{% macro m(a) %}",
    "{% endmacro %}",
    "{{ m(m) }}",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "'",
    "\"",
    "|",
    "|tojson",
    "|length",
    " is defined",
    " not ",
    " and ",
    " or ",
    "~",
    "**",
    "//",
    "%",
    ".",
    ",",
    ":",
    "=",
    "loop.index",
    "raise_exception(",
    "caller()",
    "namespace(",
    "range(99999)",
    "{% break %}",
    "{% set x = ",
    "\\",
    "\n",
    "\xff",
    "\xe7\x8c",
    "{% raw %}",
    "{% endraw %}",
    "[::-1]",
    "*",
    "-",
    "1e309",
    "9999999999999999999",
};

std::string Mutate(std::string s, std::mt19937& rng) {
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const size_t pos = s.empty() ? 0 : rng() % (s.size() + 1);
    switch (rng() % 6) {
      case 0:  // flip a byte
        if (!s.empty()) s[std::min(pos, s.size() - 1)] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:  // insert a Jinja-ish snippet
        s.insert(pos, kSnippets[rng() % (sizeof(kSnippets) / sizeof(kSnippets[0]))]);
        break;
      case 2:  // delete a range
        s.erase(pos, rng() % 40);
        break;
      case 3:  // truncate
        s.resize(pos);
        break;
      case 4:  // duplicate a range
        if (pos < s.size()) s.insert(pos, s.substr(pos, rng() % 80));
        break;
      default:  // random byte
        s.insert(pos, 1, static_cast<char>(rng() % 256));
        break;
    }
  }
  return s;
}

ChatInputs Conversation() {
  ChatInputs in;
  in.messages = ParseJson(R"([
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "hi 猫"},
    {"role": "assistant", "content": "hello", "tool_calls": [{"type": "function",
      "function": {"name": "f", "arguments": {"a": 1}}}]},
    {"role": "tool", "content": "42"},
    {"role": "user", "content": "again"}])")
                    .value();
  in.tools = ParseJson(R"([{"type": "function", "function": {"name": "f", "description": "d",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}])")
                 .value();
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  in.add_generation_prompt = true;
  in.now = MakeTime(2026, 1, 15, 12, 0, 0);
  return in;
}

TEST(ChatFuzz, MutatedTemplatesNeverCrash) {
  Limits limits;  // tight limits keep the sanitizer run fast
  limits.max_steps = 200000;
  limits.max_loop_iterations = 20000;
  limits.max_output_bytes = 1 << 16;
  const ChatInputs inputs = Conversation();
  std::mt19937 rng(20260115);
  int parsed = 0;
  int rendered = 0;
  int total = 0;
  for (const char* name : kTemplates) {
    const std::string source =
        kvforge::testing::ReadFileOrDie(kvforge::testing::SharedDir() + "/chat-templates/" + name);
    ASSERT_FALSE(source.empty()) << name;
    for (int i = 0; i < 300; ++i) {
      const std::string mutated = Mutate(source, rng);
      ++total;
      Result<ChatTemplate> tmpl = ChatTemplate::Parse(mutated, limits);
      if (!tmpl.ok()) {
        EXPECT_FALSE(tmpl.status().message().empty());
        continue;
      }
      ++parsed;
      Result<std::string> out = tmpl->Render(inputs);
      if (out.ok()) {
        ++rendered;
      } else {
        EXPECT_FALSE(out.status().message().empty());
        EXPECT_NE(out.status().code(), StatusCode::kInternal) << out.status().message();
      }
    }
  }
  // The mutations must exercise both paths.
  EXPECT_GT(parsed, total / 10);
  EXPECT_GT(rendered, total / 20);
  std::printf("fuzz: %d mutants, %d parsed, %d rendered\n", total, parsed, rendered);
}

// Random small templates assembled from expression fragments: exercises the interpreter's error
// paths (type errors, undefined values, odd arguments) far more than mutations of real templates.
TEST(ChatFuzz, RandomExpressionsNeverCrash) {
  const char* const atoms[] = {"messages",
                               "messages[0]",
                               "messages[-1].content",
                               "tools",
                               "none",
                               "true",
                               "0",
                               "-1",
                               "2.5",
                               "'a,b'",
                               "\"\"",
                               "[]",
                               "[1, 'x', none]",
                               "{'k': [1]}",
                               "(1, 2)",
                               "range(3)",
                               "namespace(a=1)",
                               "nope",
                               "loop",
                               "bos_token",
                               "1e308",
                               "9223372036854775807",
                               "'%s'",
                               "'{}'",
                               "x",
                               "caller"};
  const char* const ops[] = {" + ",  " - ", " * ",  " / ",      " // ",  " % ",  " ** ", " ~ ",
                             " == ", " < ", " in ", " not in ", " and ", " or ", " if ", " else "};
  const char* const posts[] = {"|length",
                               "|tojson",
                               "|list",
                               "|first",
                               "|last",
                               "|join(',')",
                               "|map('string')",
                               "|select('odd')",
                               "|selectattr('role')",
                               "|sort",
                               "|unique",
                               "|dictsort",
                               "|items",
                               "|int",
                               "|float",
                               "|round(1)",
                               "|trim",
                               "|title",
                               "|indent(2)",
                               "|batch(2)",
                               "|sum",
                               "|default(1)",
                               "|string",
                               "|reverse",
                               "|e",
                               "|safe",
                               " is defined",
                               " is string",
                               " is mapping",
                               " is divisibleby 0",
                               ".split(',')",
                               ".strip()",
                               ".get('k')",
                               ".keys()",
                               ".format(1)",
                               ".append(1)",
                               ".pop()",
                               ".items()",
                               "[0]",
                               "[1:]",
                               "[::-1]",
                               ".role",
                               "['content']",
                               "()",
                               "(1)",
                               "|tojson(indent=2)",
                               "|format(1, 2)",
                               ".upper()"};
  std::mt19937 rng(99);
  auto pick = [&](const auto& arr) { return std::string(arr[rng() % std::size(arr)]); };
  const ChatInputs inputs = Conversation();
  Limits limits;
  limits.max_steps = 100000;
  int ok = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string expr = pick(atoms);
    for (int k = static_cast<int>(rng() % 4); k > 0; --k) {
      expr += rng() % 2 ? pick(posts) : pick(ops) + pick(atoms);
    }
    std::string src;
    switch (rng() % 4) {
      case 0:
        src = "{{ " + expr + " }}";
        break;
      case 1:
        src = "{% for x in " + expr + " %}{{ loop.index }}{{ x }}{% endfor %}";
        break;
      case 2:
        src = "{% set ns = namespace(v=0) %}{% if " + expr + " %}{% set ns.v = " + expr +
              " %}{% endif %}{{ ns.v }}";
        break;
      default:
        src = "{% macro m(x) %}{{ x }}{{ caller() if caller }}{% endmacro %}{% call m(" + expr +
              ") %}{{ " + expr + " }}{% endcall %}";
        break;
    }
    Result<ChatTemplate> tmpl = ChatTemplate::Parse(src, limits);
    if (!tmpl.ok()) continue;
    Result<std::string> out = tmpl->Render(inputs);
    if (out.ok()) {
      ++ok;
    } else {
      EXPECT_NE(out.status().code(), StatusCode::kInternal)
          << src << ": " << out.status().message();
    }
  }
  EXPECT_GT(ok, 100);
}

TEST(ChatFuzz, MutatedJsonNeverCrashes) {
  static const char kJsonBytes[] = "{}[]\",:\\0123456789eE+-.tfnu";
  const std::string doc =
      R"({"messages": [{"role": "user", "content": "a\n\"b\" \u00e9 \ud83d\udc31", "n": [1, -2.5e3,
      true, false, null, {"k": []}]}]})";
  std::mt19937 rng(7);
  int ok = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string s = doc;
    for (int e = 1 + static_cast<int>(rng() % 3); e > 0; --e) {
      const size_t pos = rng() % (s.size() + 1);
      switch (rng() % 3) {
        case 0:
          if (pos < s.size()) s[pos] = static_cast<char>(rng() % 256);
          break;
        case 1:
          s.erase(pos, rng() % 8);
          break;
        default:
          s.insert(pos, 1, kJsonBytes[rng() % (sizeof(kJsonBytes) - 1)]);
          break;
      }
    }
    Result<Value> v = ParseJson(s);
    if (v.ok()) {
      ++ok;
      EXPECT_TRUE(ToJson(*v).ok());
    } else {
      EXPECT_EQ(v.status().message().rfind("invalid JSON at line ", 0), 0u) << v.status().message();
    }
  }
  EXPECT_GT(ok, 0);
}

}  // namespace
}  // namespace kvforge::chat
