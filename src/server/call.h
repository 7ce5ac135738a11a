// server/call.h — one HTTP generation request as the server tracks it: its engine requests (one
// per prompt) and the outputs the engine thread hands over to the HTTP worker.
// Thread-safety: Push from the engine thread; the rest from the HTTP worker; all guarded inside.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "kvforge/llm.h"

namespace kvforge::server {

// Whether the engine aborted a request (client gone, shutdown, rejection): a final output with
// no completions, or one whose completion ended "abort".
inline bool AnyAborted(const RequestOutput& o) {
  if (o.outputs.empty()) return true;
  for (const auto& c : o.outputs)
    if (c.finish_reason == "abort") return true;
  return false;
}

class Call {
 public:
  struct Event {
    size_t prompt = 0;
    RequestOutput out;
  };

  explicit Call(size_t num_prompts)
      : ids_(num_prompts, 0),
        finished_(num_prompts, false),
        counted_(num_prompts, false),
        finals_(num_prompts) {}

  // Engine thread.
  void Push(size_t prompt, const RequestOutput& out) {
    std::lock_guard<std::mutex> lock(mu_);
    if (out.finished && !finished_[prompt]) {
      finished_[prompt] = true;
      ++num_finished_;
      finals_[prompt] = out;
    }
    events_.push_back({prompt, out});
    cv_.notify_all();
  }
  // True the first time it is asked for `prompt` (its prompt tokens are counted once).
  bool FirstCount(size_t prompt) {
    std::lock_guard<std::mutex> lock(mu_);
    if (counted_[prompt]) return false;
    counted_[prompt] = true;
    return true;
  }

  // HTTP thread: the next event, or false after `timeout` without one.
  bool Next(Event* ev, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
    *ev = std::move(events_.front());
    events_.pop_front();
    return true;
  }
  // Waits until every prompt's final output arrived (true, *out set) or, sooner, until any
  // output arrives or `timeout` passes (false): the caller checks on its client in between.
  bool WaitFinals(std::vector<RequestOutput>* out, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return num_finished_ == ids_.size() || !events_.empty(); });
    events_.clear();
    if (num_finished_ != ids_.size()) return false;
    *out = finals_;
    return true;
  }

  // Records a prompt's engine id; when the call was aborted meanwhile, aborts it at once.
  void SetId(size_t prompt, int64_t id, AsyncEngine* engine) {
    bool abort = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ids_[prompt] = id;
      abort = aborted_ && !finished_[prompt];
    }
    if (abort) engine->Abort(id);
  }
  // Aborts every engine request of the call that has not finished (and any submitted later).
  void AbortAll(AsyncEngine* engine) {
    std::vector<int64_t> ids;
    {
      std::lock_guard<std::mutex> lock(mu_);
      aborted_ = true;
      for (size_t i = 0; i < ids_.size(); ++i)
        if (ids_[i] != 0 && !finished_[i]) ids.push_back(ids_[i]);
    }
    for (int64_t id : ids) engine->Abort(id);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int64_t> ids_;           // guarded by mu_; 0: not submitted
  std::vector<bool> finished_;         // guarded by mu_
  std::vector<bool> counted_;          // guarded by mu_
  std::vector<RequestOutput> finals_;  // guarded by mu_
  size_t num_finished_ = 0;            // guarded by mu_
  bool aborted_ = false;               // guarded by mu_
  std::deque<Event> events_;           // guarded by mu_
};

// Owned by the HTTP side only: when the response (or its stream) is released — finished, client
// gone, or never sent — whatever still runs is aborted.
struct AbortOnRelease {
  std::shared_ptr<Call> call;
  AsyncEngine* engine = nullptr;
  ~AbortOnRelease() {
    if (call) call->AbortAll(engine);
  }
};

}  // namespace kvforge::server
