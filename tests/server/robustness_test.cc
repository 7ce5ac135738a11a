// The server under bad input and load: malformed and mistyped requests, oversized bodies (also
// chunked), context overflow, client disconnects mid-stream (abort + KV blocks freed), 64
// concurrent streaming clients, the queue limit (429), API keys (401), graceful shutdown, and
// the `kvforge serve` process on SIGTERM.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "server_test_util.h"

namespace kvforge::server::testing {
namespace {

class RobustnessTest : public SharedServerTest<RobustnessTest> {
 public:
  static ServerOptions Options() {
    ServerOptions o;
    o.max_body_bytes = 64 << 10;
    return o;
  }
};

struct BadCase {
  const char* path;
  std::string body;
  int status;
  const char* param;  // nullptr: not checked
};

TEST_F(RobustnessTest, BadRequestsGetOpenAiErrorsAndTheServerKeepsServing) {
  const std::string msg = R"("messages":[{"role":"user","content":"hi"}])";
  const std::vector<BadCase> cases = {
      {"/v1/completions", "", 400, nullptr},
      {"/v1/completions", "{", 400, nullptr},
      {"/v1/completions", "[1,2]", 400, nullptr},
      {"/v1/completions", "null", 400, nullptr},
      {"/v1/completions", R"({"prompt":"x",})", 400, nullptr},
      {"/v1/completions", R"({})", 400, "prompt"},
      {"/v1/completions", R"({"prompt":5})", 400, "prompt"},
      {"/v1/completions", R"({"prompt":{"a":1}})", 400, "prompt"},
      {"/v1/completions", R"({"prompt":[]})", 400, "prompt"},
      {"/v1/completions", R"({"prompt":["a",[1,2]]})", 400, "prompt"},
      {"/v1/completions", R"({"prompt":[[]]})", 400, "prompt"},
      {"/v1/completions", R"({"prompt":[1,-2]})", 400, "prompt"},
      {"/v1/completions", R"({"prompt":[1,99999]})", 400, "prompt"},
      {"/v1/completions", R"({"prompt":"x","max_tokens":-1})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt":"x","max_tokens":0})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt":"x","max_tokens":1e30})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt":"x","max_tokens":99999999999})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt":"x","max_tokens":2.5})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt":"x","max_tokens":"16"})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt":"x","max_tokens":100000})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt":"x","temperature":"hot"})", 400, "temperature"},
      {"/v1/completions", R"({"prompt":"x","temperature":-1})", 400, "temperature"},
      {"/v1/completions", R"({"prompt":"x","top_p":0})", 400, "top_p"},
      {"/v1/completions", R"({"prompt":"x","top_k":-5})", 400, "top_k"},
      {"/v1/completions", R"({"prompt":"x","n":0})", 400, "n"},
      {"/v1/completions", R"({"prompt":"x","n":1000})", 400, "n"},
      {"/v1/completions", R"({"prompt":"x","stop":5})", 400, "stop"},
      {"/v1/completions", R"({"prompt":"x","stop":[""]})", 400, "stop"},
      {"/v1/completions", R"({"prompt":"x","stream":"yes"})", 400, "stream"},
      {"/v1/completions", R"({"prompt":"x","stream_options":{"include_usage":1}})", 400,
       "stream_options.include_usage"},
      {"/v1/completions", R"({"prompt":"x","logprobs":true})", 400, "logprobs"},
      {"/v1/completions", R"({"prompt":"x","logprobs":50})", 400, "logprobs"},
      {"/v1/completions", R"({"prompt":"x","seed":"abc"})", 400, "seed"},
      {"/v1/completions", R"({"prompt":"x","presence_penalty":3})", 400, "presence_penalty"},
      {"/v1/completions", R"({"prompt":"x","model":7})", 400, "model"},
      {"/v1/completions", "{\"prompt\":\"\xff\xfe\"}", 400, nullptr},  // invalid UTF-8
      {"/v1/completions", R"({"prompt":"\ud800"})", 400, nullptr},     // lone surrogate
      {"/v1/completions", std::string(200, '[') + std::string(200, ']'), 400, nullptr},  // too deep
      {"/v1/chat/completions", R"({})", 400, "messages"},
      {"/v1/chat/completions", R"({"messages":[]})", 400, "messages"},
      {"/v1/chat/completions", R"({"messages":"hi"})", 400, "messages"},
      {"/v1/chat/completions", R"({"messages":[5]})", 400, "messages[0]"},
      {"/v1/chat/completions", R"({"messages":[{"content":"hi"}]})", 400, "messages[0].role"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":7}]})", 400,
       "messages[0].content"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})",
       400, "messages[0].content"},
      {"/v1/chat/completions", "{" + msg + R"(,"logprobs":3})", 400, "logprobs"},
      {"/v1/chat/completions", "{" + msg + R"(,"top_logprobs":2})", 400, "top_logprobs"},
      {"/v1/chat/completions", "{" + msg + R"(,"response_format":{"type":"xml"}})", 400,
       "response_format.type"},
      {"/v1/chat/completions", "{" + msg + R"(,"max_completion_tokens":-3})", 400,
       "max_completion_tokens"},
      {"/tokenize", R"({})", 400, "prompt"},
      {"/tokenize", R"({"prompt":1})", 400, "prompt"},
      {"/detokenize", R"({"tokens":"abc"})", 400, "tokens"},
      {"/detokenize", R"({"tokens":[1.5]})", 400, "tokens"},
  };
  for (const BadCase& c : cases) {
    Reply r = Post(url(), c.path, c.body);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.status, c.status) << c.path << " " << c.body << " -> " << r.raw;
    ASSERT_TRUE(r.body.is_object()) << r.raw;
    const json& e = r.body["error"];
    EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << r.raw;
    EXPECT_EQ(e["type"], "invalid_request_error") << r.raw;
    EXPECT_TRUE(e.contains("param") && e.contains("code")) << r.raw;
    if (c.param) {
      EXPECT_EQ(e["param"], c.param) << c.body << " -> " << r.raw;
    }
  }
  // Unknown fields are ignored; a JSON null means "not given".
  Reply ok =
      Post(url(), "/v1/completions",
           R"({"prompt":"Once","max_tokens":3,"temperature":0,"frobnicate":{"x":[1]},"top_p":null,)"
           R"("user":"u","cache_salt":"s","priority":3,"suffix":null})");
  EXPECT_EQ(ok.status, 200) << ok.raw;
  EXPECT_TRUE(WaitIdle(url()));
}

