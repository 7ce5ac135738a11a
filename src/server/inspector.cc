// server/inspector.cc — see inspector.h.
#include "server/inspector.h"

#include <utility>

#include "server/inspector_codec.h"
#include "server/routes.h"
#include "server/webui_asset.h"

namespace kvforge::server {

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

StatsSample Inspector::MakeSample(double t_s, double dt_s, const EngineStats& before,
                                  const EngineStats& now, const Histogram::Snapshot& ttft_before,
                                  const Histogram::Snapshot& ttft_now,
                                  const Histogram::Snapshot& itl_before,
                                  const Histogram::Snapshot& itl_now) {
  StatsSample s;
  s.t_s = t_s;
  s.running = now.num_running;
  s.waiting = now.num_waiting;
  s.swapped = now.num_swapped;
  s.kv_usage = now.kv_usage;
  if (dt_s > 0) {
    s.prompt_tokens_per_s =
        static_cast<double>(now.prompt_tokens_total - before.prompt_tokens_total) / dt_s;
    s.generation_tokens_per_s =
        static_cast<double>(now.generation_tokens_total - before.generation_tokens_total) / dt_s;
  }
  const int64_t asked = now.prefix_cache_query_tokens - before.prefix_cache_query_tokens;
  if (asked > 0)
    s.prefix_hit_rate =
        static_cast<double>(now.prefix_cache_hit_tokens - before.prefix_cache_hit_tokens) /
        static_cast<double>(asked);
  s.ttft_p50_s = IntervalQuantile(ttft_before, ttft_now, 0.5);
  s.ttft_p90_s = IntervalQuantile(ttft_before, ttft_now, 0.9);
  s.itl_p50_s = IntervalQuantile(itl_before, itl_now, 0.5);
  s.itl_p90_s = IntervalQuantile(itl_before, itl_now, 0.9);
  return s;
}

void Inspector::Sample() {
  using Clock = std::chrono::steady_clock;
  EngineStats before = engine_->Stats();
  Histogram::Snapshot ttft_before = ttft_->Get(), itl_before = itl_->Get();
  Clock::time_point t_before = Clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::milliseconds(opts_.interval_ms), [&] { return stop_; })) {
    lock.unlock();
    const EngineStats now = engine_->Stats();
    const Histogram::Snapshot ttft_now = ttft_->Get(), itl_now = itl_->Get();
    const Clock::time_point t_now = Clock::now();
    history_.Add(MakeSample(std::chrono::duration<double>(t_now - started_).count(),
                            std::chrono::duration<double>(t_now - t_before).count(), before, now,
                            ttft_before, ttft_now, itl_before, itl_now));
    before = now;
    ttft_before = ttft_now;
    itl_before = itl_now;
    t_before = t_now;
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
