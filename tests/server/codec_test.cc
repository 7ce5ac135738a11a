// Unit tests of the server's pieces that need no socket: the SSE parser, the Prometheus
// registry, the codec's decoders/encoders and the Status -> HTTP mapping.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/json.h"
#include "server/metrics.h"
#include "server/openai_codec.h"
#include "server/routes.h"
#include "server/sse.h"

namespace kvforge::server {
namespace {

using json = nlohmann::json;

std::vector<std::string> ParseSse(const std::vector<std::string>& pieces) {
  std::vector<std::string> out;
  SseParser p([&](const std::string& d) { out.push_back(d); });
  for (const auto& piece : pieces) p.Feed(piece);
  p.Finish();
  return out;
}

TEST(SseTest, FramingAndParsing) {
  EXPECT_EQ(SseEvent("{\"a\":1}"), "data: {\"a\":1}\n\n");
  const std::string stream =
      SseEvent("one") + std::string(kSseKeepAlive) + SseEvent("two") + std::string(kSseDone);
  // Any split of the bytes gives the same events.
  for (size_t cut = 0; cut <= stream.size(); ++cut)
    EXPECT_EQ(ParseSse({stream.substr(0, cut), stream.substr(cut)}),
              (std::vector<std::string>{"one", "two", "[DONE]"}))
        << cut;
  EXPECT_EQ(ParseSse({"data:a\r\ndata: b\r\n\r\nevent: x\nid: 3\ndata: c\n\n: note\n\ndata: tail"}),
            (std::vector<std::string>{"a\nb", "c", "tail"}));
  EXPECT_EQ(ParseSse({"data: x\r", "\ndata: y\r\r"}), (std::vector<std::string>{"x\ny"}));
}

TEST(MetricsTest, PrometheusTextFormat) {
  MetricsRegistry reg;
  Counter* c = reg.AddCounter("t_total", "A counter.");
  Gauge* g = reg.AddGauge("t_gauge", "A gauge.");
  LabeledCounter* l = reg.AddLabeledCounter("t_http_total", "Codes.", "code");
  Histogram* h = reg.AddHistogram("t_seconds", "Latency.", {0.1, 0.005, 1});
  c->Inc();
  c->Inc(2);
  g->Set(0.25);
  l->Inc("200");
  l->Inc("200");
  l->Inc("4\"0\\4");
  h->Observe(0.005);  // le is inclusive
  h->Observe(0.05);
  h->Observe(7);
  EXPECT_EQ(
      reg.Render(),
      "# HELP t_total A counter.\n# TYPE t_total counter\nt_total 3\n"
      "# HELP t_gauge A gauge.\n# TYPE t_gauge gauge\nt_gauge 0.25\n"
      "# HELP t_http_total Codes.\n# TYPE t_http_total counter\nt_http_total{code=\"200\"} 2\n"
      "t_http_total{code=\"4\\\"0\\\\4\"} 1\n"
      "# HELP t_seconds Latency.\n# TYPE t_seconds histogram\n"
      "t_seconds_bucket{le=\"0.005\"} 1\nt_seconds_bucket{le=\"0.1\"} "
      "2\nt_seconds_bucket{le=\"1\"} 2\n"
      "t_seconds_bucket{le=\"+Inf\"} 3\nt_seconds_sum " +
          PrometheusNumber(0.0 + 0.005 + 0.05 + 7) + "\nt_seconds_count 3\n");
  EXPECT_EQ(PrometheusNumber(1e20), "1e+20");
  EXPECT_EQ(PrometheusNumber(0.1), "0.1");
}

TEST(MetricsTest, ConstantLabelsFollowSampleLabels) {
  MetricsRegistry reg;
  const MetricLabels model = {{"model_name", "m\"1"}};
  reg.AddGauge("vllm:g", "G.", false, model)->Set(2);
  reg.AddLabeledCounter("vllm:r_total", "R.", "finished_reason", model)->Inc("stop");
  reg.AddHistogram("vllm:h_seconds", "H.", {1}, model)->Observe(0.5);
  EXPECT_EQ(reg.Render(),
            "# HELP vllm:g G.\n# TYPE vllm:g gauge\nvllm:g{model_name=\"m\\\"1\"} 2\n"
            "# HELP vllm:r_total R.\n# TYPE vllm:r_total counter\n"
            "vllm:r_total{finished_reason=\"stop\",model_name=\"m\\\"1\"} 1\n"
            "# HELP vllm:h_seconds H.\n# TYPE vllm:h_seconds histogram\n"
            "vllm:h_seconds_bucket{le=\"1\",model_name=\"m\\\"1\"} 1\n"
            "vllm:h_seconds_bucket{le=\"+Inf\",model_name=\"m\\\"1\"} 1\n"
            "vllm:h_seconds_sum{model_name=\"m\\\"1\"} 0.5\n"
            "vllm:h_seconds_count{model_name=\"m\\\"1\"} 1\n");
}

TEST(CodecTest, CompletionRequestFields) {
  CompletionRequest r;
  std::string param;
  ASSERT_TRUE(ParseCompletionRequest(
                  R"({"prompt":"hi","max_tokens":7,"temperature":0.5,"top_p":0.9,"top_k":5,)"
                  R"("min_p":0.1,"n":2,"stop":"x","seed":42,"presence_penalty":0.5,)"
                  R"("frequency_penalty":-0.5,"repetition_penalty":1.1,"logprobs":0,)"
                  R"("ignore_eos":true,"priority":-2,"cache_salt":"s","echo":true,)"
                  R"("stream":true,"stream_options":{"include_usage":true},)"
                  R"("stop_token_ids":[2,3]})",
                  {}, &r, &param)
                  .ok());
  const SamplingParams& p = r.gen.params;
  EXPECT_EQ(p.max_tokens, 7);
  EXPECT_FLOAT_EQ(p.temperature, 0.5f);
  EXPECT_FLOAT_EQ(p.top_p, 0.9f);
  EXPECT_EQ(p.top_k, 5);
  EXPECT_FLOAT_EQ(p.min_p, 0.1f);
  EXPECT_EQ(p.n, 2);
  EXPECT_EQ(p.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(p.seed, 42u);
  EXPECT_FLOAT_EQ(p.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
  EXPECT_EQ(r.gen.logprobs, 0);
  EXPECT_EQ(p.logprobs, 1) << "the engine reports at least one alternative";
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_EQ(r.gen.priority, -2);
  EXPECT_EQ(r.gen.cache_salt, "s");
  EXPECT_TRUE(r.gen.echo && r.gen.stream && r.gen.include_usage && r.gen.max_tokens_given);
  EXPECT_EQ(p.stop_token_ids, (std::vector<int32_t>{2, 3}));
  // OpenAI defaults, not the CLI's.
  CompletionRequest d;
  ASSERT_TRUE(ParseCompletionRequest(R"({"prompt":[1,2,3]})", {}, &d, &param).ok());
  EXPECT_FLOAT_EQ(d.gen.params.temperature, 1.0f);
  EXPECT_FLOAT_EQ(d.gen.params.top_p, 1.0f);
  EXPECT_EQ(d.gen.params.top_k, 0);
  EXPECT_FLOAT_EQ(d.gen.params.min_p, 0.0f);
  EXPECT_FALSE(d.gen.max_tokens_given);
  EXPECT_EQ(d.gen.logprobs, -1);
  ASSERT_EQ(d.prompts.size(), 1u);
  EXPECT_TRUE(d.prompts[0].is_tokens);
  EXPECT_EQ(d.prompts[0].tokens, (std::vector<int32_t>{1, 2, 3}));
}

TEST(CodecTest, ChatMessagesKeepEveryFieldForTheTemplate) {
  ChatRequest r;
  std::string param;
  ASSERT_TRUE(
      ParseChatRequest(
          R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},)"
          R"({"type":"text","text":"b"}],"name":"bob"},{"role":"assistant","content":null,)"
          R"("tool_calls":[{"id":"1"}]}],"tools":[{"type":"function","function":{"name":"f"}}],)"
          R"("chat_template_kwargs":{"enable_thinking":false},"add_generation_prompt":false})",
          {}, &r, &param)
          .ok());
  ASSERT_EQ(r.chat.messages.size(), 2u);
  EXPECT_EQ(r.chat.messages[0].second, "a\nb");
  const json m = json::parse(*chat::ToJson(r.chat.template_messages));
  EXPECT_EQ(m[0]["content"], "a\nb");
  EXPECT_EQ(m[0]["name"], "bob");
  EXPECT_TRUE(m[1]["content"].is_null());
  EXPECT_EQ(m[1]["tool_calls"][0]["id"], "1");
  EXPECT_EQ(json::parse(*chat::ToJson(r.chat.tools))[0]["type"], "function");
  ASSERT_EQ(r.chat.template_kwargs.size(), 1u);
  EXPECT_EQ(r.chat.template_kwargs[0].first, "enable_thinking");
  EXPECT_EQ(*chat::ToJson(r.chat.template_kwargs[0].second), "false");
  EXPECT_FALSE(r.chat.add_generation_prompt);
  EXPECT_EQ(r.gen.logprobs, -1);
}

TEST(CodecTest, ChatRolesAreTheApisAndTheTemplates) {
  std::string param;
  for (const char* role : {"system", "developer", "user", "assistant", "tool", "function"}) {
    ChatRequest r;
    const std::string body =
        std::string(R"({"messages":[{"role":")") + role + R"(","content":"hi"}]})";
    EXPECT_TRUE(ParseChatRequest(body, {}, &r, &param).ok()) << role;
  }
  const std::string wizard =
      R"({"messages":[{"role":"user","content":"a"},{"role":"wizard","content":"b"}]})";
  ChatRequest r;
  Status s = ParseChatRequest(wizard, {}, &r, &param);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(param, "messages[1].role");
  EXPECT_NE(s.message().find("'wizard'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("developer"), std::string::npos) << s.message();
  // A role the model's template names is accepted, and listed in the error.
  CodecLimits limits;
  limits.template_roles = {"ipython", "user"};
  const std::string ipython = R"({"messages":[{"role":"ipython","content":"42"}]})";
  EXPECT_FALSE(ParseChatRequest(ipython, {}, &r, &param).ok());
  EXPECT_TRUE(ParseChatRequest(ipython, limits, &r, &param).ok());
  s = ParseChatRequest(wizard, limits, &r, &param);
  EXPECT_NE(s.message().find("function, ipython (got"), std::string::npos) << s.message();
  TokenizeRequest t;
  EXPECT_FALSE(ParseTokenizeRequest(wizard, {}, &t, &param).ok());
  EXPECT_EQ(param, "messages[1].role");
}

TEST(CodecTest, EncodersWriteTheOpenAiShapes) {
  GenerationResponse r;
  r.id = "cmpl-1";
  r.created = 5;
  r.model = "m";
  Choice c;
  c.text = "bad \xff utf8";
  c.finish_reason = "stop";
  r.choices.push_back(c);
  r.with_usage = true;
  r.usage.prompt_tokens = 3;
  r.usage.completion_tokens = 4;
  const json j = json::parse(EncodeCompletion(r));
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "bad \xef\xbf\xbd utf8") << "invalid UTF-8 becomes U+FFFD";
  EXPECT_EQ(j["usage"]["total_tokens"], 7);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  r.with_usage = false;
  r.null_usage = true;
  r.choices[0].finish_reason.clear();
  r.choices[0].role_delta = true;
  const json chunk = json::parse(EncodeChatChunk(r));
  EXPECT_EQ(chunk["object"], "chat.completion.chunk");
  EXPECT_TRUE(chunk["usage"].is_null());
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(chunk["choices"][0]["delta"]["role"], "assistant");
  ApiError e;
  e.http_status = 400;
  e.message = "m";
  e.param = "p";
  EXPECT_EQ(
      json::parse(EncodeError(e)),
      json::parse(
          R"({"error":{"message":"m","type":"invalid_request_error","param":"p","code":null}})"));
}

TEST(CodecTest, StreamChunkDecoding) {
  auto c = DecodeStreamChunk(
      R"({"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->text, "hi");
  EXPECT_EQ(c->num_choices, 1);
  auto u = DecodeStreamChunk(R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":9}})");
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->with_usage);
  EXPECT_EQ(u->usage.completion_tokens, 9);
  auto e = DecodeStreamChunk(R"({"error":{"message":"boom"}})");
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->is_error);
  EXPECT_EQ(e->error_message, "boom");
  EXPECT_FALSE(DecodeStreamChunk("not json").ok());
  EXPECT_EQ(*DecodeFirstModelId(R"({"object":"list","data":[{"id":"a"},{"id":"b"}]})"), "a");
  BenchRequest br;
  br.model = "m";
  br.chat = true;
  br.prompt = "p";
  const json b = json::parse(EncodeBenchRequest(br));
  EXPECT_EQ(b["messages"][0]["content"], "p");
  EXPECT_EQ(b["stream"], true);
  EXPECT_EQ(b["stream_options"]["include_usage"], true);
}

TEST(RoutesTest, StatusToHttp) {
  EXPECT_EQ(ErrorFromStatus(Status::InvalidArgument("x")).http_status, 400);
  EXPECT_EQ(ErrorFromStatus(Status::NotFound("x")).http_status, 404);
  EXPECT_EQ(ErrorFromStatus(Status::ResourceExhausted("x")).http_status, 429);
  EXPECT_EQ(ErrorFromStatus(Status::Unavailable("x")).http_status, 503);
  EXPECT_EQ(ErrorFromStatus(Status::Unimplemented("x")).http_status, 501);
  EXPECT_EQ(ErrorFromStatus(Status::Internal("x")).http_status, 500);
  EXPECT_EQ(ErrorFromStatus(Status::Internal("x")).type, "server_error");
  EXPECT_EQ(ErrorFromStatus(Status::InvalidArgument("x"), "n").param, "n");
  HttpRequest req;
  req.headers = {{"authorization", "Bearer k1"}};
  EXPECT_TRUE(HasBearerKey(req, "k1"));
  EXPECT_FALSE(HasBearerKey(req, "k2"));
  EXPECT_FALSE(HasBearerKey(req, "k"));
  EXPECT_FALSE(HasBearerKey(req, "k12"));
}

}  // namespace
}  // namespace kvforge::server
