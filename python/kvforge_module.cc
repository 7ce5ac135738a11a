// python/kvforge_module.cc — the `kvforge._kvforge` extension module: the C++ engine at the
// Python edge (the vLLM-shaped classes are plain Python in python/kvforge/). It is the only TU
// that includes pybind11; Status becomes a Python exception here and nowhere else.
//
// Threads: one AsyncEngine thread owns the model and runs the steps. It never touches Python:
// its callback only moves the engine's outputs into a queue under a mutex. Python threads submit
// requests, wait for outputs (the GIL released while they wait) and abort, so the GIL is never
// held across a forward step and no Python code runs on the engine thread.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "chat/chat_template.h"
#include "chat/json.h"
#include "kvforge/config_names.h"
#include "kvforge/llm.h"
#include "kvquant/kv_dtype.h"
#include "kvstore/kv_calc.h"

namespace py = pybind11;

namespace kvforge::python {
namespace {

// Status -> the Python exception a caller expects: bad values, corrupt files and requests that
// cannot fit are ValueError, a missing file FileNotFoundError, the rest RuntimeError. (Unknown
// keyword arguments are TypeError, raised by the Python classes before anything gets here.)
[[noreturn]] void Raise(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kDataLoss:
    case StatusCode::kResourceExhausted:
    case StatusCode::kUnimplemented:
      throw py::value_error(s.message());
    case StatusCode::kNotFound:
      PyErr_SetString(PyExc_FileNotFoundError, s.message().c_str());
      throw py::error_already_set();
    default:
      throw std::runtime_error(s.message());
  }
}

// A request's KV policy from the Python dict {"name", "budget", "sinks", "window", "pool_kernel",
// "beta", "heads"} (read through the option table, SetKvPolicyParam) and "seed" (missing keys
// keep their defaults); bad values raise ValueError.
KvPolicy KvPolicyFrom(const py::handle& value) {
  const py::dict d = py::cast<py::dict>(value);
  KvPolicy k;
  for (const auto& [key_obj, v] : d) {
    const std::string key = py::cast<std::string>(key_obj);
    if (key == "seed") {
      k.seed = py::cast<uint64_t>(v);
      continue;
    }
    if (py::isinstance<py::bool_>(v))
      Raise(Status::InvalidArgument("kv_policy " + key + " must not be a bool"));
    const std::string text = py::cast<std::string>(py::str(v));
    if (Status s = SetKvPolicyParam(&k, key, text); !s.ok()) {
      if (s.code() == StatusCode::kNotFound) throw py::type_error(s.message());
      Raise(s.WithContext("kv_policy"));
    }
  }
  if (Status s = ValidateKvPolicy(k); !s.ok()) Raise(s.WithContext("kv_policy"));
  return k;
}

// structured_outputs as sampling_params.py passes it: a dict with one of json (schema text),
// json_object, regex, choice, grammar. The engine compiles it (a bad one raises ValueError).
StructuredOutputs StructuredOutputsFrom(const py::handle& value) {
  StructuredOutputs so;
  for (const auto& [key_obj, v] : py::cast<py::dict>(value)) {
    const std::string key = py::cast<std::string>(key_obj);
    if (key == "json")
      so.json = py::cast<std::string>(v);
    else if (key == "json_object")
      so.json_object = py::cast<bool>(v);
    else if (key == "regex")
      so.regex = py::cast<std::string>(v);
    else if (key == "choice")
      so.choice = py::cast<std::vector<std::string>>(v);
    else if (key == "grammar")
      so.grammar = py::cast<std::string>(v);
    else
      throw py::type_error("unknown structured_outputs field '" + key + "'");
  }
  return so;
}

// The SamplingParams fields the Python side passes, by their C++ names. One list: adding a field
// to SamplingParams means adding one line here and one attribute in sampling_params.py.
SamplingParams ToSamplingParams(const py::dict& d) {
  SamplingParams p;
  for (const auto& [key_obj, value] : d) {
    const std::string key = py::cast<std::string>(key_obj);
    if (key == "temperature")
      p.temperature = py::cast<float>(value);
    else if (key == "top_k")
      p.top_k = py::cast<int32_t>(value);
    else if (key == "top_p")
      p.top_p = py::cast<float>(value);
    else if (key == "min_p")
      p.min_p = py::cast<float>(value);
    else if (key == "repetition_penalty")
      p.repetition_penalty = py::cast<float>(value);
    else if (key == "presence_penalty")
      p.presence_penalty = py::cast<float>(value);
    else if (key == "frequency_penalty")
      p.frequency_penalty = py::cast<float>(value);
    else if (key == "penalty_last_n")
      p.penalty_last_n = py::cast<int32_t>(value);
    else if (key == "seed")
      p.seed = py::cast<uint64_t>(value);
    else if (key == "max_tokens")
      p.max_tokens = py::cast<int32_t>(value);
    else if (key == "ignore_eos")
      p.ignore_eos = py::cast<bool>(value);
    else if (key == "skip_special_tokens")
      p.skip_special_tokens = py::cast<bool>(value);
    else if (key == "stop")
      p.stop = py::cast<std::vector<std::string>>(value);
    else if (key == "stop_token_ids")
      p.stop_token_ids = py::cast<std::vector<int32_t>>(value);
    else if (key == "logprobs")
      p.logprobs = py::cast<int32_t>(value);
    else if (key == "n")
      p.n = py::cast<int32_t>(value);
    else if (key == "beam_width")
      p.beam_width = py::cast<int32_t>(value);
    else if (key == "length_penalty")
      p.length_penalty = py::cast<float>(value);
    else if (key == "cache_salt")
      p.cache_salt = py::cast<std::string>(value);
    else if (key == "kv_policy")
      p.kv_policy = KvPolicyFrom(value);
    else if (key == "logit_bias")
      p.logit_bias = py::cast<std::vector<std::pair<int32_t, float>>>(value);
    else if (key == "structured_outputs")
      p.structured_outputs = StructuredOutputsFrom(value);
    else
      throw py::type_error("unknown sampling parameter '" + key + "'");
  }
  if (Status s = p.Validate(); !s.ok()) Raise(s);
  return p;
}

py::dict ToDict(const RequestOutput& o) {
  py::dict d;
  d["request_id"] = o.request_id;
  d["prompt_token_ids"] = o.prompt_token_ids;
  d["finished"] = o.finished;
  py::list outputs;
  for (size_t i = 0; i < o.outputs.size(); ++i) {
    const CompletionOutput& c = o.outputs[i];
    py::dict out;
    out["index"] = c.index;
    out["text"] = py::bytes(c.text);  // decoded (with errors="replace") on the Python side
    out["token_ids"] = c.token_ids;
    out["finish_reason"] =
        c.finish_reason.empty() ? py::object(py::none()) : py::object(py::str(c.finish_reason));
    out["cumulative_logprob"] = c.cumulative_logprob;
    out["token_logprobs"] = c.token_logprobs;
    out["top_logprobs"] = c.top_logprobs;
    out["delta_text"] = py::bytes(i < o.delta_text.size() ? o.delta_text[i] : std::string());
    out["delta_token_ids"] =
        i < o.delta_token_ids.size() ? o.delta_token_ids[i] : std::vector<int32_t>();
    outputs.append(std::move(out));
  }
  d["outputs"] = std::move(outputs);
  py::dict m;
  m["queue_ms"] = o.metrics.queue_ms;
  m["ttft_ms"] = o.metrics.ttft_ms;
  m["e2e_ms"] = o.metrics.e2e_ms;
  m["itl_ms"] = o.metrics.itl_ms;
  m["prompt_tokens"] = o.metrics.prompt_tokens;
  m["generated_tokens"] = o.metrics.generated_tokens;
  m["num_preemptions"] = o.metrics.num_preemptions;
  m["cached_tokens"] = o.metrics.cached_tokens;
  m["kv_evicted_tokens"] = o.metrics.kv_evicted_tokens;
  m["kv_peak_tokens"] = o.metrics.kv_peak_tokens;
  m["spec_draft_tokens"] = o.metrics.spec_draft_tokens;
  m["spec_accepted_tokens"] = o.metrics.spec_accepted_tokens;
  m["spec_verify_steps"] = o.metrics.spec_verify_steps;
  d["metrics"] = std::move(m);
  return d;
}

py::dict StatsDict(const EngineStats& s) {
  py::dict d;
  d["num_running"] = s.num_running;
  d["num_waiting"] = s.num_waiting;
  d["num_swapped"] = s.num_swapped;
  d["num_preemptions"] = s.num_preemptions;
  d["kv_usage"] = s.kv_usage;
  d["kv_total_blocks"] = s.kv_total_blocks;
  d["kv_block_tokens"] = s.kv_block_tokens;
  d["kv_bytes"] = s.kv_bytes;
  d["live_tokens"] = s.live_tokens;
  d["reserved_slots"] = s.reserved_slots;
  d["prompt_tokens_total"] = s.prompt_tokens_total;
  d["generation_tokens_total"] = s.generation_tokens_total;
  d["steps"] = s.steps;
  d["prefix_caching"] = s.prefix_caching;
  d["prefix_cache_queries"] = s.prefix_cache_queries;
  d["prefix_cache_query_tokens"] = s.prefix_cache_query_tokens;
  d["prefix_cache_hit_tokens"] = s.prefix_cache_hit_tokens;
  d["prefix_cache_evicted_blocks"] = s.prefix_cache_evicted_blocks;
  d["prefix_cache_blocks"] = s.prefix_cache_blocks;
  d["kv_offload"] = s.kv_offload;
  d["kv_offload_loaded_tokens"] = s.kv_offload_loaded_tokens;
  d["kv_offload_loaded_chunks"] = s.kv_offload_loaded_chunks;
  d["kv_offload_stored_chunks"] = s.kv_offload_stored_chunks;
  d["kv_offload_rejected_chunks"] = s.kv_offload_rejected_chunks;
  d["kv_offload_dropped_writes"] = s.kv_offload_dropped_writes;
  d["kv_offload_load_timeouts"] = s.kv_offload_load_timeouts;
  d["kv_offload_prefetches"] = s.kv_offload_prefetches;
  d["kv_offload_load_waits"] = s.kv_offload_load_waits;
  d["kv_offload_deferred_chunks"] = s.kv_offload_deferred_chunks;
  d["spec_method"] = s.spec_method;
  d["spec_num_drafts"] = s.spec_num_drafts;
  d["spec_draft_tokens"] = s.spec_draft_tokens;
  d["spec_accepted_tokens"] = s.spec_accepted_tokens;
  d["spec_granted_slots"] = s.spec_granted_slots;
  d["spec_refused_offers"] = s.spec_refused_offers;
  d["spec_draft_kv_bytes"] = s.spec_draft_kv_bytes;
  py::list tiers;
  for (const KvTierStats& t : s.kv_tiers) {
    py::dict td;
    td["name"] = t.name;
    td["capacity_bytes"] = t.capacity_bytes;
    td["used_bytes"] = t.used_bytes;
    td["chunks"] = t.chunks;
    td["hits"] = t.hits;
    td["misses"] = t.misses;
    td["puts"] = t.puts;
    td["evictions"] = t.evictions;
    td["errors"] = t.errors;
    tiers.append(std::move(td));
  }
  d["kv_tiers"] = std::move(tiers);
  return d;
}

// The configuration engine options (name -> text form) make, through the option table.
EngineConfig ConfigFromOptions(const std::map<std::string, std::string>& options) {
  EngineConfig config;
  for (const auto& [name, text] : options)
    if (Status s = SetConfigField(&config, name, text); !s.ok()) Raise(s);
  return config;
}

py::dict ConfigDict(const EngineConfig& config) {
  py::dict cfg;
  for (const ConfigField& f : EngineConfigFields()) cfg[py::str(f.name)] = f.get(config);
  return cfg;
}

// An AsyncEngine with a per-request output queue that Python threads drain.
class Engine {
 public:
  explicit Engine(const std::map<std::string, std::string>& options)
      : config_(ConfigFromOptions(options)) {
    Result<std::unique_ptr<AsyncEngine>> e = [&] {
      py::gil_scoped_release release;  // loading and calibration take a while
      return AsyncEngine::Create(config_);
    }();
    if (!e.ok()) Raise(e.error());
    engine_ = std::move(*e);
  }
  ~Engine() { Close(); }

