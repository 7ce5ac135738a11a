// llm.cc — kvforge::LLM (synchronous batch generation) and kvforge::AsyncEngine (one engine
// thread, requests submitted from any thread) over EngineCore.
#include "kvforge/llm.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "assets/default_model.h"
#include "base/log.h"
#include "engine/engine_core.h"
#include "engine/llm_internal.h"
#include "gguf/gguf_reader.h"

namespace kvforge {

// ---------------------------------------------------------------------------------------------
// LLM

LLM::LLM(const EngineConfig& config) {
  auto core = EngineCore::Create(config);
  if (!core.ok()) {
    status_ = core.error();
    return;
  }
  core_ = std::move(*core);
}

LLM::~LLM() = default;

EngineStats LLM::stats() const { return core_ ? core_->Stats() : EngineStats{}; }

EngineCore* engine::CoreOf(LLM& llm) { return llm.core_.get(); }

Result<std::vector<RequestOutput>> LLM::generate(const std::vector<std::string>& prompts,
                                                 const SamplingParams& params,
                                                 const OutputCallback& on_output) {
  if (!ok()) return status_;
  std::vector<std::vector<int32_t>> ids;
  ids.reserve(prompts.size());
  for (const auto& p : prompts) ids.push_back(core_->tokenizer().Encode(p, true, false));
  return generate(ids, params, on_output);
}

Result<std::vector<RequestOutput>> LLM::generate(const std::vector<std::vector<int32_t>>& prompts,
                                                 const SamplingParams& params,
                                                 const OutputCallback& on_output) {
  if (!ok()) return status_;
  // Every request is validated before any is scheduled.
  for (const auto& p : prompts) KVF_RETURN_IF_ERROR(core_->ValidateRequest(p, params));
  std::vector<RequestOutput> results(prompts.size());
  std::vector<int64_t> ids;
  size_t remaining = prompts.size();
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto cb = [&, i](const RequestOutput& out) {
      if (on_output) on_output(out);
      if (out.finished) {
        results[i] = out;
        --remaining;
      }
    };
    KVF_ASSIGN_OR_RETURN(int64_t id, core_->AddRequest(prompts[i], params, cb, 0));
    ids.push_back(id);
  }
  while (remaining > 0 && core_->HasWork()) {
    Status s = core_->Step();
    if (!s.ok()) {
      for (int64_t id : ids) core_->Abort(id);
      return s;
    }
  }
  return results;
}

// ---------------------------------------------------------------------------------------------
// AsyncEngine

struct AsyncEngine::Impl {
  std::unique_ptr<EngineCore> core;
  EngineConfig config;
  std::string chat_template;  // read once at Create (the core does not keep GGUF metadata)
  std::thread thread;
  mutable std::mutex mu;
  std::condition_variable cv;
  struct Submission {
    int64_t id;
    std::vector<int32_t> prompt;
    SamplingParams params;
    OutputCallback cb;
    int32_t priority;
  };
  std::deque<Submission> inbox;  // guarded by mu
  std::vector<int64_t> aborts;   // guarded by mu
  bool stop = false;             // guarded by mu
  EngineStats stats;             // guarded by mu, refreshed after each step
  std::atomic<int64_t> next_id{1};
  // KV snapshots: callers take a ticket; the engine thread serves every ticket up to
  // snapshot_wanted with one snapshot between two steps (nothing is done while nobody asks).
  uint64_t snapshot_wanted = 0;    // guarded by mu
  uint64_t snapshot_made = 0;      // guarded by mu
  size_t snapshot_max_prefix = 0;  // guarded by mu
  KvSnapshot snapshot;             // guarded by mu
  EngineStats snapshot_stats;      // guarded by mu: `stats` when it was taken
  std::condition_variable snapshot_cv;
  // CurrentStats: callers take a ticket; every refresh of `stats` serves all tickets up to
  // stats_wanted.
  uint64_t stats_wanted = 0;  // guarded by mu
  uint64_t stats_made = 0;    // guarded by mu
  std::condition_variable stats_cv;

