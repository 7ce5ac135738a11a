// server/openai_codec.cc — the OpenAI API's JSON (nlohmann/json is included here and in
// inspector_codec.cc only).
#include "server/openai_codec.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "base/strings.h"
#include "kvforge/config_names.h"
#include "server/chat_values.h"
#include "server/json_fields.h"
#include "server/openai_structured.h"
#include "server/openai_tools.h"

namespace kvforge::server {
namespace {

using namespace json_fields;  // NOLINT: the codec's own helpers

struct DepthExceeded {};

}  // namespace

Status json_fields::ParseObject(std::string_view body, int max_depth, json* out) {
  if (body.empty())
    return Status::InvalidArgument("the request body is empty; expected a JSON object");
  try {
    json::parser_callback_t cb = [max_depth](int depth, json::parse_event_t, json&) {
      if (depth > max_depth) throw DepthExceeded{};
      return true;
    };
    *out = json::parse(body.begin(), body.end(), cb);
  } catch (const DepthExceeded&) {
    return Status::InvalidArgument(
        StrFormat("the request body nests deeper than %d levels", max_depth));
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("malformed JSON in the request body: ") + e.what());
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("cannot parse the request body: ") + e.what());
  }
  if (!out->is_object()) return Status::InvalidArgument("the request body must be a JSON object");
  return Status::Ok();
}