  // Stops the engine thread (aborting what runs); idempotent.
  void Close() {
    if (!engine_) return;
    py::gil_scoped_release release;
    engine_.reset();
  }

  // One streamed request: every step's output is queued (generate uses SubmitBatch).
  int64_t Submit(const std::vector<int32_t>& prompt, const py::dict& params) {
    Live();
    const SamplingParams p = ToSamplingParams(params);
    Result<int64_t> id = [&] {
      py::gil_scoped_release release;
      return engine_->Submit(prompt, p, [this](const RequestOutput& o) { Push(o); });
    }();
    if (!id.ok()) Raise(id.error());
    return *id;
  }

  // All of `prompts` at once (generate): only final outputs are queued.
  std::vector<int64_t> SubmitBatch(std::vector<std::vector<int32_t>> prompts,
                                   const std::vector<py::dict>& params) {
    Live();
    if (params.size() != prompts.size())
      throw py::value_error("one sampling params dict per prompt");
    std::vector<SamplingParams> ps;
    for (const py::dict& d : params) ps.push_back(ToSamplingParams(d));
    std::vector<OutputCallback> cbs(prompts.size(), [this](const RequestOutput& o) {
      if (o.finished) Push(o);
    });
    Result<std::vector<int64_t>> ids = [&] {
      py::gil_scoped_release release;
      return engine_->SubmitBatch(std::move(prompts), ps, std::move(cbs));
    }();
    if (!ids.ok()) Raise(ids.error());
    return *ids;
  }

