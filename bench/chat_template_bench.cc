// chat_template_bench.cc — Google Benchmark micro-benchmarks for the chat-template interpreter:
//   BM_RenderConversation/<template>  render a typical 4-message conversation (system, user,
//                                     assistant, user + generation prompt) with a parsed template
//   BM_ParseTemplate/<template>       lex + parse the template source into its AST
//   BM_ParseMessagesJson              parse the conversation's JSON into Values
// Templates come from $KVF_CHAT_TEMPLATES_DIR, else $KVF_SHARED_DIR/chat-templates, else the
// relative guesses ../shared/chat-templates and ../../shared/chat-templates.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "chat/chat_template.h"
#include "chat/json.h"

namespace kvforge::chat {
namespace {

constexpr const char* kMessagesJson = R"([
  {"role": "system", "content": "You are a helpful assistant. Answer briefly and cite sources."},
  {"role": "user", "content": "What is a KV cache in a transformer, and why does it matter?"},
  {"role": "assistant", "content": "It stores the keys and values of past tokens so each new token only attends to them instead of recomputing the whole prefix."},
  {"role": "user", "content": "How much memory does it take for a 7B model at 32k tokens?"}
])";

std::string TemplatesDir() {
  if (const char* dir = std::getenv("KVF_CHAT_TEMPLATES_DIR"); dir && *dir) return dir;
  if (const char* shared = std::getenv("KVF_SHARED_DIR"); shared && *shared) {
    return std::string(shared) + "/chat-templates";
  }
  for (const char* guess : {"../shared/chat-templates", "../../shared/chat-templates",
                            "../../../shared/chat-templates"}) {
    if (std::ifstream(std::string(guess) + "/SOURCES.md")) return guess;
  }
  return "../shared/chat-templates";
}

bool LoadTemplate(const std::string& name, std::string* source) {
  std::ifstream in(TemplatesDir() + "/" + name, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *source = ss.str();
  return true;
}

ChatInputs MakeInputs() {
  ChatInputs inputs;
  inputs.messages = ParseJson(kMessagesJson).value();
  inputs.bos_token = "<s>";
  inputs.eos_token = "</s>";
  inputs.add_generation_prompt = true;
  inputs.now = MakeTime(2026, 1, 15, 12, 0, 0);
  return inputs;
}

void BM_RenderConversation(benchmark::State& state, const char* name) {
  std::string source;
  if (!LoadTemplate(name, &source)) {
    state.SkipWithError("template not found; set KVF_CHAT_TEMPLATES_DIR");
    return;
  }
  Result<ChatTemplate> tmpl = ChatTemplate::Parse(source);
  if (!tmpl.ok()) {
    state.SkipWithError(tmpl.status().ToString().c_str());
    return;
  }
  const ChatInputs inputs = MakeInputs();
  size_t bytes = 0;
  for (auto _ : state) {
    Result<std::string> out = tmpl->Render(inputs);
    if (!out.ok()) {
      state.SkipWithError(out.status().ToString().c_str());
      return;
    }
    bytes += out->size();
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}

void BM_ParseTemplate(benchmark::State& state, const char* name) {
  std::string source;
  if (!LoadTemplate(name, &source)) {
    state.SkipWithError("template not found; set KVF_CHAT_TEMPLATES_DIR");
    return;
  }
  for (auto _ : state) {
    Result<ChatTemplate> tmpl = ChatTemplate::Parse(source);
    benchmark::DoNotOptimize(tmpl);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * source.size()));
}

void BM_ParseMessagesJson(benchmark::State& state) {
  const std::string text = kMessagesJson;
  for (auto _ : state) {
    Result<Value> v = ParseJson(text);
    benchmark::DoNotOptimize(v);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}

BENCHMARK_CAPTURE(BM_RenderConversation, qwen2_5, "Qwen-Qwen2.5-7B-Instruct.jinja");
BENCHMARK_CAPTURE(BM_RenderConversation, llama3_1, "meta-llama-Llama-3.1-8B-Instruct.jinja");
BENCHMARK_CAPTURE(BM_RenderConversation, gpt_oss, "openai-gpt-oss-120b.jinja");
BENCHMARK_CAPTURE(BM_ParseTemplate, qwen2_5, "Qwen-Qwen2.5-7B-Instruct.jinja");
BENCHMARK_CAPTURE(BM_ParseTemplate, gpt_oss, "openai-gpt-oss-120b.jinja");
BENCHMARK(BM_ParseMessagesJson);

}  // namespace
}  // namespace kvforge::chat
