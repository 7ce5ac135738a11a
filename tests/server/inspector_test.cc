// The web page and its read-only endpoints over real HTTP: GET / serves the page (without the
// API key: the page asks for it), GET /v1/kvforge/kv is a snapshot whose shape and counts agree
// with the engine, prefix hits show after the same system prompt is sent twice, GET
// /v1/kvforge/history fills with samples, --no-webui turns the page off, the key guards the JSON.
// Also the interval quantile the charts use, against hand-counted histograms.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "server/stats_history.h"
#include "server_test_util.h"

namespace kvforge::server::testing {
namespace {

json Chat(const std::string& system, const std::string& user) {
  return json{{"messages", json::array({{{"role", "system"}, {"content", system}},
                                        {{"role", "user"}, {"content", user}}})},
              {"max_tokens", 8},
              {"temperature", 0}};
}

TEST(Inspector, PageSnapshotAndHistory) {
  ServerOptions o;
  o.history_interval_ms = 50;
  auto h = Harness::Start(TestEngineConfig(), o);
  ASSERT_NE(h, nullptr);
  Reply page = Get(h->url(), "/");
  ASSERT_EQ(page.status, 200);
  EXPECT_EQ(page.Header("Content-Type").rfind("text/html", 0), 0u) << page.Header("Content-Type");
  EXPECT_NE(page.raw.find("/v1/kvforge/kv"), std::string::npos);
  EXPECT_EQ(page.raw.find("http://"), std::string::npos)
      << "the page must load nothing from elsewhere";

  Reply idle = Get(h->url(), "/v1/kvforge/kv");
  ASSERT_EQ(idle.status, 200) << idle.raw;
  const json& pool = idle.body["pool"];
  const int64_t n = pool["num_blocks"];
  EXPECT_EQ(idle.body["blocks"]["use"].get<std::string>().size(), static_cast<size_t>(n));
  EXPECT_TRUE(idle.body["blocks"]["held"].empty());
  EXPECT_EQ(pool["free"], n);
  EXPECT_EQ(pool["k_dtype"], "f16");
  EXPECT_EQ(idle.body["stats"]["kv_usage"], 0.0);
  EXPECT_EQ(idle.body["prefix_cache"]["mode"], "hash");
  EXPECT_TRUE(idle.body["requests"].empty());
  EXPECT_FALSE(idle.body["offload"]["enabled"]) << "no tier configured";
  EXPECT_TRUE(idle.body["offload"]["tiers"].empty());

  const std::string system_text =
      "You are a storyteller. You tell short, happy stories about a little dog named Max and "
      "his friend Lily, who live in a small town near the sea and like to play in the park.";
  ASSERT_EQ(Post(h->url(), "/v1/chat/completions", Chat(system_text, "Tell me a story.")).status,
            200);
  Reply first = Get(h->url(), "/v1/kvforge/kv");
  ASSERT_EQ(first.status, 200);
  const int64_t hits_before = first.body["prefix_cache"]["hit_tokens"];
  EXPECT_GT(first.body["pool"]["cached"].get<int64_t>(), 0);
  EXPECT_FALSE(first.body["prefix_cache"]["entries"].empty());
  Reply second_chat =
      Post(h->url(), "/v1/chat/completions", Chat(system_text, "Another one, please."));
  ASSERT_EQ(second_chat.status, 200);
  EXPECT_GT(second_chat.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), 0);
  Reply second = Get(h->url(), "/v1/kvforge/kv");
  EXPECT_GT(second.body["prefix_cache"]["hit_tokens"].get<int64_t>(), hits_before);
  int64_t entry_hits = 0;
  const json& columns = second.body["prefix_cache"]["entry_columns"];
  ASSERT_EQ(columns.size(), 7u);
  ASSERT_EQ(columns[4], "hits");
  for (const json& e : second.body["prefix_cache"]["entries"]) {
    ASSERT_EQ(e.size(), 7u);
    entry_hits += e[4].get<int64_t>();
  }
  EXPECT_GT(entry_hits, 0);
  // The counts add up: every block is one of free, used, shared, cached; the held rows are the
  // non-free blocks, each marked so in the use string.
  const json& p2 = second.body["pool"];
  const std::string use = second.body["blocks"]["use"];
  EXPECT_EQ(second.body["blocks"]["held"].size(),
            static_cast<size_t>(n - std::count(use.begin(), use.end(), 'F')));
  for (const json& row : second.body["blocks"]["held"]) {
    EXPECT_NE(use[row[0].get<size_t>()], 'F');
  }
  EXPECT_EQ(p2["free"].get<int64_t>() + p2["used"].get<int64_t>() + p2["shared"].get<int64_t>() +
                p2["cached"].get<int64_t>(),
            n);