  // Called right after `stats` was refreshed, with no step in between.
  void ServeSnapshot() {
    uint64_t want = 0;
    size_t max_prefix = 0;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (snapshot_wanted == snapshot_made) return;
      want = snapshot_wanted;
      max_prefix = snapshot_max_prefix;
    }
    KvSnapshot snap = core->Snapshot(max_prefix);  // outside the lock: callers keep submitting
    {
      std::lock_guard<std::mutex> lock(mu);
      snapshot = std::move(snap);
      snapshot_stats = stats;
      snapshot_made = want;
    }
    snapshot_cv.notify_all();
  }

  void Loop() {
    for (;;) {
      std::deque<Submission> subs;
      std::vector<int64_t> abs;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] {
          return stop || !inbox.empty() || !aborts.empty() || core->HasWork() ||
                 snapshot_wanted != snapshot_made || stats_wanted != stats_made;
        });
        if (stop) break;
        subs.swap(inbox);
        abs.swap(aborts);
      }
      for (auto& s : subs) {
        auto r = core->AddRequest(std::move(s.prompt), s.params, s.cb, s.priority, s.id);
        if (!r.ok()) {
          KVF_LOG_WARN("request %lld rejected: %s", (long long)s.id, r.error().message().c_str());
          if (s.cb) {
            RequestOutput out;
            out.request_id = s.id;
            out.finished = true;
            CompletionOutput c;
            c.finish_reason = "abort";
            out.outputs.push_back(c);
            s.cb(out);
          }
        }
      }
      for (int64_t id : abs) core->Abort(id);
      if (core->HasWork()) {
        Status st = core->Step();
        if (!st.ok()) KVF_LOG_ERROR("engine step failed: %s", st.message().c_str());
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        stats = core->Stats();
        stats_made = stats_wanted;
      }
      stats_cv.notify_all();
      ServeSnapshot();
    }
    snapshot_cv.notify_all();  // waiting snapshot callers see `stop`
    stats_cv.notify_all();
    // Shutting down: every request still known gets a final "abort".
    EngineStats final_stats = core->Stats();
    (void)final_stats;
    for (int64_t id = 1; id < next_id.load(); ++id) core->Abort(id);
  }
};

AsyncEngine::AsyncEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<AsyncEngine>> AsyncEngine::Create(const EngineConfig& config) {
  auto impl = std::make_unique<Impl>();
  KVF_ASSIGN_OR_RETURN(impl->core, EngineCore::Create(config));
  impl->config = config;
  {
    // Only the metadata is parsed (the tensor data stays mapped, untouched).
    auto file = config.model.empty() ? gguf::GgufFile::FromMemory(assets::DefaultModelData(),
                                                                  assets::DefaultModelSize(),
                                                                  assets::kDefaultModelName)
                                     : gguf::GgufFile::Open(config.model);
    if (file.ok())
      if (const auto* t = (*file)->Find("tokenizer.chat_template");
          t && t->type == gguf::ValueType::kString)
        impl->chat_template = std::string(t->str);
  }
  impl->stats = impl->core->Stats();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Loop(); });
  return std::unique_ptr<AsyncEngine>(new AsyncEngine(std::move(impl)));
}

AsyncEngine::~AsyncEngine() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

Result<int64_t> AsyncEngine::Submit(std::vector<int32_t> prompt, const SamplingParams& params,
                                    OutputCallback cb, int32_t priority) {
  KVF_RETURN_IF_ERROR(impl_->core->ValidateRequest(prompt, params));
  const int64_t id = impl_->next_id.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stop) return Status::Unavailable("the engine is shutting down");
    impl_->inbox.push_back({id, std::move(prompt), params, std::move(cb), priority});
  }
  impl_->cv.notify_all();
  return id;
}

Result<std::vector<int64_t>> AsyncEngine::SubmitBatch(std::vector<std::vector<int32_t>> prompts,
                                                      const std::vector<SamplingParams>& params,
                                                      std::vector<OutputCallback> callbacks) {
  if (params.size() != prompts.size() || callbacks.size() != prompts.size())
    return Status::InvalidArgument("SubmitBatch: one SamplingParams and callback per prompt");
  for (size_t i = 0; i < prompts.size(); ++i)
    KVF_RETURN_IF_ERROR(impl_->core->ValidateRequest(prompts[i], params[i]));
  std::vector<int64_t> ids;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stop) return Status::Unavailable("the engine is shutting down");
    for (size_t i = 0; i < prompts.size(); ++i) {
      ids.push_back(impl_->next_id.fetch_add(1));
      impl_->inbox.push_back(
          {ids.back(), std::move(prompts[i]), params[i], std::move(callbacks[i]), 0});
    }
  }
  impl_->cv.notify_all();
  return ids;
}