TEST_F(RobustnessTest, PromptLongerThanTheContext) {
  std::vector<int32_t> ids(3000, 403);
  ids[0] = 1;
  Reply r = Post(url(), "/v1/completions", json{{"prompt", ids}, {"max_tokens", 4}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(r.body["error"]["param"], "prompt");
  std::string words;
  for (int i = 0; i < 1500; ++i) words += " the cat";
  Reply chat = Post(url(), "/v1/chat/completions",
                    json{{"messages", {{{"role", "user"}, {"content", words}}}}});
  EXPECT_EQ(chat.status, 400);
  EXPECT_EQ(chat.body["error"]["param"], "messages");
}

TEST_F(RobustnessTest, UnknownRoutesAndMethods) {
  Reply r = Get(url(), "/v1/engines");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body["error"]["code"], "not_found");
  Reply m = Get(url(), "/v1/completions");
  EXPECT_EQ(m.status, 405);
  EXPECT_EQ(m.Header("Allow"), "POST");
  Reply long_path = Get(url(), "/" + std::string(4000, 'a'));
  EXPECT_EQ(long_path.status, 404);
}

TEST_F(RobustnessTest, OversizedBodyIs413) {
  const std::string big = "{\"prompt\":\"" + std::string(100 << 10, 'a') + "\"}";
  Reply r = Post(url(), "/v1/completions", big);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.body["error"]["code"], "payload_too_large");
  EXPECT_EQ(Get(url(), "/health").status, 200);
}

