// server/inspector.cc — see inspector.h.
#include "server/inspector.h"

#include <utility>

#include "server/inspector_codec.h"
#include "server/routes.h"
#include "server/webui_asset.h"

namespace kvforge::server {
namespace {

using Clock = std::chrono::steady_clock;

// The counters one chart sample is the difference of.
struct Reading {
  EngineStats stats;
  Histogram::Snapshot ttft, itl;
  Clock::time_point t;
};

Reading Read(const AsyncEngine& engine, const Histogram& ttft, const Histogram& itl) {
  return {engine.Stats(), ttft.Get(), itl.Get(), Clock::now()};
}

// The sample for the interval between two readings; t_s stamps it.
StatsSample MakeSample(const Reading& before, const Reading& now, double t_s) {
  const EngineStats &b = before.stats, &n = now.stats;
  StatsSample s;
  s.t_s = t_s;
  s.running = n.num_running;
  s.waiting = n.num_waiting;
  s.swapped = n.num_swapped;
  s.kv_usage = n.kv_usage;
  const double dt_s = std::chrono::duration<double>(now.t - before.t).count();
  if (dt_s > 0) {
    s.prompt_tokens_per_s =
        static_cast<double>(n.prompt_tokens_total - b.prompt_tokens_total) / dt_s;
    s.generation_tokens_per_s =
        static_cast<double>(n.generation_tokens_total - b.generation_tokens_total) / dt_s;
  }
  const int64_t asked = n.prefix_cache_query_tokens - b.prefix_cache_query_tokens;
  if (asked > 0)
    s.prefix_hit_rate = static_cast<double>(n.prefix_cache_hit_tokens - b.prefix_cache_hit_tokens) /
                        static_cast<double>(asked);
  s.ttft_p50_s = IntervalQuantile(before.ttft, now.ttft, 0.5);
  s.ttft_p90_s = IntervalQuantile(before.ttft, now.ttft, 0.9);
  s.itl_p50_s = IntervalQuantile(before.itl, now.itl, 0.5);
  s.itl_p90_s = IntervalQuantile(before.itl, now.itl, 0.9);
  return s;
}

}  // namespace

Inspector::Inspector(AsyncEngine* engine, const Histogram* ttft, const Histogram* itl,
                     std::string model_id, const InspectorOptions& options)
    : engine_(engine),
      ttft_(ttft),
      itl_(itl),
      model_id_(std::move(model_id)),
      opts_(options),
      history_(options.samples) {}

Inspector::~Inspector() { Stop(); }

void Inspector::Start() {
  if (sampler_.joinable()) return;
  sampler_ = std::thread([this] { Sample(); });
}

void Inspector::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (sampler_.joinable()) sampler_.join();
}

void Inspector::Sample() {
  Reading before = Read(*engine_, *ttft_, *itl_);
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::milliseconds(opts_.interval_ms), [&] { return stop_; })) {
    lock.unlock();
    const Reading now = Read(*engine_, *ttft_, *itl_);
    history_.Add(MakeSample(before, now, std::chrono::duration<double>(now.t - started_).count()));
    before = now;
    lock.lock();
  }
}

HttpResponse Inspector::Page(const HttpRequest&) const {
  HttpResponse r;
  r.content_type = "text/html; charset=utf-8";
  r.body = std::string(WebUiHtml());
  r.headers.emplace_back("Cache-Control", "no-cache");
  return r;
}

HttpResponse Inspector::KvSnapshot(const HttpRequest&) const {
  EngineStats stats;
  Result<kvforge::KvSnapshot> snap =
      engine_->KvCacheSnapshot(opts_.max_prefix_entries, opts_.snapshot_timeout_ms, &stats);
  if (!snap.ok()) return ErrorResponse(ErrorFromStatus(snap.error()));
  return JsonResponse(EncodeKvSnapshot(*snap, stats, model_id_));
}

HttpResponse Inspector::History(const HttpRequest&) const {
  return JsonResponse(
      EncodeHistory(history_.Samples(), static_cast<double>(opts_.interval_ms) / 1000.0));
}

}  // namespace kvforge::server
