// server_test_util.h — an in-process server on 127.0.0.1 (ephemeral port) over the embedded
// TinyStories model, plus small HTTP/SSE/metrics helpers for the server tests.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvforge/llm.h"
#include "kvforge/server.h"
#include "server/http_transport.h"

namespace kvforge::server::testing {

using json = nlohmann::json;

// 2048-token context, 2 threads, 64 running sequences, a 64 MiB KV pool.
EngineConfig TestEngineConfig();
SamplingParams Greedy(int32_t max_tokens);

class Harness {
 public:
  // Fails the current test (and returns null) when the engine or server cannot start.
  static std::unique_ptr<Harness> Start(const EngineConfig& config = TestEngineConfig(),
                                        ServerOptions options = {});
  ~Harness();

  AsyncEngine& engine() { return *engine_; }
  Server& server() { return *server_; }
  const std::string& url() const { return url_; }

  // The engine's own output for a prompt, without HTTP (the reference the server must match).
  RequestOutput Reference(const std::vector<int32_t>& prompt, const SamplingParams& params);
  // Token ids of a completions text prompt (BOS added, no special-token parsing).
  std::vector<int32_t> Tokenize(const std::string& text);
  // Greedy reference text of a completions prompt.
  std::string GreedyText(const std::string& prompt, int32_t max_tokens);

 private:
  Harness() = default;
  std::unique_ptr<AsyncEngine> engine_;
  std::unique_ptr<Server> server_;
  std::string url_;
};

// A suite sharing one server, started before its first test with Suite::Options() (a static
// member a suite may declare; the default options otherwise) and stopped after its last:
//   class MyTest : public SharedServerTest<MyTest> {};
template <typename Suite>
class SharedServerTest : public ::testing::Test {
 protected:
  static ServerOptions Options() { return {}; }
  static void SetUpTestSuite() {
    h_ = Harness::Start(TestEngineConfig(), Suite::Options()).release();
  }
  static void TearDownTestSuite() {
    delete h_;
    h_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(h_, nullptr); }
  static const std::string& url() { return h_->url(); }
  static inline Harness* h_ = nullptr;
};

struct Reply {
  bool ok = false;  // a response arrived
  std::string error;
  int status = 0;
  std::string raw;
  json body;  // null when raw is not JSON
  HttpHeaders headers;
  std::string Header(const std::string& name) const { return FindHeader(headers, name); }
};

Reply Get(const std::string& url, const std::string& path, const HttpHeaders& headers = {});
Reply Post(const std::string& url, const std::string& path, const std::string& body,
           const HttpHeaders& headers = {});
inline Reply Post(const std::string& url, const std::string& path, const json& body,
                  const HttpHeaders& headers = {}) {
  return Post(url, path, body.dump(), headers);
}
inline Reply Post(const std::string& url, const std::string& path, const char* body,
                  const HttpHeaders& headers = {}) {
  return Post(url, path, std::string(body), headers);
}

struct StreamReply {
  HttpResult http;
  std::vector<json> events;           // every data payload but [DONE], parsed
  std::vector<std::string> raw_data;  // every data payload as sent
  bool done = false;                  // [DONE] was the last payload
  std::map<int, std::string> text;    // per choice index: text / delta.content concatenated
  std::map<int, std::string> finish;  // per choice index: finish_reason
  json usage;                         // the usage object of the final chunk, or null
  bool error_event = false;
};
// `on_event` sees each parsed payload; returning false closes the connection at once.
StreamReply PostStream(const std::string& url, const std::string& path, const json& body,
                       const HttpHeaders& headers = {},
                       const std::function<bool(const json&)>& on_event = nullptr);

// A stream of typed SSE events (Anthropic's Messages API, OpenAI's Responses API).
struct EventStream {
  HttpResult http;
  std::vector<std::pair<std::string, json>> events;  // (event name, parsed data) in order
  bool parse_error = false;                          // some data was not JSON
  // The events named `name`, in order.
  std::vector<json> Named(const std::string& name) const;
};
// `on_event` sees each event as it arrives.
EventStream PostEventStream(
    const std::string& url, const std::string& path, const json& body,
    const HttpHeaders& headers = {},
    const std::function<void(const std::string& event, const json& data)>& on_event = nullptr);

// GET /metrics as "name{labels}" -> value.
std::map<std::string, double> Metrics(const std::string& url);
// Polls /metrics until kv usage is 0 and nothing runs or waits (at most `seconds`).
bool WaitIdle(const std::string& url, double seconds = 60);

}  // namespace kvforge::server::testing