// A TCP connection to 127.0.0.1:port, or -1.
int ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Raw HTTP over a socket: what an HTTP library would not send.
std::string RawExchange(int port, const std::string& request) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return "";
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  for (size_t off = 0; off < request.size();) {
    const ssize_t n = send(fd, request.data() + off, request.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may close early
    off += static_cast<size_t>(n);
  }
  // No half-close: httplib drops requests from half-closed connections unanswered.
  std::string reply;
  char buf[4096];
  const std::regex content_length("Content-Length: ([0-9]+)", std::regex::icase);
  for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) {
    reply.append(buf, static_cast<size_t>(n));
    // Stop at the end of the first response (the server may keep the connection open).
    const size_t head_end = reply.find("\r\n\r\n");
    if (head_end == std::string::npos) continue;
    const std::string head = reply.substr(0, head_end);
    std::smatch m;
    if (std::regex_search(head, m, content_length) &&
        reply.size() >= head_end + 4 + std::stoul(m[1]))
      break;
  }
  close(fd);
  return reply;
}

TEST_F(RobustnessTest, OversizedChunkedBodyIs413) {
  std::string req =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
  const std::string chunk(8 << 10, 'a');
  for (int i = 0; i < 10; ++i) req += "2000\r\n" + chunk + "\r\n";
  req += "0\r\n\r\n";
  const std::string reply = RawExchange(h_->server().port(), req);
  EXPECT_EQ(reply.rfind("HTTP/1.1 413", 0), 0u) << reply.substr(0, 200);
  EXPECT_EQ(RawExchange(h_->server().port(), "GARBAGE\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);
  EXPECT_EQ(Get(url(), "/health").status, 200);
}

TEST_F(RobustnessTest, DisconnectMidStreamAbortsAndFreesTheBlocks) {
  ASSERT_TRUE(WaitIdle(url()));
  const double aborted_before = Metrics(url())["kvforge_requests_aborted_total"];
  int content_chunks = 0;
  StreamReply s =
      PostStream(url(), "/v1/completions",
                 json{{"prompt", "Once upon a time"},
                      {"max_tokens", 2000},
                      {"ignore_eos", true},
                      {"temperature", 0},
                      {"stream", true}},
                 {}, [&](const json& e) {
                   if (!e["choices"].empty() && !e["choices"][0]["text"].get<std::string>().empty())
                     ++content_chunks;
                   return content_chunks < 3;  // then hang up
                 });
  EXPECT_FALSE(s.http.ok);
  EXPECT_EQ(s.http.error, "Canceled");
  EXPECT_FALSE(s.done);
  EXPECT_TRUE(WaitIdle(url())) << "the aborted request's KV blocks must be freed";
  auto m = Metrics(url());
  EXPECT_EQ(m["kvforge_kv_cache_usage"], 0);
  EXPECT_EQ(m["kvforge_requests_aborted_total"], aborted_before + 1);
  EXPECT_LT(m["kvforge_generation_tokens_total"], 1e9);
  // Still serving.
  EXPECT_EQ(Post(url(), "/v1/completions", json{{"prompt", "Hi"}, {"max_tokens", 2}}).status, 200);
}

// Sends a non-streaming request over a raw socket and returns the open socket (-1 on failure).
int SendWithoutReading(int port, const std::string& body) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return -1;
  const std::string req =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
      "application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return -1;
  }
  return fd;
}

