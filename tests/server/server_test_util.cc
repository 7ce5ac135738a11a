#include "server_test_util.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <thread>

#include "server/sse.h"

namespace kvforge::server::testing {

EngineConfig TestEngineConfig() {
  EngineConfig c;
  c.max_model_len = 2048;
  c.threads = 2;
  c.max_num_seqs = 64;
  c.kv_cache_memory_bytes = 64ull << 20;
  return c;
}

SamplingParams Greedy(int32_t max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  return p;
}

std::unique_ptr<Harness> Harness::Start(const EngineConfig& config, ServerOptions options) {
  std::unique_ptr<Harness> h(new Harness());
  auto engine = AsyncEngine::Create(config);
  if (!engine.ok()) {
    ADD_FAILURE() << "engine: " << engine.error().ToString();
    return nullptr;
  }
  h->engine_ = std::move(*engine);
  options.host = "127.0.0.1";
  options.port = 0;
  if (options.served_model_name.empty()) options.served_model_name = "stories260K";
  auto server = Server::Create(h->engine_.get(), options);
  if (!server.ok()) {
    ADD_FAILURE() << "server: " << server.error().ToString();
    return nullptr;
  }
  h->server_ = std::move(*server);
  if (Status s = h->server_->Start(); !s.ok()) {
    ADD_FAILURE() << "start: " << s.ToString();
    return nullptr;
  }
  h->url_ = h->server_->url();
  return h;
}

Harness::~Harness() {
  if (server_) server_->Shutdown();
  server_.reset();
  engine_.reset();
}

RequestOutput Harness::Reference(const std::vector<int32_t>& prompt, const SamplingParams& params) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  RequestOutput out;
  auto id = engine_->Submit(prompt, params, [&](const RequestOutput& o) {
    if (!o.finished) return;
    std::lock_guard<std::mutex> lock(mu);
    out = o;
    done = true;
    cv.notify_all();
  });
  EXPECT_TRUE(id.ok()) << id.error().ToString();
  if (!id.ok()) return out;
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  return out;
}

std::vector<int32_t> Harness::Tokenize(const std::string& text) {
  auto ids = engine_->Tokenize(text, true, false);
  EXPECT_TRUE(ids.ok());
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

std::string Harness::GreedyText(const std::string& prompt, int32_t max_tokens) {
  RequestOutput o = Reference(Tokenize(prompt), Greedy(max_tokens));
  return o.outputs.empty() ? "" : o.outputs[0].text;
}

namespace {

Reply ToReply(const HttpResult& r) {
  Reply out;
  out.ok = r.ok;
  out.error = r.error;
  out.status = r.status;
  out.raw = r.body;
  out.headers = r.headers;
  out.body = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (out.body.is_discarded()) out.body = nullptr;
  return out;
}

}  // namespace

Reply Get(const std::string& url, const std::string& path, const HttpHeaders& headers) {
  HttpClient client(url);
  return ToReply(client.Get(path, headers));
}

Reply Post(const std::string& url, const std::string& path, const std::string& body,
           const HttpHeaders& headers) {
  HttpClient client(url);
  return ToReply(client.Post(path, body, headers));
}

StreamReply PostStream(const std::string& url, const std::string& path, const json& body,
                       const HttpHeaders& headers,
                       const std::function<bool(const json&)>& on_event) {
  StreamReply out;
  bool keep_going = true;
  SseParser parser([&](const std::string& data) {
    out.raw_data.push_back(data);
    if (data == "[DONE]") {
      out.done = true;
      return;
    }
    out.done = false;  // something after [DONE] would be a bug
    json j = json::parse(data, nullptr, false);
    if (j.is_discarded()) {
      ADD_FAILURE() << "not JSON: " << data;
      return;
    }
    if (j.contains("error")) out.error_event = true;
    if (j.contains("choices"))
      for (const json& c : j["choices"]) {
        const int index = c.value("index", -1);
        if (c.contains("text") && c["text"].is_string())
          out.text[index] += c["text"].get<std::string>();
        if (c.contains("delta") && c["delta"].contains("content") &&
            c["delta"]["content"].is_string())
          out.text[index] += c["delta"]["content"].get<std::string>();
        if (c.contains("finish_reason") && c["finish_reason"].is_string())
          out.finish[index] = c["finish_reason"].get<std::string>();
      }
    if (j.contains("usage") && j["usage"].is_object()) out.usage = j["usage"];
    out.events.push_back(j);
    if (on_event && keep_going) keep_going = on_event(j);
  });
  HttpClient client(url);
  out.http = client.PostStream(path, body.dump(), headers, [&](std::string_view data) {
    parser.Feed(data);
    return keep_going;
  });
  return out;
}

std::vector<json> EventStream::Named(const std::string& name) const {
  std::vector<json> out;
  for (const auto& [event, data] : events)
    if (event == name) out.push_back(data);
  return out;
}

EventStream PostEventStream(
    const std::string& url, const std::string& path, const json& body, const HttpHeaders& headers,
    const std::function<void(const std::string& event, const json& data)>& on_event) {
  EventStream out;
  SseParser parser =
      SseParser::WithEventNames([&](const std::string& event, const std::string& data) {
        json j = json::parse(data, nullptr, /*allow_exceptions=*/false);
        if (j.is_discarded()) out.parse_error = true;
        if (on_event) on_event(event, j);
        out.events.emplace_back(event, std::move(j));
      });
  HttpClient client(url);
  out.http = client.PostStream(path, body.dump(), headers, [&](std::string_view data) {
    parser.Feed(data);
    return true;
  });
  parser.Finish();
  return out;
}

std::map<std::string, double> Metrics(const std::string& url) {
  std::map<std::string, double> m;
  Reply r = Get(url, "/metrics");
  EXPECT_EQ(r.status, 200);
  std::istringstream in(r.raw);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    m[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
  }
  return m;
}

bool WaitIdle(const std::string& url, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    auto m = Metrics(url);
    if (m["kvforge_kv_cache_usage"] == 0 && m["kvforge_requests_running"] == 0 &&
        m["kvforge_requests_waiting"] == 0)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace kvforge::server::testing
