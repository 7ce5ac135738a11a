// server/server.cc — endpoint logic: validation, chat templates, admission, engine submission,
// streaming, metrics (see server.h).
#include "kvforge/server.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "base/log.h"
#include "base/strings.h"
#include "base/token_ids.h"
#include "chat/chat_template.h"
#include "chat/json.h"
#include "chat/template_roles.h"
#include "chat/tool_calls.h"
#include "kvforge/config_names.h"
#include "server/anthropic_api.h"
#include "server/api_types.h"
#include "server/call.h"
#include "server/chat_pipeline.h"
#include "server/chat_reply.h"
#include "server/cors.h"
#include "server/http_transport.h"
#include "server/inspector.h"
#include "server/openai_codec.h"
#include "server/responses_api.h"
#include "server/routes.h"
#include "server/server_metrics.h"
#include "server/sse.h"

namespace kvforge::server {

namespace {

using base::StrFormat;

enum class Kind { kCompletion, kChat };

}  // namespace

struct Server::State {
  AsyncEngine* engine = nullptr;
  ServerOptions opts;
  std::string model_id;
  int64_t created = 0;
  int64_t max_model_len = 0;
  int64_t vocab_size = 0;
  int64_t seq_limit = 0;
  std::optional<chat::ChatTemplate> tmpl;
  // --tool-call-parser's format, else the one the template shows, else hermes.
  chat::ToolCallFormat tool_format = chat::ToolCallFormat::kHermes;
  std::string bos, eos;
  CodecLimits limits;

  std::unique_ptr<ServerMetrics> metrics;  // kvforge_* and vllm:* series

  std::mutex mu;
  std::condition_variable drained;
  int64_t in_flight_seqs = 0;              // guarded by mu
  bool shutting_down = false;              // guarded by mu
  std::vector<std::weak_ptr<Call>> calls;  // guarded by mu

  std::mutex rng_mu;
  std::mt19937_64 rng{std::random_device{}()};  // guarded by rng_mu

  std::unique_ptr<HttpServer> http;
  std::unique_ptr<Inspector> inspector;  // the web page's endpoints and chart sampler

  // --- helpers -------------------------------------------------------------------------------

  std::string NewId(const char* prefix) {
    std::lock_guard<std::mutex> lock(rng_mu);
    return StrFormat("%s%016llx%016llx", prefix, (unsigned long long)rng(),
                     (unsigned long long)rng());
  }

  std::string NewToolCallId(bool mistral) {
    std::lock_guard<std::mutex> lock(rng_mu);
    const uint64_t a = rng(), b = rng();
    return ToolCallId(mistral, a, b);
  }

  std::function<std::string()> ToolCallIds(bool mistral) {
    return [this, mistral] { return NewToolCallId(mistral); };
  }

  static HttpResponse Error(const Status& s, const std::string& param = "",
                            const std::string& code = "") {
    ApiError e = ErrorFromStatus(s, param);
    if (!code.empty()) e.code = code;
    return ErrorResponse(e);
  }

  Status ModelStatus(const std::string& model) const {
    if (model.empty() || model == model_id) return Status::Ok();
    return Status::NotFound(StrFormat("The model `%s` does not exist; this server serves `%s`.",
                                      model.c_str(), model_id.c_str()));
  }

  std::optional<HttpResponse> CheckModel(const std::string& model) const {
    if (Status s = ModelStatus(model); !s.ok()) return Error(s, "model", "model_not_found");
    return std::nullopt;
  }

  Status CheckTokens(const std::vector<int32_t>& ids) const {
    return base::CheckTokenIds(ids, vocab_size);
  }

  std::string Piece(int32_t id) const {
    return id >= 0 && id < vocab_size ? engine->Detokenize({id}) : "";
  }

  Result<std::string> RenderChat(const ChatInput& in) const {
    chat::ChatInputs ci;
    ci.messages = in.template_messages;
    ci.tools = in.tools;
    for (const auto& [name, value] : in.template_kwargs) ci.extra.emplace_back(name, value);
    if (!bos.empty()) ci.bos_token = bos;
    if (!eos.empty()) ci.eos_token = eos;
    ci.add_generation_prompt = in.add_generation_prompt;
    auto out = tmpl->Render(ci);
    // Template failures (raise_exception, undefined names, resource limits) are the request's.
    if (!out.ok()) return Status::InvalidArgument("chat template: " + out.error().message());
    return out;
  }