// A client that gives up on a non-streaming request: the server notices the closed socket
// between engine steps, aborts the generation and frees its KV (it would otherwise run all
// 2000 tokens).
TEST_F(RobustnessTest, DisconnectOfNonStreamingRequestAbortsAndFreesTheBlocks) {
  ASSERT_TRUE(WaitIdle(url()));
  auto before = Metrics(url());
  const double aborted_before = before["kvforge_requests_aborted_total"];
  const double generated_before = before["kvforge_generation_tokens_total"];
  const int fd = SendWithoutReading(h_->server().port(), json{{"prompt", "Once upon a time"},
                                                              {"max_tokens", 2000},
                                                              {"ignore_eos", true},
                                                              {"temperature", 0}}
                                                             .dump());
  ASSERT_GE(fd, 0);
  // Generating: wait (bounded) for the first tokens, then hang up.
  bool generating = false;
  for (int i = 0; i < 30000 && !generating; ++i) {
    // Running now, not only counted: a late count of an earlier request's tokens must not pass
    // for this one's (the hang-up would then come before it was admitted).
    auto now = Metrics(url());
    generating = now["kvforge_requests_running"] > 0 &&
                 now["kvforge_generation_tokens_total"] > generated_before;
    if (!generating) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(generating) << "the request did not start generating within 30 s";
  close(fd);
  EXPECT_TRUE(WaitIdle(url())) << "the abandoned request's KV blocks must be freed";
  auto m = Metrics(url());
  EXPECT_EQ(m["kvforge_kv_cache_usage"], 0);
  EXPECT_EQ(m["kvforge_requests_aborted_total"], aborted_before + 1)
      << "the abandoned request must end as aborted, not run to its 2000 tokens";
  EXPECT_LT(m["kvforge_generation_tokens_total"] - generated_before, 2000);
  // Still serving, and a client that stays gets its whole answer.
  Reply ok = Post(url(), "/v1/completions",
                  json{{"prompt", "Hi"}, {"max_tokens", 8}, {"ignore_eos", true}});
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body["usage"]["completion_tokens"], 8);
}

TEST_F(RobustnessTest, SixtyFourConcurrentStreamsMatchSequentialGreedy) {
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "Lily and Tom",
                                            "One day",          "The sun was",    "A big red",
                                            "Mom said",         "They went"};
  std::vector<std::string> want;
  for (const auto& p : prompts) want.push_back(h_->GreedyText(p, 32));
  constexpr int kClients = 64;
  std::vector<std::string> got(kClients), finish(kClients);
  std::vector<int> status(kClients, 0);
  std::vector<std::string> errors(kClients);
  // Not vector<bool>: its elements share words, so 64 threads setting their own flag would race.
  std::vector<char> done(kClients, 0);
  std::vector<std::thread> threads;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&, i] {
      StreamReply s = PostStream(url(), "/v1/completions",
                                 json{{"prompt", prompts[static_cast<size_t>(i) % prompts.size()]},
                                      {"max_tokens", 32},
                                      {"temperature", 0},
                                      {"stream", true}});
      status[static_cast<size_t>(i)] = s.http.status;
      errors[static_cast<size_t>(i)] =
          s.http.error + " events=" + std::to_string(s.raw_data.size()) + " t=" +
          std::to_string(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      done[static_cast<size_t>(i)] = s.done ? 1 : 0;
      got[static_cast<size_t>(i)] = s.text[0];
      finish[static_cast<size_t>(i)] = s.finish[0];
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) {
    EXPECT_EQ(status[static_cast<size_t>(i)], 200) << i << " " << errors[static_cast<size_t>(i)];
    EXPECT_TRUE(done[static_cast<size_t>(i)]) << i << " " << errors[static_cast<size_t>(i)];
    EXPECT_EQ(got[static_cast<size_t>(i)], want[static_cast<size_t>(i) % prompts.size()]) << i;
  }
  EXPECT_TRUE(WaitIdle(url()));
  EXPECT_EQ(Metrics(url())["kvforge_kv_cache_usage"], 0);
}