  void Abort(int64_t id) {
    Live();
    py::gil_scoped_release release;
    engine_->Abort(id);
  }

  // Drops what is queued for requests nobody will wait for (an abandoned stream).
  void Discard(const std::vector<int64_t>& ids) {
    std::lock_guard<std::mutex> lock(mu_);
    for (int64_t id : ids) {
      auto it = queues_.find(id);
      if (it == queues_.end()) continue;
      const bool finished = !it->second.empty() && it->second.back().finished;
      if (finished) {
        queues_.erase(it);
      } else {
        it->second.clear();
        discarded_.insert(id);
      }
    }
  }

  size_t QueuedRequests() {
    std::lock_guard<std::mutex> lock(mu_);
    return queues_.size();
  }

  // The outputs of `ids` that arrived, waiting up to `timeout_s` for the first (GIL released).
  py::list Wait(const std::vector<int64_t>& ids, double timeout_s) {
    Live();
    std::vector<RequestOutput> got;
    {
      py::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(mu_);
      auto ready = [&] {
        for (int64_t id : ids)
          if (auto it = queues_.find(id); it != queues_.end() && !it->second.empty()) return true;
        return false;
      };
      cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), ready);
      for (int64_t id : ids) {
        auto it = queues_.find(id);
        if (it == queues_.end()) continue;
        bool finished = false;
        for (RequestOutput& o : it->second) {
          finished = finished || o.finished;
          got.push_back(std::move(o));
        }
        it->second.clear();
        if (finished) queues_.erase(it);
      }
    }
    py::list out;
    for (const RequestOutput& o : got) out.append(ToDict(o));
    return out;
  }

  std::vector<int32_t> Tokenize(const std::string& text, bool add_special, bool parse_special) {
    Live();
    Result<std::vector<int32_t>> ids = engine_->Tokenize(text, add_special, parse_special);
    if (!ids.ok()) Raise(ids.error());
    return *ids;
  }
  py::bytes Detokenize(const std::vector<int32_t>& ids, bool skip_special_tokens) {
    Live();
    return py::bytes(engine_->Detokenize(ids, !skip_special_tokens));
  }
  // Counted up to the end of the step running now, so a request generate() has just returned
  // is in them; the last refreshed counters if that step takes longer than 10 s.
  py::dict Stats() {
    Live();
    const EngineStats s = [&] {
      py::gil_scoped_release release;
      Result<EngineStats> r = engine_->CurrentStats(10000);
      return r.ok() ? *r : engine_->Stats();
    }();
    return StatsDict(s);
  }
  py::dict Info() {
    Live();
    py::dict d;
    d["model_name"] = engine_->model_name();
    d["chat_template"] = engine_->chat_template();
    d["bos_text"] = engine_->bos_text();
    d["eos_text"] = engine_->eos_text();
    d["vocab_size"] = engine_->vocab_size();
    d["max_model_len"] = engine_->max_model_len();
    d["config"] = ConfigDict(config_);
    return d;
  }

 private:
  void Live() const {
    if (!engine_) throw std::runtime_error("the engine was shut down");
  }
  // Engine thread: no Python here.
  void Push(const RequestOutput& o) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (discarded_.count(o.request_id)) {
        if (o.finished) {
          discarded_.erase(o.request_id);
          queues_.erase(o.request_id);
        }
        return;
      }
      queues_[o.request_id].push_back(o);
    }
    cv_.notify_all();
  }

  EngineConfig config_;
  std::unique_ptr<AsyncEngine> engine_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<int64_t, std::deque<RequestOutput>> queues_;  // guarded by mu_
  std::unordered_set<int64_t> discarded_;  // guarded by mu_: outputs dropped until the last
};