  // Templates that write the BOS text themselves must not get a second BOS.
  bool NeedsBos(const std::string& rendered) const {
    return bos.empty() || rendered.compare(0, bos.size(), bos) != 0;
  }

  Status Admit(int64_t seqs, const std::shared_ptr<Call>& call) {
    std::lock_guard<std::mutex> lock(mu);
    if (shutting_down) return Status::Unavailable("the server is shutting down");
    if (in_flight_seqs + seqs > seq_limit) {
      metrics->OnRejected();
      return Status::ResourceExhausted(
          StrFormat("the server is at capacity (%lld of %lld sequences in flight); "
                    "retry later",
                    (long long)in_flight_seqs, (long long)seq_limit));
    }
    in_flight_seqs += seqs;
    calls.erase(
        std::remove_if(calls.begin(), calls.end(), [](const auto& w) { return w.expired(); }),
        calls.end());
    calls.push_back(call);
    return Status::Ok();
  }

  void Release(int64_t seqs) {
    std::lock_guard<std::mutex> lock(mu);
    in_flight_seqs -= seqs;
    drained.notify_all();  // under the lock: Shutdown may destroy the State right after
  }

  bool ShuttingDown() {
    std::lock_guard<std::mutex> lock(mu);
    return shutting_down;
  }

  // Engine thread: metrics, then hand the output to the HTTP side, then release admission.
  void OnOutput(Call& call, size_t prompt, const RequestShape& shape, const RequestOutput& o) {
    int64_t generated = 0;
    for (const auto& d : o.delta_token_ids) generated += static_cast<int64_t>(d.size());
    if (generated > 0) metrics->OnGenerated(generated);
    if ((generated > 0 || o.finished) && call.FirstCount(prompt))
      metrics->OnPromptScheduled(o.metrics.prompt_tokens);
    if (o.finished) metrics->OnFinished(o, shape);
    call.Push(prompt, o);
    if (o.finished) Release(shape.n);
  }

  std::vector<TokenLogprob> Logprobs(const CompletionOutput& c, int32_t k) const {
    std::vector<TokenLogprob> out;
    const size_t m = std::min(c.token_ids.size(), c.token_logprobs.size());
    for (size_t t = 0; t < m; ++t) {
      TokenLogprob lp;
      lp.token = Piece(c.token_ids[t]);
      lp.logprob = c.token_logprobs[t];
      if (t < c.top_logprobs.size())
        for (size_t j = 0; j < c.top_logprobs[t].size() && static_cast<int32_t>(j) < k; ++j)
          lp.top.emplace_back(Piece(c.top_logprobs[t][j].first), c.top_logprobs[t][j].second);
      out.push_back(std::move(lp));
    }
    return out;
  }

  // --- generation ----------------------------------------------------------------------------

  struct Plan {
    Kind kind = Kind::kCompletion;
    GenerationFields gen;
    std::vector<std::vector<int32_t>> prompts;
    std::vector<std::string> echo_texts;  // completions with echo
    std::optional<ReplyPlan> reply;       // chat: read for tool calls and reasoning
    std::function<bool()> client_gone;    // the HTTP request's (may be null)
  };

  // Refuses a plan: *err says why, for each API to write in its own shape.
  static std::shared_ptr<Call> Refuse(PipelineError* err, Status s, std::string param = "",
                                      std::string code = "") {
    *err = {std::move(s), std::move(param), std::move(code)};
    return nullptr;
  }