  // History: samples arrive every 50 ms; wait (bounded) for ones after the two requests.
  json samples;
  for (int i = 0; i < 400; ++i) {
    Reply hist = Get(h->url(), "/v1/kvforge/history");
    ASSERT_EQ(hist.status, 200);
    samples = hist.body["samples"];
    double generated = 0;
    bool any_ttft = false;
    for (const json& s : samples) {
      generated += s["generation_tokens_per_s"].get<double>();
      any_ttft |= !s["ttft_p50_s"].is_null();
    }
    // The sampler may not yet have taken the interval in which the requests ended.
    if (samples.size() >= 3 && generated > 0 && any_ttft) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_GE(samples.size(), 3u) << "no history samples after 10 s";
  bool saw_ttft = false;
  for (const json& s : samples) {
    EXPECT_GE(s["kv_usage"].get<double>(), 0.0);
    saw_ttft |= !s["ttft_p50_s"].is_null();
  }
  EXPECT_TRUE(saw_ttft) << samples.dump();
  EXPECT_EQ(Get(h->url(), "/v1/kvforge/history").body["interval_s"], 0.05);
}

TEST(Inspector, TheSnapshotShowsTheOffloadTiers) {
  EngineConfig c = TestEngineConfig();
  c.kv_offload_ram_bytes = 4 << 20;
  c.kv_offload_chunk_tokens = 16;
  auto h = Harness::Start(c, ServerOptions{});
  ASSERT_NE(h, nullptr);
  EXPECT_NE(Get(h->url(), "/").raw.find("tier-table"), std::string::npos);
  const std::string system_text =
      "You are a storyteller. You tell short, happy stories about a little dog named Max.";
  ASSERT_EQ(Post(h->url(), "/v1/chat/completions", Chat(system_text, "A story.")).status, 200);
  Reply snap = Get(h->url(), "/v1/kvforge/kv");
  ASSERT_EQ(snap.status, 200);
  const json& o = snap.body["offload"];
  EXPECT_TRUE(o["enabled"]);
  ASSERT_EQ(o["tiers"].size(), 1u);
  EXPECT_EQ(o["tiers"][0]["name"], "ram");
  EXPECT_EQ(o["tiers"][0]["capacity_bytes"], 4 << 20);
  EXPECT_GT(o["stored_chunks"].get<int64_t>(), 0) << "the prompt's chunks were queued";
}

TEST(Inspector, ApiKeyGuardsTheJsonAndNotThePage) {
  ServerOptions o;
  o.api_key = "sk-inspector";
  auto h = Harness::Start(TestEngineConfig(), o);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(Get(h->url(), "/").status, 200);
  EXPECT_EQ(Get(h->url(), "/v1/kvforge/kv").status, 401);
  EXPECT_EQ(Get(h->url(), "/v1/kvforge/history").status, 401);
  const HttpHeaders key = {{"Authorization", "Bearer sk-inspector"}};
  EXPECT_EQ(Get(h->url(), "/v1/kvforge/kv", key).status, 200);
  EXPECT_EQ(Get(h->url(), "/v1/kvforge/history", key).status, 200);
}

TEST(Inspector, NoWebUiMeansNoPage) {
  ServerOptions o;
  o.webui = false;
  auto h = Harness::Start(TestEngineConfig(), o);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(Get(h->url(), "/").status, 404);
  EXPECT_EQ(Get(h->url(), "/v1/kvforge/kv").status, 200);
}

TEST(Inspector, BadHistoryIntervalIsRefused) {
  ServerOptions o;
  o.history_interval_ms = 0;
  auto engine = AsyncEngine::Create(TestEngineConfig());
  ASSERT_TRUE(engine.ok());
  EXPECT_FALSE(Server::Create(engine->get(), o).ok());
}

Histogram::Snapshot Hist(std::vector<uint64_t> per_bucket) {  // bounds 1, 2, 4, then +Inf
  Histogram::Snapshot s;
  s.upper_bounds = {1, 2, 4};
  uint64_t cum = 0;
  for (uint64_t c : per_bucket) s.cumulative.push_back(cum += c);
  s.count = cum;
  return s;
}

TEST(IntervalQuantile, InterpolatesInsideTheBucketOfTheInterval) {
  const Histogram::Snapshot empty = Hist({0, 0, 0, 0});
  EXPECT_EQ(IntervalQuantile(empty, empty, 0.5), -1);
  // 10 observations in (1, 2]: the median is halfway through that bucket.
  EXPECT_DOUBLE_EQ(IntervalQuantile(empty, Hist({0, 10, 0, 0}), 0.5), 1.5);
  // Only the interval counts: 4 old ones in (0, 1] are subtracted.
  EXPECT_DOUBLE_EQ(IntervalQuantile(Hist({4, 0, 0, 0}), Hist({4, 0, 8, 0}), 0.25), 2.5);
  // 9 in (0, 1], 1 beyond 4: p90 is the top of the first bucket, p99 the +Inf bucket's floor.
  EXPECT_DOUBLE_EQ(IntervalQuantile(empty, Hist({9, 0, 0, 1}), 0.9), 1.0);
  EXPECT_DOUBLE_EQ(IntervalQuantile(empty, Hist({9, 0, 0, 1}), 0.99), 4.0);
  EXPECT_EQ(IntervalQuantile(Hist({1, 0, 0}), Hist({1, 0, 0, 0}), 0.5), -1);  // bad shapes
}

}  // namespace
}  // namespace kvforge::server::testing
