// The official `openai` npm client (Node) against the server: completions and chat, streaming
// and not, must return the engine's greedy outputs. The client is installed into the build tree
// by the server_npm_openai_setup test (ctest fixture); without node or without network access
// the test is skipped. KVF_NPM_PREFIX and KVF_OPENAI_CLIENT_SCRIPT come from CMake.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "server_test_util.h"

namespace kvforge::server::testing {
namespace {

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

TEST(OpenAiNpmClient, CompletionsAndChatMatchGreedy) {
  if (std::system("node --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "node is not installed";
  const std::string modules = std::string(KVF_NPM_PREFIX) + "/node_modules";
  if (!FileExists(modules + "/openai/package.json"))
    GTEST_SKIP() << "the openai npm package is not in " << modules
                 << " (ctest's server_npm_openai_setup installs it from the npm registry; offline "
                    "it cannot)";
  ServerOptions o;
  o.api_key = "sk-kvforge-test";
  auto h = Harness::Start(TestEngineConfig(), o);
  ASSERT_NE(h, nullptr);
  const std::string want_completion = h->GreedyText("Once upon a time", 24);
  Reply tok = Post(h->url(), "/tokenize",
                   json{{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}}},
                   {{"Authorization", "Bearer sk-kvforge-test"}});
  ASSERT_EQ(tok.status, 200) << tok.raw;
  const RequestOutput want_chat =
      h->Reference(tok.body["tokens"].get<std::vector<int32_t>>(), Greedy(20));

  const std::string cmd = "NODE_PATH='" + modules + "' timeout 120 node '" +
                          KVF_OPENAI_CLIENT_SCRIPT + "' " + h->url() +
                          " stories260K sk-kvforge-test";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string output;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) output.append(buf, n);
  const int rc = pclose(p);
  ASSERT_EQ(rc, 0) << output;
  const json got = json::parse(output, nullptr, false);
  ASSERT_FALSE(got.is_discarded()) << output;
  EXPECT_EQ(got["completion"], want_completion);
  EXPECT_EQ(got["completion_finish"], "length");
  EXPECT_EQ(got["completion_tokens"], 24);
  EXPECT_EQ(got["completion_stream"], want_completion);
  EXPECT_EQ(got["chat"], want_chat.outputs[0].text);
  EXPECT_EQ(got["chat_role"], "assistant");
  EXPECT_EQ(got["chat_stream"], want_chat.outputs[0].text);
  EXPECT_EQ(got["chat_stream_completion_tokens"], want_chat.outputs[0].token_ids.size());
  EXPECT_EQ(got["models"], json::array({"stories260K"}));
  EXPECT_EQ(got["error_status"], 400);
  // The tool-calling flow: a required call parses and validates, its result goes back in the
  // history, and the client's stream helper reassembles the same call.
  EXPECT_EQ(got["tool_finish"], "tool_calls") << output;
  ASSERT_EQ(got["tool_calls"].size(), 1u) << output;
  EXPECT_EQ(got["tool_calls"][0]["name"], "add");
  const json args =
      json::parse(got["tool_calls"][0]["arguments"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(args.is_object()) << output;
  EXPECT_TRUE(args["a"].is_number_integer() && args["b"].is_number_integer()) << output;
  EXPECT_TRUE(got["tool_answer_is_text"].get<bool>()) << output;
  EXPECT_EQ(got["tool_stream_finish"], "tool_calls") << output;
  ASSERT_EQ(got["tool_stream_calls"].size(), 1u) << output;
  EXPECT_EQ(got["tool_stream_calls"][0]["name"], "add");
  EXPECT_EQ(got["tool_stream_calls"][0]["arguments"], got["tool_calls"][0]["arguments"]);
}

}  // namespace
}  // namespace kvforge::server::testing