  // The checks, admission and submission of a plan's prompts; *out becomes the parameters the
  // engine runs them with. Null on failure (*err).
  std::shared_ptr<Call> SubmitPlan(const Plan& plan, SamplingParams* out, PipelineError* err) {
    const char* prompt_param = plan.kind == Kind::kChat ? "messages" : "prompt";
    SamplingParams& params = *out;
    params = plan.gen.params;
    params.cache_salt = plan.gen.cache_salt;
    int64_t longest = 0;
    for (const auto& p : plan.prompts) {
      if (p.empty())
        return Refuse(err, Status::InvalidArgument("the prompt is empty"), prompt_param);
      longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
    }
    if (longest >= max_model_len)
      return Refuse(err,
                    Status::InvalidArgument(
                        StrFormat("This model's maximum context length is %lld tokens, but the "
                                  "prompt has %lld tokens (leaving no room to generate).",
                                  (long long)max_model_len, (long long)longest)),
                    prompt_param, "context_length_exceeded");
    const int64_t room = max_model_len - longest;
    if (!plan.gen.max_tokens_given) {
      params.max_tokens =
          static_cast<int32_t>(plan.kind == Kind::kChat ? room : std::min<int64_t>(16, room));
    } else if (params.max_tokens > room) {
      return Refuse(err,
                    Status::InvalidArgument(
                        StrFormat("This model's maximum context length is %lld tokens, but the "
                                  "request needs %lld (prompt %lld + max_tokens %d).",
                                  (long long)max_model_len, (long long)longest + params.max_tokens,
                                  (long long)longest, params.max_tokens)),
                    "max_tokens", "context_length_exceeded");
    }
    if (Status s = params.Validate(); !s.ok()) return Refuse(err, s);
    const int64_t seqs = static_cast<int64_t>(plan.prompts.size()) * params.n;
    if (seqs > seq_limit)
      return Refuse(err,
                    Status::InvalidArgument(
                        StrFormat("the request needs %lld sequences (prompts x n) but the server "
                                  "runs at most %lld at once",
                                  (long long)seqs, (long long)seq_limit)),
                    "n");
    auto call = std::make_shared<Call>(plan.prompts.size());
    if (Status s = Admit(seqs, call); !s.ok()) return Refuse(err, s);
    for (size_t i = 0; i < plan.prompts.size(); ++i) {
      const RequestShape shape{params.n, params.max_tokens};
      auto cb = [this, call, i, shape](const RequestOutput& o) { OnOutput(*call, i, shape, o); };
      auto id = engine->Submit(plan.prompts[i], params, std::move(cb), plan.gen.priority);
      if (!id.ok()) {
        call->AbortAll(engine);
        Release(static_cast<int64_t>(plan.prompts.size() - i) * params.n);
        Status s = id.error();
        // A request that can never fit the KV cache is the request's fault, not a busy server.
        if (s.code() == StatusCode::kResourceExhausted) s = Status::InvalidArgument(s.message());
        return Refuse(err, s,
                      s.message().find("max_tokens") != std::string::npos ? "max_tokens" : "");
      }
      call->SetId(i, *id, engine);
    }
    return call;
  }

  HttpResponse Generate(Plan plan) {
    SamplingParams params;
    PipelineError err;
    std::shared_ptr<Call> call = SubmitPlan(plan, &params, &err);
    if (!call) return Error(err.status, err.param, err.code);
    auto guard = std::make_shared<AbortOnRelease>();
    guard->call = call;
    guard->engine = engine;
    const std::string id = NewId(plan.kind == Kind::kChat ? "chatcmpl-" : "cmpl-");
    const int64_t now = static_cast<int64_t>(std::time(nullptr));
    if (!plan.gen.stream) return Collect(plan, params, *call, id, now);
    HttpResponse r;
    r.content_type = std::string(kSseContentType);
    auto shared_plan = std::make_shared<Plan>(std::move(plan));
    r.stream = [this, guard, shared_plan, params, id, now](StreamSink& sink) {
      Stream(sink, *shared_plan, params, *guard->call, id, now);
    };
    return r;
  }

