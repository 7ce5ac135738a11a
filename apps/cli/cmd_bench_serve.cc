// kvforge bench serve — a load generator for any OpenAI-compatible server.
//
// Sends --num-prompts streaming requests (completions or chat) with synthetic prompts, either
// open-loop with Poisson arrivals at --request-rate (optionally capped at --concurrency in
// flight) or closed-loop with --concurrency clients, and reports time to first token, inter-token
// latency (between streamed chunks), end-to-end latency percentiles and throughput. HTTP, SSE and
// JSON are handled by the server module's transport, parser and codec.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <limits>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/strings.h"
#include "bench_common.h"
#include "commands.h"
#include "flags.h"
#include "server/http_transport.h"
#include "server/openai_codec.h"
#include "server/sse.h"

namespace kvforge::cli {
namespace {

using base::StrFormat;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Outcome {
  bool ok = false;
  std::string error;
  double ttft_ms = 0, e2e_ms = 0;
  std::vector<double> itl_ms;
  int64_t prompt_tokens = 0, output_tokens = 0;
};

// A prompt of about `words` words from a fixed story vocabulary (seeded, reproducible).
std::string SyntheticPrompt(std::mt19937_64& rng, int64_t words) {
  static const char* kWords[] = {
      "once", "upon", "a",     "time", "there", "was",  "little", "girl",  "named",
      "lily", "she",  "loved", "to",   "play",  "in",   "the",    "park",  "with",
      "her",  "big",  "red",   "ball", "one",   "day",  "saw",    "happy", "dog",
      "and",  "they", "went",  "home", "sun",   "tree", "friend", "mom",   "said"};
  std::uniform_int_distribution<size_t> pick(0, sizeof(kWords) / sizeof(kWords[0]) - 1);
  std::string out = "Once upon a time";
  for (int64_t i = 4; i < words; ++i) out += std::string(" ") + kWords[pick(rng)];
  return out;
}

Outcome RunOne(const std::string& url, const std::string& path, const std::string& body,
               const server::HttpHeaders& headers) {
  Outcome o;
  server::HttpClient client(url);
  const auto t0 = Clock::now();
  Clock::time_point last;
  bool first = true;
  int64_t chunks = 0;
  std::string error;
  server::SseParser parser([&](const std::string& data) {
    if (data == "[DONE]") return;
    auto c = server::DecodeStreamChunk(data);
    if (!c.ok()) {
      error = c.error().message();
      return;
    }
    if (c->is_error) {
      error = c->error_message;
      return;
    }
    if (c->with_usage) {
      o.prompt_tokens = c->usage.prompt_tokens;
      o.output_tokens = c->usage.completion_tokens;
    }
    if (c->text.empty()) return;
    const auto now = Clock::now();
    if (first) {
      o.ttft_ms = Seconds(now - t0) * 1000;
      first = false;
    } else {
      o.itl_ms.push_back(Seconds(now - last) * 1000);
    }
    last = now;
    ++chunks;
  });
  server::HttpResult r = client.PostStream(path, body, headers, [&](std::string_view data) {
    parser.Feed(data);
    return true;
  });
  parser.Finish();
  o.e2e_ms = Seconds(Clock::now() - t0) * 1000;
  if (!r.ok) {
    o.error = "transport: " + r.error;
  } else if (r.status != 200) {
    o.error = StrFormat("HTTP %d: %s", r.status, r.body.substr(0, 300).c_str());
  } else if (!error.empty()) {
    o.error = error;
  } else if (first) {
    o.error = "no output";
  } else {
    o.ok = true;
    if (o.output_tokens == 0)
      o.output_tokens = chunks;  // servers without usage: one token per chunk
  }
  return o;
}

}  // namespace

int BenchServeMain(const Args& args) {
  std::string url, model, endpoint = "completions", api_key;
  int64_t num_prompts = 100, concurrency = 0, input_len = 32, output_len = 64, seed = 0;
  double request_rate = 0;
  bool json = false, no_progress = false;
  FlagParser p(
      "bench serve",
      "Load-test an OpenAI-compatible server with streaming requests: Poisson arrivals at\n"
      "--request-rate (req/s; optionally at most --concurrency in flight) or --concurrency "
      "closed-loop\n"
      "clients. Reports TTFT, inter-token latency (between streamed chunks), end-to-end latency "
      "and\n"
      "throughput.");
  p.AddString("url", &url, "server base URL, e.g. http://127.0.0.1:8000");
  p.AddString("model", &model, "model id (default: the first one /v1/models lists)");
  p.AddString("endpoint", &endpoint, "completions | chat");
  p.AddString("api-key", &api_key, "sent as 'Authorization: Bearer KEY'");
  p.AddInt("num-prompts", &num_prompts, "requests to send");
  p.AddFloat("request-rate", &request_rate,
             "Poisson arrival rate in requests/s (0: all at once / closed loop)");
  p.AddInt("concurrency", &concurrency,
           "requests in flight at most (closed loop without --request-rate)");
  p.AddInt("input-len", &input_len, "prompt length in words");
  p.AddInt("output-len", &output_len,
           "max_tokens per request (ignore_eos is sent for fixed lengths)");
  p.AddInt("seed", &seed, "seed for prompts and arrivals");
  p.AddBool("json", &json, "print one JSON object on stdout");
  p.AddBool("no-progress", &no_progress, "no progress bar on stderr");
  p.Require("url");
  if (int rc = HandleParse(p, args); rc >= 0) return rc;
  if (num_prompts <= 0 || input_len <= 0 || output_len <= 0 || concurrency < 0 ||
      request_rate < 0 || output_len > std::numeric_limits<int32_t>::max()) {
    std::fprintf(
        stderr,
        "kvforge: --num-prompts, --input-len and --output-len must be positive; --concurrency and "
        "--request-rate not negative\n");
    return 2;
  }
  if (endpoint != "completions" && endpoint != "chat") {
    std::fprintf(stderr, "kvforge: --endpoint must be 'completions' or 'chat'\n");
    return 2;
  }
  while (!url.empty() && url.back() == '/') url.pop_back();
  server::HttpHeaders headers;
  if (!api_key.empty()) headers.emplace_back("Authorization", "Bearer " + api_key);
  if (model.empty()) {
    server::HttpClient client(url);
    server::HttpResult r = client.Get("/v1/models", headers);
    if (!r.ok || r.status != 200) {
      std::fprintf(stderr, "kvforge: GET %s/v1/models failed: %s\n", url.c_str(),
                   r.ok ? StrFormat("HTTP %d %s", r.status, r.body.substr(0, 200).c_str()).c_str()
                        : r.error.c_str());
      return 1;
    }
    auto id = server::DecodeFirstModelId(r.body);
    if (!id.ok()) {
      std::fprintf(stderr, "kvforge: %s\n", id.error().message().c_str());
      return 1;
    }
    model = *id;
  }
  const std::string path = endpoint == "chat" ? "/v1/chat/completions" : "/v1/completions";
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::vector<std::string> bodies;
  for (int64_t i = 0; i < num_prompts; ++i) {
    server::BenchRequest br;
    br.model = model;
    br.chat = endpoint == "chat";
    br.prompt = SyntheticPrompt(rng, input_len);
    br.max_tokens = static_cast<int32_t>(output_len);
    bodies.push_back(server::EncodeBenchRequest(br));
  }
  // Arrival offsets: Poisson (exponential gaps) or all at time 0.
  std::vector<double> arrival_s(static_cast<size_t>(num_prompts), 0.0);
  if (request_rate > 0) {
    std::exponential_distribution<double> gap(request_rate);
    double t = 0;
    for (auto& a : arrival_s) {
      a = t;
      t += gap(rng);
    }
  }
  const int64_t limit = concurrency > 0 ? concurrency : num_prompts;

  std::vector<Outcome> outcomes(static_cast<size_t>(num_prompts));
  std::mutex mu;
  std::condition_variable cv;
  int64_t in_flight = 0, done = 0;
  ProgressBar bar(!no_progress && !json, "bench serve", num_prompts);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(num_prompts));
  const auto start = Clock::now();
  for (int64_t i = 0; i < num_prompts; ++i) {
    std::this_thread::sleep_until(
        start + std::chrono::duration_cast<Clock::duration>(
                    std::chrono::duration<double>(arrival_s[static_cast<size_t>(i)])));
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return in_flight < limit; });
      ++in_flight;
    }
    threads.emplace_back([&, i] {
      Outcome o = RunOne(url, path, bodies[static_cast<size_t>(i)], headers);
      std::lock_guard<std::mutex> lock(mu);
      outcomes[static_cast<size_t>(i)] = std::move(o);
      --in_flight;
      ++done;
      bar.Update(done);
      cv.notify_all();
    });
  }
  for (auto& t : threads) t.join();
  const double duration_s = Seconds(Clock::now() - start);
  bar.Finish();

  std::vector<double> ttft, itl, e2e;
  int64_t ok = 0, prompt_tokens = 0, output_tokens = 0;
  std::string first_error;
  for (const Outcome& o : outcomes) {
    if (!o.ok) {
      if (first_error.empty()) first_error = o.error;
      continue;
    }
    ++ok;
    ttft.push_back(o.ttft_ms);
    e2e.push_back(o.e2e_ms);
    itl.insert(itl.end(), o.itl_ms.begin(), o.itl_ms.end());
    prompt_tokens += o.prompt_tokens;
    output_tokens += o.output_tokens;
  }
  const Percentiles pt = Percentiles::Of(ttft), pi = Percentiles::Of(itl),
                    pe = Percentiles::Of(e2e);
  const double d = duration_s > 0 ? duration_s : 1e-9;
  if (json) {
    std::printf(
        "{\"url\":%s,\"model\":%s,\"endpoint\":\"%s\",\"requests\":%lld,\"successful\":%lld,"
        "\"failed\":%lld,"
        "\"request_rate\":%g,\"concurrency\":%lld,\"duration_s\":%.3f,\"requests_per_s\":%.3f,"
        "\"output_tokens_per_s\":%.2f,\"total_tokens_per_s\":%.2f,\"prompt_tokens\":%lld,"
        "\"output_tokens\":%lld,\"ttft_ms\":%s,\"itl_ms\":%s,\"e2e_ms\":%s,\"first_error\":%s}\n",
        base::JsonQuote(url).c_str(), base::JsonQuote(model).c_str(), endpoint.c_str(),
        (long long)num_prompts, (long long)ok, (long long)(num_prompts - ok), request_rate,
        (long long)concurrency, duration_s, static_cast<double>(ok) / d,
        static_cast<double>(output_tokens) / d,
        static_cast<double>(prompt_tokens + output_tokens) / d, (long long)prompt_tokens,
        (long long)output_tokens, pt.ToJson().c_str(), pi.ToJson().c_str(), pe.ToJson().c_str(),
        base::JsonQuote(first_error).c_str());
  } else {
    std::printf("endpoint %s, model %s: %lld requests (%lld ok, %lld failed) in %.2f s\n",
                path.c_str(), model.c_str(), (long long)num_prompts, (long long)ok,
                (long long)(num_prompts - ok), duration_s);
    std::printf("throughput: %.2f req/s, %.1f output tokens/s, %.1f total tokens/s\n",
                static_cast<double>(ok) / d, static_cast<double>(output_tokens) / d,
                static_cast<double>(prompt_tokens + output_tokens) / d);
    std::printf("%-10s %10s %10s %10s %10s\n", "ms", "mean", "p50", "p90", "p99");
    std::printf("%-10s %10.2f %10.2f %10.2f %10.2f\n", "TTFT", pt.mean, pt.p50, pt.p90, pt.p99);
    std::printf("%-10s %10.2f %10.2f %10.2f %10.2f\n", "ITL", pi.mean, pi.p50, pi.p90, pi.p99);
    std::printf("%-10s %10.2f %10.2f %10.2f %10.2f\n", "E2E", pe.mean, pe.p50, pe.p90, pe.p99);
    if (!first_error.empty()) std::printf("first error: %s\n", first_error.c_str());
  }
  return ok == num_prompts ? 0 : 1;
}

}  // namespace kvforge::cli