Result<int64_t> AsyncEngine::SubmitText(const std::string& prompt, const SamplingParams& params,
                                        OutputCallback cb, int32_t priority) {
  return Submit(impl_->core->tokenizer().Encode(prompt, true, false), params, std::move(cb),
                priority);
}

void AsyncEngine::Abort(int64_t request_id) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->aborts.push_back(request_id);
  }
  impl_->cv.notify_all();
}

namespace {

// Takes a ticket from `wanted` (under `lock`), wakes the engine thread (`wake`) and waits until
// it has served the ticket (`made` reaches it, announced on `served`), shutdown, or the time-out.
Status AwaitEngineThread(std::unique_lock<std::mutex>& lock, const bool& stop, uint64_t& wanted,
                         const uint64_t& made, std::condition_variable& wake,
                         std::condition_variable& served, int timeout_ms) {
  if (stop) return Status::Unavailable("the engine is shutting down");
  const uint64_t ticket = ++wanted;
  wake.notify_all();
  if (!served.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                       [&] { return stop || made >= ticket; }))
    return Status::Unavailable("the engine did not answer within " + std::to_string(timeout_ms) +
                               " ms (a long step is running)");
  if (made < ticket) return Status::Unavailable("the engine is shutting down");
  return Status::Ok();
}

}  // namespace

Result<KvSnapshot> AsyncEngine::KvCacheSnapshot(size_t max_prefix_entries, int timeout_ms,
                                                EngineStats* stats) const {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.mu);
  m.snapshot_max_prefix = max_prefix_entries;
  KVF_RETURN_IF_ERROR(AwaitEngineThread(lock, m.stop, m.snapshot_wanted, m.snapshot_made, m.cv,
                                        m.snapshot_cv, timeout_ms));
  if (stats != nullptr) *stats = m.snapshot_stats;
  return m.snapshot;
}

Result<EngineStats> AsyncEngine::CurrentStats(int timeout_ms) const {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.mu);
  KVF_RETURN_IF_ERROR(
      AwaitEngineThread(lock, m.stop, m.stats_wanted, m.stats_made, m.cv, m.stats_cv, timeout_ms));
  return m.stats;
}

EngineStats AsyncEngine::Stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

Result<std::vector<int32_t>> AsyncEngine::Tokenize(const std::string& text, bool add_special,
                                                   bool parse_special) const {
  return impl_->core->tokenizer().Encode(text, add_special, parse_special);
}

std::string AsyncEngine::Detokenize(const std::vector<int32_t>& ids, bool render_special) const {
  return impl_->core->tokenizer().Decode(ids, render_special);
}

int64_t AsyncEngine::max_model_len() const { return impl_->core->max_model_len(); }

std::string AsyncEngine::model_name() const { return impl_->core->model_config().name; }

std::string AsyncEngine::chat_template() const { return impl_->chat_template; }

std::string AsyncEngine::bos_text() const {
  const auto& vocab = impl_->core->tokenizer().vocab();
  return vocab.bos >= 0 && static_cast<size_t>(vocab.bos) < vocab.texts.size()
             ? vocab.texts[static_cast<size_t>(vocab.bos)]
             : std::string();
}

std::string AsyncEngine::eos_text() const {
  const auto& vocab = impl_->core->tokenizer().vocab();
  return vocab.eos >= 0 && static_cast<size_t>(vocab.eos) < vocab.texts.size()
             ? vocab.texts[static_cast<size_t>(vocab.eos)]
             : std::string();
}

int64_t AsyncEngine::vocab_size() const {
  return std::min(impl_->core->tokenizer().n_vocab(), impl_->core->model_config().n_vocab);
}

const EngineConfig& AsyncEngine::config() const { return impl_->config; }

}  // namespace kvforge