  HttpResponse Collect(const Plan& plan, const SamplingParams& params, Call& call,
                       const std::string& id, int64_t created_s) {
    // Woken by every engine step that advances the call (and every keep-alive interval while it
    // waits in the queue), so a client that hung up is noticed within one step and its KV freed.
    std::vector<RequestOutput> finals;
    const auto wake = std::chrono::milliseconds(std::max(1, opts.stream_keepalive_ms));
    while (!call.WaitFinals(&finals, wake)) {
      if (plan.client_gone && plan.client_gone()) {
        call.AbortAll(engine);
        return Error(Status::Cancelled("the client closed the connection"));  // never delivered
      }
    }
    GenerationResponse r;
    r.id = id;
    r.created = created_s;
    r.model = model_id;
    for (size_t i = 0; i < finals.size(); ++i) {
      const RequestOutput& o = finals[i];
      if (AnyAborted(o))
        return Error(ShuttingDown() ? Status::Unavailable("the server is shutting down")
                                    : Status::Internal("the engine aborted the request"));
      r.usage.prompt_tokens += static_cast<int64_t>(o.prompt_token_ids.size());
      r.usage.cached_tokens += o.metrics.cached_tokens;
      for (const CompletionOutput& c : o.outputs) {
        Choice ch;
        ch.index = static_cast<int32_t>(i) * params.n + c.index;
        const std::string& echo =
            plan.gen.echo && i < plan.echo_texts.size() ? plan.echo_texts[i] : std::string();
        ch.text = echo + c.text;
        ch.finish_reason = c.finish_reason;
        if (plan.reply)
          ReadWholeReply(*plan.reply, ToolCallIds(plan.reply->mistral_ids), c.text, c.finish_reason,
                         &ch);
        if (plan.gen.logprobs >= 0) {
          ch.with_logprobs = true;
          ch.logprobs = Logprobs(c, plan.gen.logprobs);
          ch.text_offset = static_cast<int64_t>(echo.size());
        }
        r.usage.completion_tokens += static_cast<int64_t>(c.token_ids.size());
        r.choices.push_back(std::move(ch));
      }
    }
    std::sort(r.choices.begin(), r.choices.end(),
              [](const Choice& a, const Choice& b) { return a.index < b.index; });
    r.with_usage = true;
    return JsonResponse(plan.kind == Kind::kChat ? EncodeChatCompletion(r) : EncodeCompletion(r));
  }

  // Runs on the HTTP worker after the 200 headers went out.
  void Stream(StreamSink& sink, const Plan& plan, const SamplingParams& params, Call& call,
              const std::string& id, int64_t created_s) {
    const bool chat = plan.kind == Kind::kChat;
    const int32_t n = params.n;
    const size_t num_prompts = plan.prompts.size();
    bool ok = true;
    auto chunk = [&](Choice ch) {
      if (!ok) return;
      GenerationResponse r;
      r.id = id;
      r.created = created_s;
      r.model = model_id;
      r.null_usage = plan.gen.include_usage;
      r.choices.push_back(std::move(ch));
      ok = sink.Write(SseEvent(chat ? EncodeChatChunk(r) : EncodeCompletionChunk(r)));
    };
    for (size_t i = 0; i < num_prompts; ++i)
      for (int32_t j = 0; j < n; ++j) {
        Choice ch;
        ch.index = static_cast<int32_t>(i) * n + j;
        if (chat) {
          ch.role_delta = true;
          chunk(std::move(ch));
        } else if (plan.gen.echo && i < plan.echo_texts.size()) {
          ch.text = plan.echo_texts[i];
          chunk(std::move(ch));
        }
      }
    // Chat replies read for tool calls and reasoning: one parser per choice.
    std::vector<std::optional<ChoiceReply>> replies(num_prompts * static_cast<size_t>(n));
    if (plan.reply)
      for (auto& r : replies) r.emplace(*plan.reply, ToolCallIds(plan.reply->mistral_ids));
    Usage usage;
    size_t finished = 0;
    const auto keepalive = std::chrono::milliseconds(opts.stream_keepalive_ms);
    while (ok && finished < num_prompts) {
      Call::Event ev;
      if (!call.Next(&ev, keepalive)) {
        ok = sink.Write(kSseKeepAlive);
        continue;
      }
      const RequestOutput& o = ev.out;
      const int32_t base = static_cast<int32_t>(ev.prompt) * n;
      for (size_t k = 0; k < o.outputs.size() && k < o.delta_text.size(); ++k) {
        if (o.delta_text[k].empty()) continue;
        Choice ch;
        ch.index = base + o.outputs[k].index;
        auto& reply = replies[static_cast<size_t>(ch.index)];
        if (reply.has_value()) {
          if (reply->Feed(o.delta_text[k], &ch)) chunk(std::move(ch));
          continue;
        }
        ch.text = o.delta_text[k];
        chunk(std::move(ch));
      }
      if (!o.finished) continue;
      ++finished;
      if (AnyAborted(o)) {
        if (ok) {
          const Status s = ShuttingDown() ? Status::Unavailable("the server is shutting down")
                                          : Status::Internal("the engine aborted the request");
          ok = sink.Write(SseEvent(EncodeError(ErrorFromStatus(s)))) && sink.Write(kSseDone);
        }
        call.AbortAll(engine);
        return;
      }
      usage.prompt_tokens += static_cast<int64_t>(o.prompt_token_ids.size());
      usage.cached_tokens += o.metrics.cached_tokens;
      for (const CompletionOutput& c : o.outputs) {
        usage.completion_tokens += static_cast<int64_t>(c.token_ids.size());
        Choice ch;
        ch.index = base + c.index;
        ch.finish_reason = c.finish_reason;
        if (plan.reply) {
          auto& reply = replies[static_cast<size_t>(ch.index)];
          Choice rest;
          rest.index = ch.index;
          if (reply->Finish(&rest)) chunk(std::move(rest));
          ch.finish_reason = reply->FinishReason(c.finish_reason);
        }
        ch.empty_delta = true;
        if (plan.gen.logprobs >= 0) {
          // The engine reports log-probabilities with the final output: they ride on the last
          // chunk.
          ch.with_logprobs = true;
          ch.logprobs = Logprobs(c, plan.gen.logprobs);
        }
        chunk(std::move(ch));
      }
    }
    if (!ok) {
      call.AbortAll(engine);  // the client is gone: free its KV blocks now
      return;
    }
    if (plan.gen.include_usage) {
      GenerationResponse r;
      r.id = id;
      r.created = created_s;
      r.model = model_id;
      r.with_usage = true;
      r.usage = usage;
      ok = sink.Write(SseEvent(chat ? EncodeChatChunk(r) : EncodeCompletionChunk(r)));
    }
    if (ok) sink.Write(kSseDone);
  }