py::list ConfigFields() {
  py::list out;
  for (const ConfigField& f : EngineConfigFields()) {
    static const char* kKinds[] = {"bool", "int", "uint", "float", "str", "choice"};
    py::dict d;
    d["name"] = f.name;
    d["kind"] = kKinds[static_cast<int>(f.kind)];
    d["help"] = f.help;
    d["choices"] = f.choices;
    d["default"] = f.get(EngineConfig{});
    d["group"] = f.group;
    d["byte_size"] = f.byte_size;
    d["per_request"] = f.per_request;
    d["request_key"] = f.request_key;
    d["flag"] = "--" + ConfigFlagName(f.name);
    out.append(std::move(d));
  }
  return out;
}

// `kvforge calc` as JSON (the same computation and the same fields as `calc --json`).
std::string Calc(const std::string& preset, int64_t layers, int64_t heads, int64_t kv_heads,
                 int64_t head_dim, int64_t mla_rank, int64_t rope_dim, int64_t seq_len,
                 int64_t batch, const std::string& dtype, int64_t block_tokens) {
  kvstore::KvCalcRequest req;
  if (!preset.empty()) {
    const kvstore::KvModelSpec* spec = kvstore::FindKvPreset(preset);
    if (spec == nullptr)
      Raise(Status::InvalidArgument("unknown preset '" + preset + "' (choose from " +
                                    kvstore::KvPresetNames() + ")"));
    req.model = *spec;
  } else {
    req.model.name = "custom";
    req.model.n_layers = layers;
    req.model.n_heads = heads;
    req.model.n_kv_heads = kv_heads;
    req.model.head_dim = head_dim;
    req.model.mla_kv_lora_rank = mla_rank;
    req.model.mla_rope_dim = rope_dim;
  }
  req.seq_len = seq_len;
  req.batch = batch;
  req.block_tokens = block_tokens;
  Result<kvquant::KvDtype> d = kvquant::ParseKvDtype(dtype);
  if (!d.ok()) Raise(d.error());
  req.dtype = *d;
  Result<kvstore::KvCalcReport> report = kvstore::ComputeKvCalc(req);
  if (!report.ok()) Raise(report.error());
  return kvstore::FormatKvCalcJson(*report);
}

