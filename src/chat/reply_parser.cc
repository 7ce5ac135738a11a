// chat/reply_parser.cc — the reasoning split and the four tool-call readers. Every decision is
// made on text that can no longer change its outcome (a complete call, a character that rules a
// marker out), so any split of the reply into pieces decides the same way.
#include "chat/reply_parser.h"

#include "chat/json.h"

namespace kvforge::chat {

namespace {

constexpr std::string_view kThinkBegin = "<think>";
constexpr std::string_view kThinkEnd = "</think>";
constexpr std::string_view kHermesBegin = "<tool_call>";
constexpr std::string_view kHermesEnd = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralBegin = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";
constexpr std::string_view kMistralCallId = "[CALL_ID]";
constexpr std::string_view kDsCallsBegin =
    "<\xEF\xBD\x9Ctool\xE2\x96\x81"
    "calls\xE2\x96\x81"
    "begin\xEF\xBD\x9C>";
constexpr std::string_view kDsCallsEnd =
    "<\xEF\xBD\x9Ctool\xE2\x96\x81"
    "calls\xE2\x96\x81"
    "end\xEF\xBD\x9C>";
constexpr std::string_view kDsCallBegin =
    "<\xEF\xBD\x9Ctool\xE2\x96\x81"
    "call\xE2\x96\x81"
    "begin\xEF\xBD\x9C>";
constexpr std::string_view kDsCallEnd =
    "<\xEF\xBD\x9Ctool\xE2\x96\x81"
    "call\xE2\x96\x81"
    "end\xEF\xBD\x9C>";
constexpr std::string_view kDsSep =
    "<\xEF\xBD\x9Ctool\xE2\x96\x81"
    "sep\xEF\xBD\x9C>";

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

size_t SkipSpace(std::string_view s, size_t i = 0) {
  while (i < s.size() && IsSpace(s[i])) ++i;
  return i;
}

std::string_view Trim(std::string_view s) {
  const size_t b = SkipSpace(s);
  size_t e = s.size();
  while (e > b && IsSpace(s[e - 1])) --e;
  return s.substr(b, e - b);
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// Whether `s` is a proper prefix of `marker` (the rest of the marker may still come).
bool MayBecome(std::string_view s, std::string_view marker) {
  return s.size() < marker.size() && marker.substr(0, s.size()) == s;
}

// The length of the longest suffix of `s` that is a proper prefix of `marker`.
size_t HeldSuffix(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

// The end of the JSON object or array that opens `s` (s[0] is '{' or '['); npos while the text
// stops inside it. Only brackets outside strings count, so the value need not be valid yet.
size_t JsonEnd(std::string_view s) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

// The arguments as JSON text: an object, or a string holding one (some models quote them).
std::optional<std::string> ArgumentsText(const Value& v) {
  if (v.is_string()) {
    auto parsed = ParseJson(v.str());
    if (!parsed.ok() || !parsed->is_dict()) return std::nullopt;
    auto text = ToJson(*parsed);
    return text.ok() ? std::optional<std::string>(*text) : std::nullopt;
  }
  if (!v.is_dict()) return std::nullopt;
  auto text = ToJson(v);
  return text.ok() ? std::optional<std::string>(*text) : std::nullopt;
}

std::optional<std::string> ArgumentsText(std::string_view json) {
  auto parsed = ParseJson(json);
  if (!parsed.ok()) return std::nullopt;
  return ArgumentsText(*parsed);
}

// {"name": ..., "arguments" | "parameters": {...}} as a call.
std::optional<ToolCall> CallFromObject(const Value& v) {
  if (!v.is_dict()) return std::nullopt;
  const Value* name = v.dict().FindStr("name");
  const Value* args = v.dict().FindStr("arguments");
  if (args == nullptr) args = v.dict().FindStr("parameters");
  if (name == nullptr || !name->is_string() || name->str().empty()) return std::nullopt;
  std::optional<std::string> text =
      args == nullptr ? std::optional<std::string>("{}") : ArgumentsText(*args);
  if (!text) return std::nullopt;
  return ToolCall{name->str(), *text};
}

std::optional<ToolCall> CallFromJson(std::string_view json) {
  auto parsed = ParseJson(json);
  if (!parsed.ok()) return std::nullopt;
  return CallFromObject(*parsed);
}

}  // namespace

void ReplyDelta::Append(ReplyDelta more) {
  reasoning += more.reasoning;
  content += more.content;
  for (ToolCall& c : more.tool_calls) tool_calls.push_back(std::move(c));
}

ReplyParser::ReplyParser(const ReplyOptions& options)
    : options_(options),
      phase_(!options.reasoning            ? Phase::kBody
             : options.starts_in_reasoning ? Phase::kThinking
                                           : Phase::kBeforeThink),
      body_(!options.tool_format                                  ? Body::kPlain
            : *options.tool_format == ToolCallFormat::kLlama3Json ? Body::kUndecided
                                                                  : Body::kText) {}

ReplyDelta ReplyParser::Feed(std::string_view text) {
  ReplyDelta out;
  if (phase_ == Phase::kBody) {
    FeedBody(text, &out, false);
  } else {
    think_.append(text);
    FeedReasoning(&out, false);
  }
  return out;
}

ReplyDelta ReplyParser::Finish() {
  ReplyDelta out;
  if (phase_ != Phase::kBody) FeedReasoning(&out, true);
  if (phase_ == Phase::kBody) FeedBody("", &out, true);
  return out;
}

void ReplyParser::FeedReasoning(ReplyDelta* out, bool final) {
  if (phase_ == Phase::kBeforeThink) {
    const std::string_view t = std::string_view(think_).substr(SkipSpace(think_));
    if (StartsWith(t, kThinkBegin)) {
      think_ = std::string(t.substr(kThinkBegin.size()));
      phase_ = Phase::kThinking;
    } else if (!final && (t.empty() || MayBecome(t, kThinkBegin))) {
      return;
    } else {
      phase_ = Phase::kBody;
      std::string rest = std::move(think_);
      think_.clear();
      FeedBody(rest, out, final);
      return;
    }
  }
  if (phase_ == Phase::kThinking) {
    const size_t end = think_.find(kThinkEnd);
    if (end == std::string::npos) {
      const size_t keep = final ? 0 : HeldSuffix(think_, kThinkEnd);
      out->reasoning += think_.substr(0, think_.size() - keep);
      think_.erase(0, think_.size() - keep);
      return;
    }
    out->reasoning += think_.substr(0, end);
    think_.erase(0, end + kThinkEnd.size());
    phase_ = Phase::kAfterThink;
  }
  if (phase_ == Phase::kAfterThink) {
    think_.erase(0, SkipSpace(think_));
    if (think_.empty() && !final) return;
    phase_ = Phase::kBody;
    std::string rest = std::move(think_);
    think_.clear();
    FeedBody(rest, out, final);
  }
}

void ReplyParser::FeedBody(std::string_view text, ReplyDelta* out, bool final) {
  switch (body_) {
    case Body::kPlain:
      if (strip_space_) {
        text = text.substr(SkipSpace(text));
        if (text.empty()) return;
        strip_space_ = false;
      }
      out->content.append(text);
      return;
    case Body::kUndecided: {  // llama3_json: calls only when the reply opens with one
      held_.append(text);
      const std::string_view t = std::string_view(held_).substr(SkipSpace(held_));
      if (!final && (t.empty() || MayBecome(t, kPythonTag))) return;
      if (StartsWith(t, "{") || StartsWith(t, kPythonTag)) {
        body_ = Body::kCalls;
        calls_ = std::move(held_);
        held_.clear();
        TakeCalls(out, final);
      } else {
        body_ = Body::kPlain;
        out->content += held_;
        held_.clear();
      }
      return;
    }
    case Body::kText:
      held_.append(text);
      if (strip_space_) {
        held_.erase(0, SkipSpace(held_));
        if (held_.empty()) return;
        strip_space_ = false;
      }
      FeedText(out, final);
      return;
    case Body::kCalls:
      calls_.append(text);
      TakeCalls(out, final);
      return;
  }
}

void ReplyParser::FeedText(ReplyDelta* out, bool final) {
  const ToolCallFormat f = *options_.tool_format;
  const std::string_view marker = f == ToolCallFormat::kHermes    ? kHermesBegin
                                  : f == ToolCallFormat::kMistral ? kMistralBegin
                                                                  : kDsCallsBegin;
  const size_t at = held_.find(marker);
  if (at == std::string::npos) {
    const size_t keep = final ? 0 : HeldSuffix(held_, marker);
    out->content += held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return;
  }
  out->content += held_.substr(0, at);
  calls_ = held_.substr(at);
  held_.clear();
  body_ = Body::kCalls;
  TakeCalls(out, final);
}

void ReplyParser::TakeCalls(ReplyDelta* out, bool final) {
  while (body_ == Body::kCalls) {
    std::vector<ToolCall> calls;
    const std::string before = calls_;
    switch (TakeOne(&calls, final)) {
      case Take::kCall:
        for (ToolCall& c : calls) out->tool_calls.push_back(std::move(c));
        continue;
      case Take::kWait:
        if (!final) return;
        [[fallthrough]];
      case Take::kFail:
        // What does not parse is the reply's text after all; no more calls are looked for.
        calls_ = before;
        body_ = Body::kPlain;
        out->content += calls_;
        calls_.clear();
        return;
      case Take::kDone: {
        // The calls ended: what follows is text again (none for llama3_json), less the
        // whitespace right after the calls.
        body_ = *options_.tool_format == ToolCallFormat::kLlama3Json ? Body::kPlain : Body::kText;
        strip_space_ = true;
        std::string rest = std::move(calls_);
        calls_.clear();
        FeedBody(rest, out, final);
        return;
      }
    }
  }
}

ReplyParser::Take ReplyParser::TakeOne(std::vector<ToolCall>* calls, bool final) {
  switch (*options_.tool_format) {
    case ToolCallFormat::kHermes:
      return TakeHermes(calls, final);
    case ToolCallFormat::kLlama3Json:
      return TakeLlama3(calls, final);
    case ToolCallFormat::kMistral:
      return TakeMistral(calls, final);
    case ToolCallFormat::kDeepSeekV3:
      return TakeDeepSeek(calls, final);
  }
  return Take::kFail;
}

ReplyParser::Take ReplyParser::TakeHermes(std::vector<ToolCall>* calls, bool final) {
  const size_t b = SkipSpace(calls_);
  const std::string_view t = std::string_view(calls_).substr(b);
  if (t.empty()) return final ? Take::kDone : Take::kWait;
  if (!StartsWith(t, kHermesBegin)) return MayBecome(t, kHermesBegin) ? Take::kWait : Take::kDone;
  const size_t end = t.find(kHermesEnd);
  if (end == std::string_view::npos) return Take::kWait;
  auto call = CallFromJson(Trim(t.substr(kHermesBegin.size(), end - kHermesBegin.size())));
  if (!call) return Take::kFail;
  calls->push_back(std::move(*call));
  calls_.erase(0, b + end + kHermesEnd.size());
  return Take::kCall;
}

ReplyParser::Take ReplyParser::TakeLlama3(std::vector<ToolCall>* calls, bool final) {
  size_t b = SkipSpace(calls_);
  std::string_view t = std::string_view(calls_).substr(b);
  if (StartsWith(t, ";")) {  // between calls
    b = SkipSpace(calls_, b + 1);
    t = std::string_view(calls_).substr(b);
  }
  if (StartsWith(t, kPythonTag)) {
    b = SkipSpace(calls_, b + kPythonTag.size());
    t = std::string_view(calls_).substr(b);
  }
  if (t.empty()) return final ? Take::kDone : Take::kWait;
  if (t[0] != '{') return MayBecome(t, kPythonTag) ? Take::kWait : Take::kDone;
  const size_t end = JsonEnd(t);
  if (end == std::string_view::npos) return Take::kWait;
  auto call = CallFromJson(t.substr(0, end));
  if (!call) return Take::kFail;
  calls->push_back(std::move(*call));
  calls_.erase(0, b + end);
  return Take::kCall;
}

ReplyParser::Take ReplyParser::TakeMistral(std::vector<ToolCall>* calls, bool final) {
  const size_t b = SkipSpace(calls_);
  const std::string_view t = std::string_view(calls_).substr(b);
  if (t.empty()) return final ? Take::kDone : Take::kWait;
  if (!StartsWith(t, kMistralBegin)) return MayBecome(t, kMistralBegin) ? Take::kWait : Take::kDone;
  const size_t body = SkipSpace(t, kMistralBegin.size());
  if (body == t.size()) return Take::kWait;
  if (t[body] == '[') {  // v3: a JSON array of calls
    const size_t end = JsonEnd(t.substr(body));
    if (end == std::string_view::npos) return Take::kWait;
    auto parsed = ParseJson(t.substr(body, end));
    if (!parsed.ok() || !parsed->is_list() || parsed->list().items.empty()) return Take::kFail;
    for (const Value& item : parsed->list().items) {
      auto call = CallFromObject(item);
      if (!call) return Take::kFail;
      calls->push_back(std::move(*call));
    }
    calls_.erase(0, b + body + end);
    return Take::kCall;
  }
  // v11: NAME [CALL_ID]ID? [ARGS] {...}
  const size_t args = t.find(kMistralArgs, body);
  if (args == std::string_view::npos) {
    // A name longer than any function name cannot be one.
    return t.size() - body > 64 + kMistralCallId.size() + 64 + kMistralArgs.size() ? Take::kFail
                                                                                   : Take::kWait;
  }
  std::string_view name = t.substr(body, args - body);
  if (const size_t id = name.find(kMistralCallId); id != std::string_view::npos)
    name = name.substr(0, id);
  name = Trim(name);
  if (!IsValidFunctionName(name)) return Take::kFail;
  const size_t obj = SkipSpace(t, args + kMistralArgs.size());
  if (obj == t.size()) return Take::kWait;
  if (t[obj] != '{') return Take::kFail;
  const size_t end = JsonEnd(t.substr(obj));
  if (end == std::string_view::npos) return Take::kWait;
  auto text = ArgumentsText(t.substr(obj, end));
  if (!text) return Take::kFail;
  calls->push_back(ToolCall{std::string(name), *text});
  calls_.erase(0, b + obj + end);
  return Take::kCall;
}

ReplyParser::Take ReplyParser::TakeDeepSeek(std::vector<ToolCall>* calls, bool final) {
  size_t b = SkipSpace(calls_);
  std::string_view t = std::string_view(calls_).substr(b);
  if (StartsWith(t, kDsCallsBegin)) {
    b = SkipSpace(calls_, b + kDsCallsBegin.size());
    t = std::string_view(calls_).substr(b);
  }
  if (StartsWith(t, kDsCallsEnd)) {
    calls_.erase(0, b + kDsCallsEnd.size());
    return Take::kDone;
  }
  if (t.empty()) return final ? Take::kDone : Take::kWait;
  if (MayBecome(t, kDsCallsEnd) || MayBecome(t, kDsCallBegin))
    return final ? Take::kFail : Take::kWait;
  if (!StartsWith(t, kDsCallBegin)) return Take::kFail;
  const size_t end = t.find(kDsCallEnd);
  if (end == std::string_view::npos) return Take::kWait;
  const std::string_view inner = t.substr(kDsCallBegin.size(), end - kDsCallBegin.size());
  const size_t sep = inner.find(kDsSep);
  if (sep == std::string_view::npos) return Take::kFail;
  std::string_view name = Trim(inner.substr(0, sep));
  std::string_view args = inner.substr(sep + kDsSep.size());
  if (name == "function") {  // V3 / R1: function<sep>NAME\n```json\n{...}\n```
    const size_t nl = args.find('\n');
    if (nl == std::string_view::npos) return Take::kFail;
    name = Trim(args.substr(0, nl));
    args = Trim(args.substr(nl + 1));
    if (StartsWith(args, "```json")) args = args.substr(7);
    args = Trim(args);
    if (args.size() >= 3 && args.substr(args.size() - 3) == "```")
      args = args.substr(0, args.size() - 3);
  }
  auto text = ArgumentsText(Trim(args));
  if (name.empty() || !text) return Take::kFail;
  calls->push_back(ToolCall{std::string(name), *text});
  calls_.erase(0, b + end + kDsCallEnd.size());
  return Take::kCall;
}

ReplyDelta ParseReply(const ReplyOptions& options, std::string_view text) {
  ReplyParser p(options);
  ReplyDelta out = p.Feed(text);
  out.Append(p.Finish());
  return out;
}

}  // namespace kvforge::chat