  // --- endpoints -----------------------------------------------------------------------------

  HttpResponse Completions(const HttpRequest& req) {
    CompletionRequest cr;
    std::string param;
    if (Status s = ParseCompletionRequest(req.body, limits, &cr, &param); !s.ok())
      return Error(s, param);
    if (auto e = CheckModel(cr.gen.model)) return *e;
    Plan plan;
    plan.kind = Kind::kCompletion;
    plan.gen = std::move(cr.gen);
    plan.client_gone = req.client_gone;
    for (Prompt& p : cr.prompts) {
      if (p.is_tokens) {
        if (Status s = CheckTokens(p.tokens); !s.ok()) return Error(s, "prompt");
        if (plan.gen.echo) plan.echo_texts.push_back(engine->Detokenize(p.tokens));
        plan.prompts.push_back(std::move(p.tokens));
      } else {
        auto ids = engine->Tokenize(p.text, /*add_special=*/true, /*parse_special=*/false);
        if (!ids.ok()) return Error(ids.error(), "prompt");
        if (plan.gen.echo) plan.echo_texts.push_back(p.text);
        plan.prompts.push_back(std::move(*ids));
      }
    }
    return Generate(std::move(plan));
  }

  HttpResponse ChatCompletions(const HttpRequest& req) {
    ChatRequest cr;
    std::string param;
    if (Status s = ParseChatRequest(req.body, limits, &cr, &param); !s.ok()) return Error(s, param);
    if (auto e = CheckModel(cr.gen.model)) return *e;
    auto text = RenderChat(cr.chat);
    if (!text.ok()) return Error(text.error(), "messages");
    auto ids = engine->Tokenize(*text, NeedsBos(*text), /*parse_special=*/true);
    if (!ids.ok()) return Error(ids.error(), "messages");
    Plan plan;
    plan.kind = Kind::kChat;
    plan.gen = std::move(cr.gen);
    plan.client_gone = req.client_gone;
    if (Status s = PlanChatReply(cr.tools, tool_format, !opts.reasoning_parser.empty(), *text,
                                 &plan.gen.params, &plan.reply, &param);
        !s.ok())
      return Error(s, param);
    plan.prompts.push_back(std::move(*ids));
    return Generate(std::move(plan));
  }