TEST(ServerAuthTest, ApiKeyRequiredExceptHealthAndMetrics) {
  ServerOptions o;
  o.api_key = "sk-test-123";
  auto h = Harness::Start(TestEngineConfig(), o);
  ASSERT_NE(h, nullptr);
  const json body = {{"prompt", "Hi"}, {"max_tokens", 2}};
  Reply none = Post(h->url(), "/v1/completions", body);
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.body["error"]["code"], "invalid_api_key");
  EXPECT_EQ(
      Post(h->url(), "/v1/completions", body, {{"Authorization", "Bearer sk-test-12"}}).status,
      401);
  EXPECT_EQ(Post(h->url(), "/v1/completions", body, {{"Authorization", "sk-test-123"}}).status,
            401);
  EXPECT_EQ(Get(h->url(), "/v1/models").status, 401);
  EXPECT_EQ(Post(h->url(), "/tokenize", json{{"prompt", "x"}}).status, 401);
  EXPECT_EQ(
      Post(h->url(), "/v1/completions", body, {{"Authorization", "Bearer sk-test-123"}}).status,
      200);
  EXPECT_EQ(Get(h->url(), "/health").status, 200);
  EXPECT_EQ(Get(h->url(), "/metrics").status, 200);
  EXPECT_EQ(Metrics(h->url())["kvforge_http_requests_total{code=\"401\"}"], 5);
}

