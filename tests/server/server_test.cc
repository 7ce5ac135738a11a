// The OpenAI-compatible server end to end over HTTP on 127.0.0.1: every endpoint, streaming and
// not, n > 1, several prompts, stop strings across token boundaries, logprobs, chat templates,
// tokenize/detokenize. Greedy outputs must equal the engine's own (no HTTP) outputs.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "server_test_util.h"

namespace kvforge::server::testing {
namespace {

class ServerTest : public SharedServerTest<ServerTest> {};

const char kPrompt[] = "Once upon a time";

TEST_F(ServerTest, HealthAndModels) {
  Reply health = Get(url(), "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body["status"], "ok");
  Reply models = Get(url(), "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.body["object"], "list");
  ASSERT_EQ(models.body["data"].size(), 1u);
  EXPECT_EQ(models.body["data"][0]["id"], "stories260K");
  EXPECT_EQ(models.body["data"][0]["object"], "model");
  EXPECT_EQ(models.body["data"][0]["max_model_len"], 2048);
  EXPECT_TRUE(models.body["data"][0]["created"].is_number_integer());
}

TEST_F(ServerTest, CompletionMatchesTheEngine) {
  const std::string want = h_->GreedyText(kPrompt, 24);
  ASSERT_FALSE(want.empty());
  Reply r = Post(
      url(), "/v1/completions",
      json{{"model", "stories260K"}, {"prompt", kPrompt}, {"max_tokens", 24}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.Header("Content-Type"), "application/json");
  const json& b = r.body;
  EXPECT_EQ(b["object"], "text_completion");
  EXPECT_EQ(b["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(b["model"], "stories260K");
  EXPECT_TRUE(b["created"].is_number_integer());
  ASSERT_EQ(b["choices"].size(), 1u);
  EXPECT_EQ(b["choices"][0]["index"], 0);
  EXPECT_EQ(b["choices"][0]["text"], want);
  EXPECT_EQ(b["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(b["choices"][0]["logprobs"].is_null());
  const json& u = b["usage"];
  EXPECT_EQ(u["prompt_tokens"], h_->Tokenize(kPrompt).size());
  EXPECT_EQ(u["completion_tokens"], 24);
  EXPECT_EQ(u["total_tokens"], u["prompt_tokens"].get<int>() + 24);
  EXPECT_TRUE(u["prompt_tokens_details"]["cached_tokens"].is_number_integer());
}

TEST_F(ServerTest, PrefixCacheHitsAreReportedPerSalt) {
  std::string prompt;
  for (int i = 0; i < 6; ++i) prompt += "Once upon a time there was a little girl named Lily. ";
  auto ask = [&](const std::string& salt) {
    Reply r =
        Post(url(), "/v1/completions",
             json{{"prompt", prompt}, {"max_tokens", 2}, {"temperature", 0}, {"cache_salt", salt}});
    EXPECT_EQ(r.status, 200) << r.raw;
    return r.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  };
  EXPECT_EQ(ask("server-test-a"), 0);
  EXPECT_GT(ask("server-test-a"), 32);  // same tenant: the prompt's full blocks are reused
  EXPECT_EQ(ask("server-test-b"), 0);   // another tenant never sees them
}

TEST_F(ServerTest, KvPolicyPerRequestIsAcceptedOrRejectedWith400) {
  std::string prompt;
  for (int i = 0; i < 6; ++i) prompt += "Once upon a time there was a little girl named Lily. ";
  const json base = {
      {"prompt", prompt}, {"max_tokens", 40}, {"temperature", 0}, {"ignore_eos", true}};
  for (const json& policy : {json("none"), json{{"name", "snapkv"}, {"budget", 0.25}},
                             json{{"name", "streaming"}, {"budget", 32}, {"sinks", 4}},
                             json{{"name", "h2o"}, {"budget", 24}, {"window", 8}},
                             json{{"name", "snapkv"}, {"budget", 0.25}, {"heads", "per_head"}},
                             json{{"name", "h2o"}, {"budget", 24}, {"heads", "adaptive"}}}) {
    json req = base;
    req["kv_policy"] = policy;
    Reply r = Post(url(), "/v1/completions", req);
    EXPECT_EQ(r.status, 200) << policy.dump() << ": " << r.raw;
    EXPECT_EQ(r.body["usage"]["completion_tokens"], 40) << policy.dump();
  }
  json by_name = base;
  by_name["kv_policy"] = "tova";
  by_name["kv_budget"] = 20;
  EXPECT_EQ(Post(url(), "/v1/completions", by_name).status, 200);
  for (const json& bad :
       {json("bogus"), json(7), json{{"name", "snapkv"}}, json{{"budget", 10}},
        json{{"name", "snapkv"}, {"budget", 0.2}, {"pool_kernel", 4}},
        json{{"name", "streaming"}, {"budget", 3}}, json{{"name", "h2o"}, {"budget", 2.5}},
        json{{"name", "h2o"}, {"budget", -1}},
        json{{"name", "snapkv"}, {"budget", 0.2}, {"heads", "bogus"}},
        json{{"name", "snapkv"}, {"budget", 0.2}, {"heads", 1}},
        json{{"name", "streaming"}, {"budget", 32}, {"heads", "per_head"}},
        json{{"name", "h2o"}, {"budget", 24}, {"windw", 8}}}) {  // a misspelt key
    json req = base;
    req["kv_policy"] = bad;
    Reply r = Post(url(), "/v1/completions", req);
    EXPECT_EQ(r.status, 400) << bad.dump() << ": " << r.raw;
    EXPECT_EQ(r.body["error"]["type"], "invalid_request_error") << bad.dump();
    EXPECT_TRUE(r.body["error"]["param"].get<std::string>().rfind("kv_", 0) == 0) << r.raw;
  }
  json orphan = base;
  orphan["kv_budget"] = 10;
  EXPECT_EQ(Post(url(), "/v1/completions", orphan).status, 400);
  // The chat endpoint reads the same field.
  Reply chat = Post(url(), "/v1/chat/completions",
                    json{{"messages", json::array({{{"role", "user"}, {"content", prompt}}})},
                         {"max_tokens", 8},
                         {"kv_policy", {{"name", "knorm"}, {"budget", 16}}}});
  EXPECT_EQ(chat.status, 200) << chat.raw;
}

TEST_F(ServerTest, ModelIsOptionalButMustMatch) {
  Reply ok = Post(url(), "/v1/completions",
                  json{{"prompt", kPrompt}, {"max_tokens", 2}, {"temperature", 0}});
  EXPECT_EQ(ok.status, 200);
  Reply bad = Post(url(), "/v1/completions",
                   json{{"model", "gpt-4"}, {"prompt", kPrompt}, {"max_tokens", 2}});
  EXPECT_EQ(bad.status, 404);
  EXPECT_EQ(bad.body["error"]["code"], "model_not_found");
  EXPECT_EQ(bad.body["error"]["param"], "model");
}

TEST_F(ServerTest, DefaultMaxTokensIs16ForCompletions) {
  Reply r = Post(url(), "/v1/completions",
                 json{{"prompt", kPrompt}, {"temperature", 0}, {"ignore_eos", true}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["usage"]["completion_tokens"], 16);
}

TEST_F(ServerTest, StreamingCompletionEqualsNonStreaming) {
  const std::string want = h_->GreedyText(kPrompt, 30);
  StreamReply s = PostStream(url(), "/v1/completions",
                             json{{"prompt", kPrompt},
                                  {"max_tokens", 30},
                                  {"temperature", 0},
                                  {"stream", true},
                                  {"stream_options", {{"include_usage", true}}}});
  ASSERT_TRUE(s.http.ok) << s.http.error;
  EXPECT_EQ(s.http.status, 200);
  EXPECT_EQ(FindHeader(s.http.headers, "Content-Type"), "text/event-stream");
  EXPECT_TRUE(s.done) << "the stream must end with data: [DONE]";
  EXPECT_EQ(s.text[0], want);
  EXPECT_EQ(s.finish[0], "length");
  ASSERT_FALSE(s.usage.is_null());
  EXPECT_EQ(s.usage["completion_tokens"], 30);
  EXPECT_EQ(s.usage["prompt_tokens"], h_->Tokenize(kPrompt).size());
  ASSERT_GE(s.events.size(), 3u);
  for (size_t i = 0; i + 1 < s.events.size(); ++i) {
    EXPECT_EQ(s.events[i]["object"], "text_completion");
    EXPECT_TRUE(s.events[i]["usage"].is_null())
        << "include_usage: every chunk but the last has usage: null";
    EXPECT_EQ(s.events[i]["id"], s.events[0]["id"]);
  }
  EXPECT_TRUE(s.events.back()["choices"].empty());
}

TEST_F(ServerTest, StreamWithoutUsageHasNoUsageField) {
  StreamReply s = PostStream(
      url(), "/v1/completions",
      json{{"prompt", kPrompt}, {"max_tokens", 5}, {"temperature", 0}, {"stream", true}});
  ASSERT_TRUE(s.done);
  for (const json& e : s.events) EXPECT_FALSE(e.contains("usage"));
  EXPECT_TRUE(s.usage.is_null());
}

TEST_F(ServerTest, ParallelSamplingAndSeveralPrompts) {
  const std::string a = h_->GreedyText("Once upon a time", 12), b = h_->GreedyText("The dog", 12);
  Reply r = Post(url(), "/v1/completions",
                 json{{"prompt", {"Once upon a time", "The dog"}},
                      {"n", 3},
                      {"max_tokens", 12},
                      {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& ch = r.body["choices"];
  ASSERT_EQ(ch.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(ch[i]["index"], i);
    EXPECT_EQ(ch[i]["text"], i < 3 ? a : b) << i;  // greedy: all n completions agree
  }
  EXPECT_EQ(r.body["usage"]["completion_tokens"], 6 * 12);
  EXPECT_EQ(r.body["usage"]["prompt_tokens"],
            h_->Tokenize("Once upon a time").size() + h_->Tokenize("The dog").size());

  StreamReply s = PostStream(url(), "/v1/completions",
                             json{{"prompt", {"Once upon a time", "The dog"}},
                                  {"n", 2},
                                  {"max_tokens", 12},
                                  {"temperature", 0},
                                  {"stream", true}});
  ASSERT_TRUE(s.done);
  ASSERT_EQ(s.text.size(), 4u);
  EXPECT_EQ(s.text[0], a);
  EXPECT_EQ(s.text[1], a);
  EXPECT_EQ(s.text[2], b);
  EXPECT_EQ(s.text[3], b);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(s.finish[i], "length");
}

TEST_F(ServerTest, TokenPrompts) {
  const std::vector<int32_t> ids = h_->Tokenize(kPrompt);
  const std::string want = h_->GreedyText(kPrompt, 10);
  Reply one =
      Post(url(), "/v1/completions", json{{"prompt", ids}, {"max_tokens", 10}, {"temperature", 0}});
  ASSERT_EQ(one.status, 200) << one.raw;
  EXPECT_EQ(one.body["choices"][0]["text"], want);
  Reply two =
      Post(url(), "/v1/completions",
           json{{"prompt", json::array({ids, ids})}, {"max_tokens", 10}, {"temperature", 0}});
  ASSERT_EQ(two.status, 200) << two.raw;
  ASSERT_EQ(two.body["choices"].size(), 2u);
  EXPECT_EQ(two.body["choices"][1]["text"], want);
}

TEST_F(ServerTest, EchoPrependsThePrompt) {
  const std::string want = h_->GreedyText(kPrompt, 6);
  Reply r = Post(url(), "/v1/completions",
                 json{{"prompt", kPrompt}, {"max_tokens", 6}, {"temperature", 0}, {"echo", true}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["choices"][0]["text"], std::string(kPrompt) + want);
}

// A stop string that starts inside one token and ends inside the next.
TEST_F(ServerTest, StopStringAcrossTokenBoundary) {
  Reply probe =
      Post(url(), "/v1/completions",
           json{{"prompt", kPrompt}, {"max_tokens", 40}, {"temperature", 0}, {"logprobs", 0}});
  ASSERT_EQ(probe.status, 200) << probe.raw;
  const std::string text = probe.body["choices"][0]["text"];
  const json& tokens = probe.body["choices"][0]["logprobs"]["tokens"];
  ASSERT_EQ(tokens.size(), 40u);
  std::string stop;
  size_t offset = 0;
  for (size_t k = 4; k + 1 < tokens.size(); ++k) {
    offset = 0;
    for (size_t j = 0; j < k; ++j) offset += tokens[j].get<std::string>().size();
    const std::string a = tokens[k], b = tokens[k + 1];
    if (a.size() >= 2 && b.size() >= 2) {
      stop = a.substr(a.size() - 2) + b.substr(0, 2);
      offset += a.size() - 2;
      break;
    }
  }
  ASSERT_FALSE(stop.empty());
  const size_t cut = text.find(stop);
  ASSERT_NE(cut, std::string::npos);
  ASSERT_LE(cut, offset);
  const std::string want = text.substr(0, cut);

  Reply r = Post(url(), "/v1/completions",
                 json{{"prompt", kPrompt}, {"max_tokens", 40}, {"temperature", 0}, {"stop", stop}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["choices"][0]["text"], want) << "stop " << stop;
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "stop");

  StreamReply s = PostStream(url(), "/v1/completions",
                             json{{"prompt", kPrompt},
                                  {"max_tokens", 40},
                                  {"temperature", 0},
                                  {"stop", {"zzzz-never", stop}},
                                  {"stream", true}});
  ASSERT_TRUE(s.done);
  EXPECT_EQ(s.text[0], want);
  EXPECT_EQ(s.finish[0], "stop");
}

TEST_F(ServerTest, CompletionLogprobs) {
  Reply r = Post(url(), "/v1/completions",
                 json{{"prompt", kPrompt}, {"max_tokens", 8}, {"temperature", 0}, {"logprobs", 3}});
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& lp = r.body["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 8u);
  ASSERT_EQ(lp["token_logprobs"].size(), 8u);
  ASSERT_EQ(lp["top_logprobs"].size(), 8u);
  ASSERT_EQ(lp["text_offset"].size(), 8u);
  std::string joined;
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
    EXPECT_LE(lp["top_logprobs"][i].size(), 3u);
    EXPECT_GE(lp["top_logprobs"][i].size(), 1u);
    EXPECT_EQ(lp["text_offset"][i], joined.size());
    joined += lp["tokens"][i].get<std::string>();
  }
  EXPECT_EQ(joined, r.body["choices"][0]["text"]);
}

TEST_F(ServerTest, ChatCompletionStreamingAndNot) {
  const json messages = {{{"role", "system"}, {"content", "You tell stories."}},
                         {{"role", "user"}, {"content", "Once upon a time"}}};
  // The reference: the prompt tokens the server builds (/tokenize with messages) run directly.
  Reply tok = Post(url(), "/tokenize", json{{"messages", messages}});
  ASSERT_EQ(tok.status, 200) << tok.raw;
  const std::vector<int32_t> ids = tok.body["tokens"];
  EXPECT_EQ(ids.front(), 1) << "BOS: the default template does not write one itself";
  const RequestOutput ref = h_->Reference(ids, Greedy(20));

  Reply r = Post(url(), "/v1/chat/completions",
                 json{{"messages", messages}, {"max_tokens", 20}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["object"], "chat.completion");
  EXPECT_EQ(r.body["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(r.body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(r.body["choices"][0]["message"]["content"], ref.outputs[0].text);
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], ref.outputs[0].finish_reason);
  EXPECT_EQ(r.body["usage"]["prompt_tokens"], ids.size());

  StreamReply s = PostStream(url(), "/v1/chat/completions",
                             json{{"messages", messages},
                                  {"max_completion_tokens", 20},
                                  {"temperature", 0},
                                  {"stream", true},
                                  {"stream_options", {{"include_usage", true}}}});
  ASSERT_TRUE(s.done);
  ASSERT_GE(s.events.size(), 3u);
  EXPECT_EQ(s.events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(s.events[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(s.text[0], ref.outputs[0].text);
  EXPECT_EQ(s.finish[0], ref.outputs[0].finish_reason);
  EXPECT_EQ(s.usage["completion_tokens"], ref.outputs[0].token_ids.size());
}

TEST(ServerChatTest, ChatDefaultsToTheRestOfTheContext) {
  EngineConfig c = TestEngineConfig();
  c.max_model_len = 96;
  auto h = Harness::Start(c);
  ASSERT_NE(h, nullptr);
  Reply r = Post(h->url(), "/v1/chat/completions",
                 json{{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                      {"temperature", 0},
                      {"ignore_eos", true}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["usage"]["total_tokens"], 96);
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "length");
}

TEST_F(ServerTest, ChatContentPartsAndLogprobs) {
  const json parts = {
      {{"role", "user"},
       {"content",
        {{{"type", "text"}, {"text", "Once upon"}}, {{"type", "text"}, {"text", "a time"}}}}}};
  const json joined = {{{"role", "user"}, {"content", "Once upon\na time"}}};
  Reply a = Post(url(), "/tokenize", json{{"messages", parts}});
  Reply b = Post(url(), "/tokenize", json{{"messages", joined}});
  ASSERT_EQ(a.status, 200);
  EXPECT_EQ(a.body["tokens"], b.body["tokens"]);
  Reply r = Post(url(), "/v1/chat/completions",
                 json{{"messages", parts},
                      {"max_tokens", 5},
                      {"temperature", 0},
                      {"logprobs", true},
                      {"top_logprobs", 2}});
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& content = r.body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 5u);
  for (const json& t : content) {
    EXPECT_TRUE(t["token"].is_string());
    EXPECT_LE(t["logprob"].get<double>(), 0.0);
    EXPECT_TRUE(t["bytes"].is_array());
    EXPECT_EQ(t["top_logprobs"].size(), 2u);
  }
}

TEST_F(ServerTest, ChatTemplateErrorsAre400) {
  // The default template concatenates content: a null content is a template error.
  Reply r = Post(url(), "/v1/chat/completions",
                 json{{"messages", {{{"role", "user"}, {"content", nullptr}}}}});
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_NE(r.body["error"]["message"].get<std::string>().find("chat template"), std::string::npos)
      << r.raw;
  EXPECT_EQ(r.body["error"]["param"], "messages");
}

TEST_F(ServerTest, UnknownChatRoleIs400) {
  Reply r = Post(url(), "/v1/chat/completions",
                 json{{"messages", {{{"role", "wizard"}, {"content", "hi"}}}}, {"max_tokens", 2}});
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_EQ(r.body["error"]["type"], "invalid_request_error") << r.raw;
  EXPECT_EQ(r.body["error"]["param"], "messages[0].role") << r.raw;
  Reply ok = Post(url(), "/v1/chat/completions",
                  json{{"messages",
                        {{{"role", "developer"}, {"content", "Be brief."}},
                         {{"role", "user"}, {"content", "hi"}}}},
                       {"max_tokens", 2}});
  EXPECT_EQ(ok.status, 200) << ok.raw;
}

TEST_F(ServerTest, TokenizeAndDetokenize) {
  Reply t = Post(url(), "/tokenize", json{{"prompt", "Hello world"}, {"return_token_strs", true}});
  ASSERT_EQ(t.status, 200) << t.raw;
  const std::vector<int32_t> ids = t.body["tokens"];
  EXPECT_EQ(ids, h_->Tokenize("Hello world"));
  EXPECT_EQ(t.body["count"], ids.size());
  EXPECT_EQ(t.body["max_model_len"], 2048);
  EXPECT_EQ(t.body["token_strs"].size(), ids.size());
  Reply no_bos =
      Post(url(), "/tokenize", json{{"prompt", "Hello world"}, {"add_special_tokens", false}});
  EXPECT_EQ(no_bos.body["count"], ids.size() - 1);
  Reply d = Post(url(), "/detokenize", json{{"tokens", ids}});
  ASSERT_EQ(d.status, 200);
  EXPECT_EQ(d.body["prompt"], " Hello world");  // SentencePiece: the leading space marker
  Reply bad = Post(url(), "/detokenize", json{{"tokens", {1, 999999}}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["param"], "tokens");
}

TEST_F(ServerTest, MetricsExposition) {
  ASSERT_EQ(Post(url(), "/v1/completions",
                 json{{"prompt", kPrompt}, {"max_tokens", 4}, {"temperature", 0}})
                .status,
            200);
  Reply r = Get(url(), "/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("Content-Type").rfind("text/plain; version=0.0.4", 0), 0u);
  for (const char* name :
       {"kvforge_requests_running", "kvforge_requests_waiting", "kvforge_kv_cache_usage",
        "kvforge_prefix_cache_queries_total", "kvforge_prefix_cache_hits_total",
        "kvforge_preemptions_total", "kvforge_itl_limited_steps_total",
        "kvforge_prompt_tokens_total", "kvforge_generation_tokens_total",
        "kvforge_requests_aborted_total", "kvforge_http_requests_total",
        "kvforge_time_to_first_token_seconds", "kvforge_inter_token_latency_seconds",
        "kvforge_e2e_request_latency_seconds", "kvforge_request_queue_time_seconds"})
    EXPECT_NE(r.raw.find(std::string("# TYPE ") + name + " "), std::string::npos) << name;
  auto m = Metrics(url());
  EXPECT_GT(m["kvforge_generation_tokens_total"], 0);
  EXPECT_GT(m["kvforge_prompt_tokens_total"], 0);
  EXPECT_GT(m["kvforge_prefix_cache_queries_total"], 0);
  EXPECT_LE(m["kvforge_prefix_cache_hits_total"], m["kvforge_prefix_cache_queries_total"]);
  EXPECT_GT(m["kvforge_http_requests_total{code=\"200\"}"], 0);
  EXPECT_GT(m["kvforge_time_to_first_token_seconds_count"], 0);
  EXPECT_EQ(m["kvforge_time_to_first_token_seconds_bucket{le=\"+Inf\"}"],
            m["kvforge_time_to_first_token_seconds_count"]);
  EXPECT_GT(m["kvforge_inter_token_latency_seconds_count"], 0);
  EXPECT_GT(m["kvforge_e2e_request_latency_seconds_sum"], 0);
  // vLLM's names for the same quantities, labelled with the served model's id.
  const std::string l = "{model_name=\"stories260K\"}";
  EXPECT_EQ(m["vllm:generation_tokens_total" + l], m["kvforge_generation_tokens_total"]);
  EXPECT_EQ(m["vllm:prompt_tokens_total" + l], m["kvforge_prompt_tokens_total"]);
  EXPECT_EQ(m["vllm:time_to_first_token_seconds_count" + l],
            m["kvforge_time_to_first_token_seconds_count"]);
  EXPECT_GT(m["vllm:request_success_total{finished_reason=\"length\",model_name=\"stories260K\"}"],
            0);
  EXPECT_NE(r.raw.find("# TYPE vllm:e2e_request_latency_seconds histogram\n"), std::string::npos);
}

}  // namespace
}  // namespace kvforge::server::testing