  HttpResponse Models(const HttpRequest&) {
    ModelCard card;
    card.id = model_id;
    card.created = created;
    card.max_model_len = max_model_len;
    return JsonResponse(EncodeModels({card}));
  }

  HttpResponse Health(const HttpRequest&) {
    const bool ok = !ShuttingDown();
    return JsonResponse(EncodeHealth(ok), ok ? 200 : 503);
  }

  HttpResponse Metrics(const HttpRequest&) {
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = metrics->Render(engine->Stats());
    return r;
  }

  HttpResponse Tokenize(const HttpRequest& req) {
    TokenizeRequest tr;
    std::string param;
    if (Status s = ParseTokenizeRequest(req.body, limits, &tr, &param); !s.ok())
      return Error(s, param);
    if (auto e = CheckModel(tr.model)) return *e;
    Result<std::vector<int32_t>> ids = std::vector<int32_t>{};
    if (tr.is_chat) {
      auto text = RenderChat(tr.chat);
      if (!text.ok()) return Error(text.error(), "messages");
      ids = engine->Tokenize(
          *text, tr.add_special_tokens_given ? tr.add_special_tokens : NeedsBos(*text), true);
    } else {
      ids = engine->Tokenize(tr.prompt, tr.add_special_tokens, false);
    }
    if (!ids.ok()) return Error(ids.error(), tr.is_chat ? "messages" : "prompt");
    TokenizeResponse out;
    out.tokens = std::move(*ids);
    out.max_model_len = max_model_len;
    out.with_token_strs = tr.return_token_strs;
    if (tr.return_token_strs)
      for (int32_t t : out.tokens) out.token_strs.push_back(Piece(t));
    return JsonResponse(EncodeTokenize(out));
  }

  HttpResponse Detokenize(const HttpRequest& req) {
    DetokenizeRequest dr;
    std::string param;
    if (Status s = ParseDetokenizeRequest(req.body, limits, &dr, &param); !s.ok())
      return Error(s, param);
    if (auto e = CheckModel(dr.model)) return *e;
    if (Status s = CheckTokens(dr.tokens); !s.ok()) return Error(s, "tokens");
    return JsonResponse(EncodeDetokenize(engine->Detokenize(dr.tokens)));
  }

  // --- the other API shapes (Anthropic's Messages, OpenAI's Responses) ------------------------

  // The chat pipeline of ChatCompletions, as chat_pipeline.h offers it to them.
  class Pipeline final : public ChatPipeline {
   public:
    explicit Pipeline(State* st) : st_(st) {}
    const std::string& model_id() const override { return st_->model_id; }
    const CodecLimits& limits() const override { return st_->limits; }
    Status CheckModel(const std::string& model) const override { return st_->ModelStatus(model); }
    Result<std::string> Render(const ChatInput& in) const override { return st_->RenderChat(in); }
    Result<std::vector<int32_t>> Tokenize(const std::string& rendered) const override {
      return st_->engine->Tokenize(rendered, st_->NeedsBos(rendered), /*parse_special=*/true);
    }
    Status PlanReply(const ToolRequest& tools, const std::string& prompt, SamplingParams* params,
                     std::optional<ReplyPlan>* plan, std::string* param) const override {
      return PlanChatReply(tools, st_->tool_format, !st_->opts.reasoning_parser.empty(), prompt,
                           params, plan, param);
    }
    std::shared_ptr<AbortOnRelease> Submit(const GenerationFields& gen, std::vector<int32_t> prompt,
                                           PipelineError* err) override {
      Plan plan;
      plan.kind = Kind::kChat;
      plan.gen = gen;
      plan.prompts.push_back(std::move(prompt));
      SamplingParams params;
      std::shared_ptr<Call> call = st_->SubmitPlan(plan, &params, err);
      if (!call) return nullptr;
      auto guard = std::make_shared<AbortOnRelease>();
      guard->call = std::move(call);
      guard->engine = st_->engine;
      return guard;
    }
    std::string NewId(const char* prefix) override { return st_->NewId(prefix); }
    std::function<std::string()> ToolCallIds(bool mistral) override {
      return st_->ToolCallIds(mistral);
    }
    bool ShuttingDown() const override { return st_->ShuttingDown(); }
    int keepalive_ms() const override { return st_->opts.stream_keepalive_ms; }