py::bytes RenderChat(const std::string& source, const std::string& messages_json,
                     const std::string& bos, const std::string& eos, bool add_generation_prompt) {
  Result<chat::ChatTemplate> tmpl =
      chat::ChatTemplate::Parse(source.empty() ? std::string(chat::kDefaultChatTemplate) : source);
  if (!tmpl.ok()) Raise(tmpl.error().WithContext("chat template"));
  chat::ChatInputs in;
  Result<chat::Value> messages = chat::ParseJson(messages_json);
  if (!messages.ok()) Raise(messages.error().WithContext("messages"));
  in.messages = std::move(*messages);
  in.bos_token = bos;
  in.eos_token = eos;
  in.add_generation_prompt = add_generation_prompt;
  Result<std::string> out = tmpl->Render(in);
  if (!out.ok()) Raise(Status::InvalidArgument("chat template: " + out.error().message()));
  return py::bytes(*out);
}

}  // namespace
}  // namespace kvforge::python

PYBIND11_MODULE(_kvforge, m) {
  using kvforge::python::Engine;
  m.doc() = "kvforge engine binding (use the classes in the kvforge package)";
  py::class_<Engine>(m, "Engine")
      .def(py::init<const std::map<std::string, std::string>&>(), py::arg("options"))
      .def("submit", &Engine::Submit, py::arg("prompt_token_ids"), py::arg("params"))
      .def("submit_batch", &Engine::SubmitBatch, py::arg("prompts"), py::arg("params"))
      .def("abort", &Engine::Abort, py::arg("request_id"))
      .def("wait", &Engine::Wait, py::arg("request_ids"), py::arg("timeout_s"))
      .def("tokenize", &Engine::Tokenize, py::arg("text"), py::arg("add_special"),
           py::arg("parse_special"))
      .def("detokenize", &Engine::Detokenize, py::arg("token_ids"),
           py::arg("skip_special_tokens") = true)
      .def("discard", &Engine::Discard, py::arg("request_ids"))
      .def("queued_requests", &Engine::QueuedRequests)
      .def("stats", &Engine::Stats)
      .def("info", &Engine::Info)
      .def("close", &Engine::Close);
  m.def("config_fields", &kvforge::python::ConfigFields);
  m.def(
      "resolve_config",
      [](const std::map<std::string, std::string>& options) {
        return kvforge::python::ConfigDict(kvforge::python::ConfigFromOptions(options));
      },
      py::arg("options"));
  m.def(
      "check_sampling_params",
      [](const py::dict& d) { (void)kvforge::python::ToSamplingParams(d); }, py::arg("params"));
  m.def("calc", &kvforge::python::Calc, py::arg("preset"), py::arg("layers"), py::arg("heads"),
        py::arg("kv_heads"), py::arg("head_dim"), py::arg("mla_rank"), py::arg("rope_dim"),
        py::arg("seq_len"), py::arg("batch"), py::arg("dtype"), py::arg("block_tokens"));
  m.def("render_chat", &kvforge::python::RenderChat, py::arg("template"), py::arg("messages_json"),
        py::arg("bos"), py::arg("eos"), py::arg("add_generation_prompt"));
}
