// The key conformance test: every golden rendering in shared/chat-templates/renderings.json (made
// with Python Jinja2 configured like Hugging Face transformers) must be reproduced byte for byte,
// or fail with exactly the recorded error. A second golden file (testdata/extra_renderings.json,
// made the same way) covers tools, tool calls, reasoning and content parts for every template,
// including the four that use Hugging Face's {% generation %} tag.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/json.h"
#include "support/test_paths.h"

namespace kvforge::chat {
namespace {

std::string Dir() { return kvforge::testing::SharedDir() + "/chat-templates/"; }

TEST(ChatTemplateRenderings, AllGoldenRenderingsMatch) {
  const std::string text = kvforge::testing::ReadFileOrDie(Dir() + "renderings.json");
  ASSERT_FALSE(text.empty());
  const nlohmann::json entries = nlohmann::json::parse(text);
  ASSERT_TRUE(entries.is_array());
  std::map<std::string, Result<ChatTemplate>> cache;
  int passed = 0;
  int total = 0;
  for (const auto& entry : entries) {
    ++total;
    const std::string name = entry.at("template").get<std::string>();
    const std::string label = name + " / " + entry.at("case").get<std::string>();
    auto it = cache.find(name);
    if (it == cache.end()) {
      const std::string source = kvforge::testing::ReadFileOrDie(Dir() + name);
      it = cache.emplace(name, ChatTemplate::Parse(source)).first;
    }
    if (!it->second.ok()) {
      ADD_FAILURE() << label << ": parse failed: " << it->second.status().ToString();
      continue;
    }
    auto messages = ParseJson(entry.at("messages").dump());
    ASSERT_TRUE(messages.ok()) << messages.status().ToString();
    ChatInputs inputs;
    inputs.messages = *messages;
    inputs.bos_token = entry.at("bos_token").get<std::string>();
    inputs.eos_token = entry.at("eos_token").get<std::string>();
    inputs.add_generation_prompt = entry.at("add_generation_prompt").get<bool>();
    inputs.now = MakeTime(2026, 1, 15, 12, 0, 0);
    const Result<std::string> out = it->second->Render(inputs);
    if (entry.contains("error")) {
      const std::string want = entry.at("error").get<std::string>();
      if (out.ok()) {
        ADD_FAILURE() << label << ": expected error '" << want << "' but rendered:\n" << *out;
      } else if (out.status().message() != want) {
        ADD_FAILURE() << label << ": error mismatch\n  want: " << want
                      << "\n  got:  " << out.status().message();
      } else {
        ++passed;
      }
      continue;
    }
    const std::string want = entry.at("expected").get<std::string>();
    if (!out.ok()) {
      ADD_FAILURE() << label << ": render failed: " << out.status().ToString();
    } else if (*out != want) {
      size_t diff = 0;
      while (diff < want.size() && diff < out->size() && want[diff] == (*out)[diff]) ++diff;
      ADD_FAILURE() << label << ": mismatch at byte " << diff << "\n--- want (from there):\n"
                    << want.substr(diff, 200) << "\n--- got (from there):\n"
                    << out->substr(diff, 200);
    } else {
      ++passed;
    }
  }
  std::printf("renderings passed: %d/%d\n", passed, total);
  EXPECT_EQ(passed, total);
  EXPECT_EQ(total, 330);
}

std::string ExtraRenderingsPath() {
  const std::string from_source =
      kvforge::testing::SourceDir() + "/tests/chat/testdata/extra_renderings.json";
  if (std::ifstream(from_source)) return from_source;
  std::string here = __FILE__;  // absolute when built by CMake
  return here.substr(0, here.rfind('/')) + "/testdata/extra_renderings.json";
}

TEST(ChatTemplateRenderings, ExtraConversationsMatchPython) {
  const std::string text = kvforge::testing::ReadFileOrDie(ExtraRenderingsPath());
  ASSERT_FALSE(text.empty());
  Result<Value> doc = ParseJson(text);
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  const DictRep& root = doc->dict();
  const DictRep& conversations = root.FindStr("conversations")->dict();
  std::map<std::string, Result<ChatTemplate>> cache;
  int passed = 0;
  int total = 0;
  for (const Value& entry : root.FindStr("entries")->list().items) {
    ++total;
    const DictRep& e = entry.dict();
    const std::string name = e.FindStr("template")->str();
    const std::string conversation = e.FindStr("conversation")->str();
    const std::string label = name + " / " + conversation;
    auto it = cache.find(name);
    if (it == cache.end()) {
      const std::string source = kvforge::testing::ReadFileOrDie(Dir() + name);
      it = cache.emplace(name, ChatTemplate::Parse(source)).first;
    }
    ASSERT_TRUE(it->second.ok()) << label << ": " << it->second.status().ToString();
    ChatInputs inputs;
    inputs.bos_token = root.FindStr("bos_token")->str();
    inputs.eos_token = root.FindStr("eos_token")->str();
    inputs.add_generation_prompt = e.FindStr("add_generation_prompt")->bool_value();
    inputs.now = MakeTime(2026, 1, 15, 12, 0, 0);
    for (const auto& [key, value] : conversations.FindStr(conversation)->dict().entries) {
      if (key.str() == "messages") {
        inputs.messages = value;
      } else if (key.str() == "tools") {
        inputs.tools = value;
      } else {
        inputs.extra.emplace_back(key.str(), value);
      }
    }
    const Result<std::string> out = it->second->Render(inputs);
    if (const Value* error = e.FindStr("error")) {
      if (!out.ok() && out.status().message() == error->str()) {
        ++passed;
      } else {
        ADD_FAILURE() << label << ": want error '" << error->str() << "', got "
                      << (out.ok() ? "a rendering" : out.status().message());
      }
      continue;
    }
    const std::string& want = e.FindStr("expected")->str();
    if (out.ok() && *out == want) {
      ++passed;
    } else {
      ADD_FAILURE() << label << ": " << (out.ok() ? "mismatch" : out.status().ToString());
    }
  }
  std::printf("extra renderings passed: %d/%d\n", passed, total);
  EXPECT_EQ(passed, total);
  EXPECT_GT(total, 500);
}

}  // namespace
}  // namespace kvforge::chat