   private:
    State* st_;
  };
  Pipeline pipeline{this};
};

Server::Server(std::unique_ptr<State> state) : state_(std::move(state)) {}

Server::~Server() { Shutdown(); }

Result<std::unique_ptr<Server>> Server::Create(AsyncEngine* engine, const ServerOptions& options) {
  if (engine == nullptr) return Status::InvalidArgument("the server needs an engine");
  if (options.port < 0 || options.port > 65535)
    return Status::InvalidArgument("--port must be in 0..65535");
  if (options.max_body_bytes < 64)
    return Status::InvalidArgument("--max-body-bytes must be at least 64");
  if (options.max_queue < 0) return Status::InvalidArgument("--max-queue must not be negative");
  if (options.http_threads < 0 || options.http_threads > 4096)
    return Status::InvalidArgument("--http-threads must be in 0..4096");
  if (options.stream_keepalive_ms <= 0)
    return Status::InvalidArgument("the stream keep-alive must be positive");
  if (options.history_interval_ms < 10 || options.history_interval_ms > 3600 * 1000)
    return Status::InvalidArgument("the history interval must be in 10 ms .. 1 h");
  auto st = std::make_unique<State>();
  st->engine = engine;
  st->opts = options;
  st->model_id = options.served_model_name.empty() ? "kvforge" : options.served_model_name;
  st->created = static_cast<int64_t>(std::time(nullptr));
  st->max_model_len = engine->max_model_len();
  st->vocab_size = engine->vocab_size();
  st->seq_limit = engine->config().max_num_seqs + options.max_queue;
  st->bos = engine->bos_text();
  st->eos = engine->eos_text();
  const std::string model_template = engine->chat_template();
  const std::string source = !options.chat_template.empty() ? options.chat_template
                             : !model_template.empty()      ? model_template
                                                       : std::string(chat::kDefaultChatTemplate);
  auto tmpl = chat::ChatTemplate::Parse(source);
  if (!tmpl.ok()) return tmpl.error().WithContext("chat template");
  st->tmpl.emplace(std::move(*tmpl));
  if (!options.tool_call_parser.empty()) {
    auto format = chat::ToolCallFormatFromName(options.tool_call_parser);
    if (!format.ok()) return format.status();
    st->tool_format = *format;
  } else if (auto shown = chat::DetectToolCallFormat(source)) {
    st->tool_format = *shown;
  }
  if (!options.reasoning_parser.empty() && options.reasoning_parser != "deepseek_r1" &&
      options.reasoning_parser != "qwen3")
    return Status::InvalidArgument("unknown reasoning parser '" + options.reasoning_parser +
                                   "' (expected deepseek_r1 or qwen3)");
  st->limits.template_roles = chat::RolesNamedByTemplate(source);
  if (source.find("tool_calls") == std::string::npos)
    st->limits.tool_calls_as_text = st->tool_format;

  ServedModelInfo info;
  info.model_name = st->model_id;
  info.max_model_len = st->max_model_len;
  const EngineStats stats = engine->Stats();
  info.block_tokens = stats.kv_block_tokens;
  info.num_blocks = stats.kv_total_blocks;
  info.cache_dtype = ConfigName(engine->config().kv_cache_dtype);
  st->metrics = std::make_unique<ServerMetrics>(info);
  InspectorOptions io;
  io.interval_ms = options.history_interval_ms;
  st->inspector = std::make_unique<Inspector>(engine, st->metrics->ttft(), st->metrics->itl(),
                                              st->model_id, io);
  return std::unique_ptr<Server>(new Server(std::move(st)));
}

Status Server::Start() {
  State* st = state_.get();
  if (st->http) return Status::InvalidArgument("the server was already started");
  Endpoints ep;
  ep.completions = [st](const HttpRequest& r) { return st->Completions(r); };
  ep.chat_completions = [st](const HttpRequest& r) { return st->ChatCompletions(r); };
  ep.models = [st](const HttpRequest& r) { return st->Models(r); };
  ep.health = [st](const HttpRequest& r) { return st->Health(r); };
  ep.metrics = [st](const HttpRequest& r) { return st->Metrics(r); };
  ep.tokenize = [st](const HttpRequest& r) { return st->Tokenize(r); };
  ep.detokenize = [st](const HttpRequest& r) { return st->Detokenize(r); };
  Inspector* insp = st->inspector.get();
  ep.kv_snapshot = [insp](const HttpRequest& r) { return insp->KvSnapshot(r); };
  ep.kv_history = [insp](const HttpRequest& r) { return insp->History(r); };
  if (st->opts.webui) ep.webui = [insp](const HttpRequest& r) { return insp->Page(r); };
  ChatPipeline* pipe = &st->pipeline;
  ep.messages = [pipe](const HttpRequest& r) { return HandleMessages(*pipe, r); };
  ep.messages_count_tokens = [pipe](const HttpRequest& r) { return HandleCountTokens(*pipe, r); };
  ep.responses = [pipe](const HttpRequest& r) { return HandleResponses(*pipe, r); };
  StatusObserver observe = [st](int code) { st->metrics->OnHttpStatus(code); };
  HttpServerOptions ho;
  ho.host = st->opts.host;
  ho.port = st->opts.port;
  ho.max_body_bytes = st->opts.max_body_bytes;
  ho.threads = st->opts.http_threads > 0
                   ? st->opts.http_threads
                   : static_cast<int>(std::clamp<int64_t>(st->seq_limit + 16, 16, 1024));
  ho.keep_alive_timeout_s = st->opts.keep_alive_timeout_s;
  ho.write_timeout_s = st->opts.write_timeout_s;
  ho.tls_cert_file = st->opts.ssl_certfile;
  ho.tls_key_file = st->opts.ssl_keyfile;
  if (!st->opts.allowed_origins.empty()) {
    CorsPolicy cors;
    cors.origins = st->opts.allowed_origins;
    if (!st->opts.allowed_methods.empty()) cors.methods = st->opts.allowed_methods;
    if (!st->opts.allowed_headers.empty()) cors.headers = st->opts.allowed_headers;
    cors.allow_credentials = st->opts.allow_credentials;
    ho.intercept = [cors, observe](const HttpRequest& r) -> std::optional<HttpResponse> {
      if (!IsPreflight(r)) return std::nullopt;
      HttpResponse out = PreflightResponse(cors, r);
      observe(out.status);
      return out;
    };
    ho.response_headers = [cors](const HttpRequest& r) {
      return CorsResponseHeaders(cors, r.Header("Origin"));
    };
  }
  st->http = std::make_unique<HttpServer>(ho, BuildRoutes(ep, st->opts.api_key, observe),
                                          MakeErrorBuilder(observe));
  Status s = st->http->Start();
  if (!s.ok()) {
    st->http.reset();
    return s;
  }
  st->inspector->Start();
  return s;
}

int Server::port() const { return state_->http ? state_->http->port() : -1; }

std::string Server::url() const {
  const std::string& host = state_->opts.host;
  const char* scheme = state_->opts.ssl_certfile.empty() ? "http" : "https";
  return host.find(':') != std::string::npos
             ? StrFormat("%s://[%s]:%d", scheme, host.c_str(), port())
             : StrFormat("%s://%s:%d", scheme, host.c_str(), port());
}

const std::string& Server::model_id() const { return state_->model_id; }

void Server::Shutdown() {
  State* st = state_.get();
  std::vector<std::shared_ptr<Call>> live;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    st->shutting_down = true;
    for (const auto& w : st->calls)
      if (auto c = w.lock()) live.push_back(std::move(c));
    st->calls.clear();
  }
  for (const auto& c : live) c->AbortAll(st->engine);
  live.clear();
  if (st->http) st->http->Stop();  // running handlers end: their requests were aborted
  st->inspector->Stop();
  std::unique_lock<std::mutex> lock(st->mu);
  if (!st->drained.wait_for(lock, std::chrono::seconds(30),
                            [&] { return st->in_flight_seqs == 0; }))
    KVF_LOG_WARN("server shutdown: %lld sequences still in flight after 30 s",
                 (long long)st->in_flight_seqs);
}

}  // namespace kvforge::server