TEST(ServerQueueTest, BeyondTheQueueLimitIs429) {
  EngineConfig c = TestEngineConfig();
  c.max_num_seqs = 1;
  ServerOptions o;
  o.max_queue = 0;  // one sequence in flight at most
  auto h = Harness::Start(c, o);
  ASSERT_NE(h, nullptr);
  Reply second;
  StreamReply first = PostStream(
      h->url(), "/v1/completions",
      json{{"prompt", "Once upon a time"},
           {"max_tokens", 2000},
           {"ignore_eos", true},
           {"stream", true}},
      {}, [&](const json&) {
        // The first request is admitted and running: the next is refused.
        second = Post(h->url(), "/v1/completions", json{{"prompt", "Hi"}, {"max_tokens", 2}});
        return false;
      });
  EXPECT_EQ(second.status, 429) << second.raw;
  EXPECT_EQ(second.body["error"]["type"], "rate_limit_error");
  EXPECT_EQ(second.Header("Retry-After"), "1");
  Reply n2 = Post(h->url(), "/v1/completions", json{{"prompt", "Hi"}, {"max_tokens", 2}, {"n", 2}});
  EXPECT_EQ(n2.status, 400) << "a request that can never be admitted is the request's fault";
  // Once the disconnected stream is aborted, the slot frees up.
  EXPECT_TRUE(WaitIdle(h->url()));
  int status = 0;
  for (int i = 0; i < 500 && status != 200; ++i) {
    status = Post(h->url(), "/v1/completions", json{{"prompt", "Hi"}, {"max_tokens", 2}}).status;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(status, 200);
  EXPECT_GE(Metrics(h->url())["kvforge_requests_rejected_total"], 1);
}

// A stream whose request waits behind another gets keep-alive comments; a client that leaves
// while waiting is noticed through them and its request aborted.
TEST(ServerQueueTest, ClientLeavingWhileQueuedIsAborted) {
  EngineConfig c = TestEngineConfig();
  c.max_num_seqs = 1;
  ServerOptions o;
  o.max_queue = 1;
  o.stream_keepalive_ms = 10;
  auto h = Harness::Start(c, o);
  ASSERT_NE(h, nullptr);
  const double aborted_before = Metrics(h->url())["kvforge_requests_aborted_total"];
  std::atomic<bool> a_running{false};
  StreamReply a;
  std::thread first([&] {
    a = PostStream(h->url(), "/v1/completions",
                   json{{"prompt", "Once upon a time"},
                        {"max_tokens", 300},
                        {"ignore_eos", true},
                        {"temperature", 0},
                        {"stream", true}},
                   {}, [&](const json&) {
                     a_running = true;
                     return true;
                   });
  });
  for (int i = 0; i < 30000 && !a_running; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(a_running);
  // A chat stream announces the role at once, before the engine schedules it: leave right then.
  StreamReply b = PostStream(h->url(), "/v1/chat/completions",
                             json{{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                  {"max_tokens", 1000},
                                  {"ignore_eos", true},
                                  {"stream", true}},
                             {}, [](const json&) { return false; });
  EXPECT_EQ(b.http.error, "Canceled");
  first.join();
  EXPECT_TRUE(a.done);
  EXPECT_EQ(a.finish[0], "length");
  EXPECT_TRUE(WaitIdle(h->url()));
  EXPECT_EQ(Metrics(h->url())["kvforge_requests_aborted_total"], aborted_before + 1);
}

TEST(ServerShutdownTest, ShutdownEndsStreamsAndRefusesNewWork) {
  auto h = Harness::Start();
  ASSERT_NE(h, nullptr);
  std::atomic<bool> streaming{false};
  StreamReply s;
  std::thread client([&] {
    s = PostStream(h->url(), "/v1/completions",
                   json{{"prompt", "Once upon a time"},
                        {"max_tokens", 2000},
                        {"ignore_eos", true},
                        {"stream", true}},
                   {}, [&](const json&) {
                     streaming = true;
                     return true;
                   });
  });
  for (int i = 0; i < 30000 && !streaming; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(streaming);
  const std::string url = h->url();
  h->server().Shutdown();
  client.join();
  EXPECT_TRUE(s.http.ok);
  // The request had 2000 tokens to go (hundreds of ms of decoding) when Shutdown began, so the
  // abort reached its stream: an error event, then [DONE].
  ASSERT_TRUE(s.error_event) << "the stream ended without the shutdown error event";
  EXPECT_TRUE(s.done);
  ASSERT_GE(s.raw_data.size(), 2u);
  EXPECT_NE(s.raw_data[s.raw_data.size() - 2].find("shutting down"), std::string::npos);
  // Engine statistics refresh after its loop iteration, just after the abort callbacks.
  for (int i = 0; i < 10000 && h->engine().Stats().kv_usage != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(h->engine().Stats().kv_usage, 0);
  EXPECT_FALSE(Get(url, "/health").ok) << "no longer accepting";
}

#ifdef KVF_CLI_PATH
// `kvforge serve --port 0` prints its address, serves, and exits 0 on SIGTERM.
TEST(ServeCommandTest, ListensAndExitsCleanlyOnSigterm) {
  int err_pipe[2];
  ASSERT_EQ(pipe(err_pipe), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(err_pipe[1], 2);
    close(err_pipe[0]);
    close(err_pipe[1]);
    execl(KVF_CLI_PATH, KVF_CLI_PATH, "serve", "--port", "0", "--threads", "1", "--max-num-seqs",
          "4", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(err_pipe[1]);
  FILE* err = fdopen(err_pipe[0], "r");
  std::string url;
  char line[1024];
  const std::regex listening("kvforge: listening on (http://127\\.0\\.0\\.1:[0-9]+)");
  while (url.empty() && std::fgets(line, sizeof(line), err)) {
    std::cmatch m;
    if (std::regex_search(line, m, listening)) url = m[1];
  }
  ASSERT_FALSE(url.empty()) << "no 'listening on' line";
  EXPECT_EQ(Get(url, "/health").status, 200);
  Reply r = Post(url, "/v1/completions",
                 json{{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"temperature", 0}});
  EXPECT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["model"], "stories260K");
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  std::fclose(err);
  ASSERT_TRUE(WIFEXITED(wstatus));
  EXPECT_EQ(WEXITSTATUS(wstatus), 0);
}
#endif

}  // namespace
}  // namespace kvforge::server::testing