namespace {

// "kv_policy": a name ("snapkv", with the budget in "kv_budget") or an object {"name", "budget",
// "sinks", "window", "pool_kernel", "beta", "seed", "heads"}; kvforge's extension, checked like the
// rest.
Status ParseKvPolicyField(const Fields& f, std::string* param, SamplingParams* p) {
  const json* v = f.Get("kv_policy");
  if (v == nullptr) {
    if (f.Get("kv_budget") != nullptr) return f.Fail("kv_budget", "'kv_budget' needs 'kv_policy'");
    return Status::Ok();
  }
  KvPolicy policy;
  std::string name;
  float budget = 0;
  if (v->is_string()) {
    name = v->get<std::string>();
    KVF_RETURN_IF_ERROR(f.Number("kv_budget", 0, 1e9, true, &budget));
  } else if (v->is_object()) {
    // Our own object, read through the option table (SetKvPolicyParam): a misspelt key would
    // silently fall back to a default, so it is refused.
    Fields pf(*v, param, "kv_policy.");
    for (const auto& item : v->items()) {
      const std::string& key = item.key();
      if (key == "seed") continue;
      const json& val = item.value();
      if (!val.is_string() && !val.is_number())
        return pf.WrongType(key.c_str(), "a number or a name", val);
      const std::string text = val.is_string() ? val.get<std::string>() : val.dump();
      if (key == "name") {
        name = text;
        continue;
      }
      if (Status st = SetKvPolicyParam(&policy, key, text); !st.ok())
        return pf.Fail(key.c_str(), st.code() == StatusCode::kNotFound
                                        ? "unknown field 'kv_policy." + key + "' (" +
                                              KvPolicyParamNames() + ", seed)"
                                        : st.message());
    }
    if (name.empty()) return pf.Fail("name", "'kv_policy.name' is required");
    budget = static_cast<float>(policy.budget);
    bool given = false;
    int64_t seed = 0;
    KVF_RETURN_IF_ERROR(pf.Int("seed", 0, std::numeric_limits<int64_t>::max(), &given, &seed));
    policy.seed = static_cast<uint64_t>(seed);
  } else {
    return f.WrongType("kv_policy", "a policy name or an object", *v);
  }
  Result<KvPolicyKind> kind = ParseKvPolicyKind(name);
  if (!kind.ok()) return f.Fail("kv_policy", kind.error().message());
  policy.kind = *kind;
  policy.budget = budget;
  if (policy.enabled() && !(budget > 0))
    return f.Fail("kv_policy", "an eviction policy needs a budget (tokens, or a fraction)");
  if (Status st = ValidateKvPolicy(policy); !st.ok()) return f.Fail("kv_policy", st.message());
  p->kv_policy = policy;
  return Status::Ok();
}

Status ParseTokenArray(const json& arr, const char* param_name, std::string* param,
                       std::vector<int32_t>* out) {
  out->clear();
  out->reserve(arr.size());
  for (const json& t : arr) {
    const bool ok = t.is_number_unsigned() ? t.get<uint64_t>() <= static_cast<uint64_t>(kInt32Max)
                                           : t.is_number_integer() && t.get<int64_t>() >= 0 &&
                                                 t.get<int64_t>() <= kInt32Max;
    if (!ok) {
      *param = param_name;
      return Status::InvalidArgument(StrFormat("'%s' must hold token ids (integers from 0 to %lld)",
                                               param_name, (long long)kInt32Max));
    }
    out->push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return Status::Ok();
}

// prompt: a string, an array of strings, an array of token ids, or an array of such arrays.
Status ParsePrompts(const Fields& f, const CodecLimits& limits, std::string* param,
                    std::vector<Prompt>* out) {
  const json* p = f.Get("prompt");
  if (p == nullptr) return f.Fail("prompt", "'prompt' is required");
  if (p->is_string()) {
    out->push_back({false, p->get<std::string>(), {}});
    return Status::Ok();
  }
  if (!p->is_array())
    return f.WrongType("prompt", "a string, an array of strings or an array of token ids", *p);
  if (p->empty()) return f.Fail("prompt", "'prompt' must not be an empty array");
  const json& first = p->front();
  if (first.is_number_integer()) {
    Prompt one;
    one.is_tokens = true;
    KVF_RETURN_IF_ERROR(ParseTokenArray(*p, "prompt", param, &one.tokens));
    out->push_back(std::move(one));
    return Status::Ok();
  }
  if (p->size() > limits.max_prompts)
    return f.Fail("prompt", StrFormat("at most %zu prompts per request", limits.max_prompts));
  for (const json& e : *p) {
    if (first.is_string() && e.is_string()) {
      out->push_back({false, e.get<std::string>(), {}});
    } else if (first.is_array() && e.is_array()) {
      if (e.empty()) return f.Fail("prompt", "a token-id prompt must not be empty");
      Prompt one;
      one.is_tokens = true;
      KVF_RETURN_IF_ERROR(ParseTokenArray(e, "prompt", param, &one.tokens));
      out->push_back(std::move(one));
    } else {
      return f.Fail(
          "prompt",
          "'prompt' must be a string, an array of strings, an array of token ids or an array of "
          "token-id arrays (not a mix)");
    }
  }
  return Status::Ok();
}

// Sampling and streaming fields common to both generation endpoints.
Status ParseGenerationFields(const Fields& f, const CodecLimits& limits, bool chat,
                             GenerationFields* g, std::string* param) {
  SamplingParams& p = g->params;
  // OpenAI's defaults, not the CLI's.
  p.temperature = 1.0f;
  p.top_p = 1.0f;
  p.top_k = 0;
  p.min_p = 0.0f;
  p.repetition_penalty = 1.0f;
  p.presence_penalty = 0.0f;
  p.frequency_penalty = 0.0f;
  p.max_tokens = 16;
  p.n = 1;
  KVF_RETURN_IF_ERROR(f.String("model", &g->model));
  bool given = false;
  int64_t v = 0;
  KVF_RETURN_IF_ERROR(f.Int("max_tokens", 1, kInt32Max, &given, &v));
  if (given) {
    g->max_tokens_given = true;
    p.max_tokens = static_cast<int32_t>(v);
  }
  if (chat) {
    KVF_RETURN_IF_ERROR(f.Int("max_completion_tokens", 1, kInt32Max, &given, &v));
    if (given) {
      g->max_tokens_given = true;
      p.max_tokens = static_cast<int32_t>(v);
    }
  }
  KVF_RETURN_IF_ERROR(f.Number("temperature", 0, 100, false, &p.temperature));
  KVF_RETURN_IF_ERROR(f.Number("top_p", 0, 1, true, &p.top_p));
  KVF_RETURN_IF_ERROR(f.Int32("top_k", -1, kInt32Max, &p.top_k));
  KVF_RETURN_IF_ERROR(f.Number("min_p", 0, 1, false, &p.min_p));
  KVF_RETURN_IF_ERROR(f.Number("presence_penalty", -2, 2, false, &p.presence_penalty));
  KVF_RETURN_IF_ERROR(f.Number("frequency_penalty", -2, 2, false, &p.frequency_penalty));
  KVF_RETURN_IF_ERROR(f.Number("repetition_penalty", 0, 10, true, &p.repetition_penalty));
  KVF_RETURN_IF_ERROR(f.Int32("n", 1, 128, &p.n));
  if (const json* s = f.Get("seed")) {
    if (!s->is_number_integer()) return f.WrongType("seed", "an integer", *s);
    p.seed =
        s->is_number_unsigned() ? s->get<uint64_t>() : static_cast<uint64_t>(s->get<int64_t>());
  }
  if (const json* s = f.Get("stop")) {
    std::vector<std::string> stops;
    if (s->is_string()) {
      stops.push_back(s->get<std::string>());
    } else if (s->is_array()) {
      if (s->size() > limits.max_stop)
        return f.Fail("stop", StrFormat("at most %zu stop strings", limits.max_stop));
      for (const json& e : *s) {
        if (!e.is_string()) return f.WrongType("stop", "a string or an array of strings", e);
        stops.push_back(e.get<std::string>());
      }
    } else {
      return f.WrongType("stop", "a string or an array of strings", *s);
    }
    for (const auto& st : stops) {
      if (st.empty()) return f.Fail("stop", "stop strings must not be empty");
      if (st.size() > limits.max_stop_bytes)
        return f.Fail("stop",
                      StrFormat("stop strings are limited to %zu bytes", limits.max_stop_bytes));
    }
    p.stop = std::move(stops);
  }
  if (const json* s = f.Get("stop_token_ids")) {
    if (!s->is_array()) return f.WrongType("stop_token_ids", "an array of token ids", *s);
    KVF_RETURN_IF_ERROR(ParseTokenArray(*s, "stop_token_ids", param, &p.stop_token_ids));
  }
  KVF_RETURN_IF_ERROR(f.Bool("ignore_eos", &p.ignore_eos));
  KVF_RETURN_IF_ERROR(
      f.Int32("priority", std::numeric_limits<int32_t>::min(), kInt32Max, &g->priority));
  KVF_RETURN_IF_ERROR(f.String("cache_salt", &g->cache_salt));
  KVF_RETURN_IF_ERROR(ParseKvPolicyField(f, param, &p));
  KVF_RETURN_IF_ERROR(f.Bool("stream", &g->stream));
  if (const json* so = f.Get("stream_options")) {
    if (!so->is_object()) return f.WrongType("stream_options", "an object", *so);
    Fields sf(*so, param, "stream_options.");
    KVF_RETURN_IF_ERROR(sf.Bool("include_usage", &g->include_usage));
  }
  if (chat) {
    bool logprobs = false;
    KVF_RETURN_IF_ERROR(f.Bool("logprobs", &logprobs));
    int32_t top = -1;
    KVF_RETURN_IF_ERROR(f.Int32("top_logprobs", 0, 20, &top));
    if (top >= 0 && !logprobs)
      return f.Fail("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    if (logprobs) g->logprobs = top >= 0 ? top : 0;
  } else {
    KVF_RETURN_IF_ERROR(f.Int32("logprobs", 0, 20, &g->logprobs));
    KVF_RETURN_IF_ERROR(f.Bool("echo", &g->echo));
  }
  KVF_RETURN_IF_ERROR(RefuseUnsupportedFields(f, chat));
  KVF_RETURN_IF_ERROR(ParseConstraintFields(f, &p));
  // The engine reports alternatives only when asked for at least one.
  if (g->logprobs >= 0) p.logprobs = std::max(1, g->logprobs);
  return Status::Ok();
}

// The roles of OpenAI's chat API ("function" is its deprecated form of "tool").
constexpr const char* kApiRoles[] = {"system",    "developer", "user",
                                     "assistant", "tool",      "function"};

bool IsAcceptedRole(const std::string& role, const CodecLimits& limits) {
  for (const char* r : kApiRoles)
    if (role == r) return true;
  return std::find(limits.template_roles.begin(), limits.template_roles.end(), role) !=
         limits.template_roles.end();
}

std::string AcceptedRolesList(const CodecLimits& limits) {
  std::string out;
  for (const char* r : kApiRoles) out += std::string(out.empty() ? "" : ", ") + r;
  for (const std::string& r : limits.template_roles)
    if (!IsAcceptedRole(r, CodecLimits{})) out += ", " + r;
  return out;
}

// messages (+ tools, chat_template_kwargs, add_generation_prompt) for chat and /tokenize.
Status ParseChatInput(const Fields& f, const CodecLimits& limits, std::string* param,
                      ChatInput* chat) {
  const json* m = f.Get("messages");
  if (m == nullptr) return f.Fail("messages", "'messages' is required");
  if (!m->is_array()) return f.WrongType("messages", "an array", *m);
  if (m->empty()) return f.Fail("messages", "'messages' must not be empty");
  json normalized = json::array();
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string where = StrFormat("messages[%zu]", i);
    if (!msg.is_object()) {
      *param = where;
      return Status::InvalidArgument(
          StrFormat("'%s' must be an object, not %s", where.c_str(), TypeName(msg)));
    }
    auto role = msg.find("role");
    if (role == msg.end() || !role->is_string()) {
      *param = where + ".role";
      return Status::InvalidArgument(StrFormat("'%s.role' must be a string", where.c_str()));
    }
    if (!IsAcceptedRole(role->get<std::string>(), limits)) {
      *param = where + ".role";
      return Status::InvalidArgument(StrFormat("'%s.role' must be one of %s (got '%s')",
                                               where.c_str(), AcceptedRolesList(limits).c_str(),
                                               role->get<std::string>().c_str()));
    }
    json copy = msg;
    std::string text;
    auto content = msg.find("content");
    if (content == msg.end() || content->is_null()) {
      copy["content"] = nullptr;
    } else if (content->is_string()) {
      text = content->get<std::string>();
    } else if (content->is_array()) {
      for (const json& part : *content) {
        auto type = part.is_object() ? part.find("type") : part.end();
        auto t = part.is_object() ? part.find("text") : part.end();
        if (!part.is_object() || type == part.end() || *type != "text" || t == part.end() ||
            !t->is_string()) {
          *param = where + ".content";
          return Status::InvalidArgument(
              StrFormat("'%s.content' parts must be {\"type\": \"text\", \"text\": ...}: only text "
                        "is supported",
                        where.c_str()));
        }
        if (!text.empty()) text += "\n";
        text += t->get<std::string>();
      }
      copy["content"] = text;
    } else {
      *param = where + ".content";
      return Status::InvalidArgument(
          StrFormat("'%s.content' must be a string or an array of text parts, not %s",
                    where.c_str(), TypeName(*content)));
    }
    chat->messages.emplace_back(role->get<std::string>(), text);
    normalized.push_back(std::move(copy));
  }
  NormalizeToolCallArguments(&normalized);
  if (limits.tool_calls_as_text) WriteToolCallsIntoContent(*limits.tool_calls_as_text, &normalized);
  Result<chat::Value> messages = ChatValueOf(normalized);
  if (!messages.ok()) return f.Fail("messages", messages.error().message());
  chat->template_messages = std::move(*messages);
  if (const json* t = f.Get("tools")) {
    if (!t->is_array()) return f.WrongType("tools", "an array", *t);
    if (!t->empty()) {
      Result<chat::Value> tools = ChatValueOf(*t);
      if (!tools.ok()) return f.Fail("tools", tools.error().message());
      chat->tools = std::move(*tools);
    }
  }
  if (const json* k = f.Get("chat_template_kwargs")) {
    if (!k->is_object()) return f.WrongType("chat_template_kwargs", "an object", *k);
    for (auto it = k->begin(); it != k->end(); ++it) {
      Result<chat::Value> v = ChatValueOf(it.value());
      if (!v.ok()) return f.Fail("chat_template_kwargs", v.error().message());
      chat->template_kwargs.emplace_back(it.key(), std::move(*v));
    }
  }
  KVF_RETURN_IF_ERROR(f.Bool("add_generation_prompt", &chat->add_generation_prompt));
  return Status::Ok();
}

json UsageJson(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

json Bytes(const std::string& s) {
  json a = json::array();
  for (unsigned char c : s) a.push_back(static_cast<int>(c));
  return a;
}

json CompletionLogprobs(const Choice& c) {
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  int64_t offset = c.text_offset;
  for (const TokenLogprob& t : c.logprobs) {
    tokens.push_back(t.token);
    lps.push_back(t.logprob);
    json top = json::object();
    for (const auto& [s, lp] : t.top) top[s] = lp;
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += static_cast<int64_t>(t.token.size());
  }
  return {{"tokens", tokens},
          {"token_logprobs", lps},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

json ChatLogprobs(const Choice& c) {
  json content = json::array();
  for (const TokenLogprob& t : c.logprobs) {
    json top = json::array();
    for (const auto& [s, lp] : t.top)
      top.push_back({{"token", s}, {"logprob", lp}, {"bytes", Bytes(s)}});
    content.push_back({{"token", t.token},
                       {"logprob", t.logprob},
                       {"bytes", Bytes(t.token)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}};
}

json FinishReason(const Choice& c) {
  return c.finish_reason.empty() ? json(nullptr) : json(c.finish_reason);
}

json Envelope(const GenerationResponse& r, const char* object) {
  return {{"id", r.id}, {"object", object}, {"created", r.created}, {"model", r.model}};
}

void AddUsage(const GenerationResponse& r, json* j) {
  if (r.with_usage)
    (*j)["usage"] = UsageJson(r.usage);
  else if (r.null_usage)
    (*j)["usage"] = nullptr;
}

std::string EncodeCompletionLike(const GenerationResponse& r) {
  json j = Envelope(r, "text_completion");
  json choices = json::array();
  for (const Choice& c : r.choices)
    choices.push_back({{"index", c.index},
                       {"text", c.text},
                       {"logprobs", c.with_logprobs ? CompletionLogprobs(c) : json(nullptr)},
                       {"finish_reason", FinishReason(c)}});
  j["choices"] = std::move(choices);
  AddUsage(r, &j);
  return Dump(j);
}

}  // namespace

Status ParseCompletionRequest(std::string_view body, const CodecLimits& limits,
                              CompletionRequest* out, std::string* param) {
  param->clear();
  json j;
  KVF_RETURN_IF_ERROR(ParseObject(body, limits.max_depth, &j));
  Fields f(j, param);
  KVF_RETURN_IF_ERROR(ParsePrompts(f, limits, param, &out->prompts));
  return ParseGenerationFields(f, limits, false, &out->gen, param);
}

Status ParseChatRequest(std::string_view body, const CodecLimits& limits, ChatRequest* out,
                        std::string* param) {
  param->clear();
  json j;
  KVF_RETURN_IF_ERROR(ParseObject(body, limits.max_depth, &j));
  Fields f(j, param);
  KVF_RETURN_IF_ERROR(ParseChatInput(f, limits, param, &out->chat));
  KVF_RETURN_IF_ERROR(ParseToolFields(f, &out->tools));
  return ParseGenerationFields(f, limits, true, &out->gen, param);
}

Status ParseTokenizeRequest(std::string_view body, const CodecLimits& limits, TokenizeRequest* out,
                            std::string* param) {
  param->clear();
  json j;
  KVF_RETURN_IF_ERROR(ParseObject(body, limits.max_depth, &j));
  Fields f(j, param);
  KVF_RETURN_IF_ERROR(f.String("model", &out->model));
  const bool has_prompt = f.Get("prompt") != nullptr, has_messages = f.Get("messages") != nullptr;
  if (has_prompt == has_messages)
    return f.Fail("prompt", "give exactly one of 'prompt' and 'messages'");
  if (has_prompt) {
    KVF_RETURN_IF_ERROR(f.String("prompt", &out->prompt));
  } else {
    out->is_chat = true;
    KVF_RETURN_IF_ERROR(ParseChatInput(f, limits, param, &out->chat));
  }
  KVF_RETURN_IF_ERROR(
      f.Bool("add_special_tokens", &out->add_special_tokens, &out->add_special_tokens_given));
  return f.Bool("return_token_strs", &out->return_token_strs);
}

Status ParseDetokenizeRequest(std::string_view body, const CodecLimits& limits,
                              DetokenizeRequest* out, std::string* param) {
  param->clear();
  json j;
  KVF_RETURN_IF_ERROR(ParseObject(body, limits.max_depth, &j));
  Fields f(j, param);
  KVF_RETURN_IF_ERROR(f.String("model", &out->model));
  const json* t = f.Get("tokens");
  if (t == nullptr) return f.Fail("tokens", "'tokens' is required");
  if (!t->is_array()) return f.WrongType("tokens", "an array of token ids", *t);
  return ParseTokenArray(*t, "tokens", param, &out->tokens);
}

std::string EncodeError(const ApiError& e) {
  return Dump({{"error",
                {{"message", e.message},
                 {"type", e.type},
                 {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                 {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}});
}

std::string EncodeCompletion(const GenerationResponse& r) { return EncodeCompletionLike(r); }

std::string EncodeCompletionChunk(const GenerationResponse& r) { return EncodeCompletionLike(r); }

json ToolCallsJson(const std::vector<ToolCallOut>& calls, bool with_index) {
  json out = json::array();
  for (const ToolCallOut& t : calls) {
    json call = {{"id", t.id},
                 {"type", "function"},
                 {"function", {{"name", t.name}, {"arguments", t.arguments}}}};
    if (with_index) call["index"] = t.index;
    out.push_back(std::move(call));
  }
  return out;
}

std::string EncodeChatCompletion(const GenerationResponse& r) {
  json j = Envelope(r, "chat.completion");
  json choices = json::array();
  for (const Choice& c : r.choices) {
    // With tool calls and no text, content is null (as OpenAI sends it).
    json message = {
        {"role", "assistant"},
        {"content", c.text.empty() && !c.tool_calls.empty() ? json(nullptr) : json(c.text)}};
    if (c.with_reasoning)
      message["reasoning_content"] = c.reasoning.empty() ? json(nullptr) : json(c.reasoning);
    if (!c.tool_calls.empty()) message["tool_calls"] = ToolCallsJson(c.tool_calls, false);
    choices.push_back({{"index", c.index},
                       {"message", std::move(message)},
                       {"logprobs", c.with_logprobs ? ChatLogprobs(c) : json(nullptr)},
                       {"finish_reason", FinishReason(c)}});
  }
  j["choices"] = std::move(choices);
  AddUsage(r, &j);
  return Dump(j);
}

std::string EncodeChatChunk(const GenerationResponse& r) {
  json j = Envelope(r, "chat.completion.chunk");
  json choices = json::array();
  for (const Choice& c : r.choices) {
    json delta = json::object();
    if (c.role_delta) {
      delta["role"] = "assistant";
      delta["content"] = c.text;
    } else if (!c.empty_delta) {
      if (!c.reasoning.empty()) delta["reasoning_content"] = c.reasoning;
      if (!c.text.empty() || (c.reasoning.empty() && c.tool_calls.empty()))
        delta["content"] = c.text;
      if (!c.tool_calls.empty()) delta["tool_calls"] = ToolCallsJson(c.tool_calls, true);
    }
    choices.push_back({{"index", c.index},
                       {"delta", std::move(delta)},
                       {"logprobs", c.with_logprobs ? ChatLogprobs(c) : json(nullptr)},
                       {"finish_reason", FinishReason(c)}});
  }
  j["choices"] = std::move(choices);
  AddUsage(r, &j);
  return Dump(j);
}

std::string EncodeModels(const std::vector<ModelCard>& models) {
  json data = json::array();
  for (const ModelCard& m : models)
    data.push_back({{"id", m.id},
                    {"object", "model"},
                    {"created", m.created},
                    {"owned_by", m.owned_by},
                    {"root", m.id},
                    {"parent", nullptr},
                    {"max_model_len", m.max_model_len}});
  return Dump({{"object", "list"}, {"data", std::move(data)}});
}

std::string EncodeTokenize(const TokenizeResponse& r) {
  json j = {{"count", r.tokens.size()}, {"max_model_len", r.max_model_len}, {"tokens", r.tokens}};
  if (r.with_token_strs) j["token_strs"] = r.token_strs;
  return Dump(j);
}

std::string EncodeDetokenize(const std::string& prompt) { return Dump({{"prompt", prompt}}); }

std::string EncodeHealth(bool ok) { return Dump({{"status", ok ? "ok" : "shutting_down"}}); }

std::string EncodeBenchRequest(const BenchRequest& r) {
  json j = {{"model", r.model},
            {"max_tokens", r.max_tokens},
            {"temperature", r.temperature},
            {"stream", true},
            {"stream_options", {{"include_usage", true}}}};
  if (r.ignore_eos) j["ignore_eos"] = true;
  if (r.chat)
    j["messages"] = json::array({{{"role", "user"}, {"content", r.prompt}}});
  else
    j["prompt"] = r.prompt;
  return Dump(j);
}

Result<StreamChunk> DecodeStreamChunk(std::string_view data) {
  StreamChunk c;
  try {
    const json j = json::parse(data.begin(), data.end());
    if (!j.is_object()) return Status::InvalidArgument("an SSE payload is not a JSON object");
    if (auto e = j.find("error"); e != j.end()) {
      c.is_error = true;
      if (e->is_object() && e->contains("message") && (*e)["message"].is_string())
        c.error_message = (*e)["message"].get<std::string>();
      else
        c.error_message = Dump(*e);
      return c;
    }
    if (auto ch = j.find("choices"); ch != j.end() && ch->is_array()) {
      for (const json& choice : *ch) {
        if (!choice.is_object()) continue;
        ++c.num_choices;
        if (auto t = choice.find("text"); t != choice.end() && t->is_string())
          c.text += t->get<std::string>();
        if (auto d = choice.find("delta"); d != choice.end() && d->is_object())
          if (auto t = d->find("content"); t != d->end() && t->is_string())
            c.text += t->get<std::string>();
        if (auto fr = choice.find("finish_reason"); fr != choice.end() && fr->is_string())
          c.finish_reason = fr->get<std::string>();
      }
    }
    if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
      c.with_usage = true;
      c.usage.prompt_tokens = u->value("prompt_tokens", int64_t{0});
      c.usage.completion_tokens = u->value("completion_tokens", int64_t{0});
    }
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("bad SSE payload: ") + e.what());
  }
  return c;
}

Result<std::string> DecodeFirstModelId(std::string_view body) {
  try {
    const json j = json::parse(body.begin(), body.end());
    if (j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
        j["data"][0].is_object() && j["data"][0].contains("id") && j["data"][0]["id"].is_string())
      return j["data"][0]["id"].get<std::string>();
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("bad /v1/models response: ") + e.what());
  }
  return Status::NotFound("the /v1/models response lists no model");
}

}  // namespace kvforge::server
