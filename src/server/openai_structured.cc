#include "server/openai_structured.h"

#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace kvforge::server {
namespace {

using json_fields::Dump;
using json_fields::Fields;
using json_fields::json;

// A schema given as an object (or `true`), or as JSON text (vLLM accepts both).
Status SchemaText(const Fields& f, const char* key, const json& v, std::string* out) {
  if (v.is_object() || v.is_boolean()) {
    *out = Dump(v);
  } else if (v.is_string()) {
    *out = v.get<std::string>();
  } else {
    return f.WrongType(key, "a JSON Schema object", v);
  }
  if (out->empty()) return f.Fail(key, std::string("'") + key + "' must not be empty");
  return Status::Ok();
}

Status ChoiceList(const Fields& f, const char* key, const json& v, std::vector<std::string>* out) {
  if (!v.is_array() || v.empty()) return f.WrongType(key, "a non-empty array of strings", v);
  for (const json& c : v) {
    if (!c.is_string()) return f.WrongType(key, "a non-empty array of strings", c);
    out->push_back(c.get<std::string>());
  }
  return Status::Ok();
}

// OpenAI's response_format.
Status ParseResponseFormat(const Fields& f, const json& rf, std::string* param,
                           StructuredOutputs* so) {
  if (!rf.is_object()) return f.WrongType("response_format", "an object", rf);
  Fields rff(rf, param, "response_format.");
  std::string type;
  KVF_RETURN_IF_ERROR(rff.String("type", &type));
  if (type.empty() || type == "text") return Status::Ok();
  if (type == "json_object") {
    so->json_object = true;
    return Status::Ok();
  }
  if (type != "json_schema")
    return rff.Fail(
        "type",
        "'response_format.type' must be text, json_object or json_schema, not '" + type + "'");
  const json* js = rff.Get("json_schema");
  if (js == nullptr || !js->is_object())
    return rff.Fail("json_schema", "response_format json_schema needs a 'json_schema' object");
  Fields jf(*js, param, "response_format.json_schema.");
  std::string name;
  KVF_RETURN_IF_ERROR(jf.String("name", &name));
  bool strict = false;
  KVF_RETURN_IF_ERROR(jf.Bool("strict", &strict));  // kvforge's grammar is always exact
  const json* schema = jf.Get("schema");
  if (schema == nullptr)
    return jf.Fail("schema", "'response_format.json_schema.schema' is required");
  return SchemaText(jf, "schema", *schema, &so->json);
}

// vLLM's structured_outputs object.
Status ParseStructuredOutputsObject(const Fields& f, const json& v, std::string* param,
                                    StructuredOutputs* so) {
  if (!v.is_object()) return f.WrongType("structured_outputs", "an object", v);
  Fields sf(v, param, "structured_outputs.");
  static constexpr const char* kKeys[] = {"json", "regex", "choice", "grammar", "json_object"};
  for (const auto& item : v.items()) {
    bool known = false;
    for (const char* k : kKeys) known = known || item.key() == k;
    if (!known && !item.value().is_null())
      return sf.Fail(item.key().c_str(), "unknown field 'structured_outputs." + item.key() +
                                             "' (json, regex, choice, grammar, json_object)");
  }
  if (const json* j = sf.Get("json")) KVF_RETURN_IF_ERROR(SchemaText(sf, "json", *j, &so->json));
  KVF_RETURN_IF_ERROR(sf.String("regex", &so->regex));
  if (const json* c = sf.Get("choice"))
    KVF_RETURN_IF_ERROR(ChoiceList(sf, "choice", *c, &so->choice));
  KVF_RETURN_IF_ERROR(sf.String("grammar", &so->grammar));
  KVF_RETURN_IF_ERROR(sf.Bool("json_object", &so->json_object));
  return Status::Ok();
}

Status ParseLogitBias(const Fields& f, const json& v, SamplingParams* p) {
  if (!v.is_object()) return f.WrongType("logit_bias", "an object of token id -> bias", v);
  for (const auto& item : v.items()) {
    const std::string& key = item.key();
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(key, &used);
    } catch (...) {
      used = 0;
    }
    if (used != key.size() || id < 0 || id > std::numeric_limits<int32_t>::max())
      return f.Fail("logit_bias", "'logit_bias' keys must be token ids, not '" + key + "'");
    const json& b = item.value();
    if (!b.is_number() || b.get<double>() < -100 || b.get<double>() > 100)
      return f.Fail("logit_bias", "'logit_bias' values must be numbers from -100 to 100");
    p->logit_bias.emplace_back(static_cast<int32_t>(id), b.get<float>());
  }
  return Status::Ok();
}

}  // namespace

Status ParseConstraintFields(const Fields& f, SamplingParams* p) {
  std::string* param = f.param();
  if (const json* lb = f.Get("logit_bias")) KVF_RETURN_IF_ERROR(ParseLogitBias(f, *lb, p));
  // Each form is read into its own StructuredOutputs, so that two forms in one request are a
  // 400 naming the second rather than one silently winning.
  struct Form {
    const char* key;
    StructuredOutputs so;
  };
  std::vector<Form> forms;
  auto add = [&](const char* key, StructuredOutputs so) {
    if (so.enabled()) forms.push_back({key, std::move(so)});
  };
  StructuredOutputs so;
  if (const json* rf = f.Get("response_format"))
    KVF_RETURN_IF_ERROR(ParseResponseFormat(f, *rf, param, &so));
  add("response_format", std::exchange(so, {}));
  if (const json* v = f.Get("structured_outputs"))
    KVF_RETURN_IF_ERROR(ParseStructuredOutputsObject(f, *v, param, &so));
  if (so.NumSet() > 1)
    return f.Fail("structured_outputs",
                  "set only one of structured_outputs.json, regex, choice, grammar, json_object");
  add("structured_outputs", std::exchange(so, {}));
  if (const json* v = f.Get("guided_json"))
    KVF_RETURN_IF_ERROR(SchemaText(f, "guided_json", *v, &so.json));
  add("guided_json", std::exchange(so, {}));
  KVF_RETURN_IF_ERROR(f.String("guided_regex", &so.regex));
  add("guided_regex", std::exchange(so, {}));
  if (const json* v = f.Get("guided_choice"))
    KVF_RETURN_IF_ERROR(ChoiceList(f, "guided_choice", *v, &so.choice));
  add("guided_choice", std::exchange(so, {}));
  KVF_RETURN_IF_ERROR(f.String("guided_grammar", &so.grammar));
  add("guided_grammar", std::exchange(so, {}));
  KVF_RETURN_IF_ERROR(f.String("grammar", &so.grammar));
  add("grammar", std::exchange(so, {}));
  if (const json* v = f.Get("json_schema"))
    KVF_RETURN_IF_ERROR(SchemaText(f, "json_schema", *v, &so.json));
  add("json_schema", std::exchange(so, {}));
  if (forms.size() > 1)
    return f.Fail(forms[1].key, std::string("'") + forms[1].key + "' and '" + forms[0].key +
                                    "' both constrain the output: give only one");
  if (!forms.empty()) p->structured_outputs = std::move(forms[0].so);
  return Status::Ok();
}

Status RefuseUnsupportedFields(const Fields& f, bool chat) {
  // Fields of OpenAI's APIs that would change the output and that kvforge does not implement.
  // Metadata that changes nothing (user, metadata, safety_identifier, prompt_cache_key) is
  // accepted; docs/server.md lists every field.
  static const std::vector<std::string> kChatRefused = {
      "audio",         "prediction",       "web_search_options", "functions",
      "function_call", "reasoning_effort", "verbosity"};
  static const std::vector<std::string> kCompletionRefused = {"suffix"};
  for (const std::string& key : chat ? kChatRefused : kCompletionRefused)
    if (f.Get(key.c_str()) != nullptr)
      return f.Fail(key.c_str(), "'" + key + "' is not supported by kvforge");
  if (const json* store = f.Get("store"); store != nullptr && *store != false)
    return f.Fail("store", "'store': true is not supported (kvforge keeps no completions)");
  if (const json* tier = f.Get("service_tier");
      tier != nullptr && *tier != "auto" && *tier != "default")
    return f.Fail("service_tier", "'service_tier' must be auto or default");
  if (const json* m = f.Get("modalities"); m != nullptr && *m != json::array({"text"}))
    return f.Fail("modalities", "only 'modalities': [\"text\"] is supported");
  if (!chat) {
    const json* best = f.Get("best_of");
    const json* n = f.Get("n");
    if (best != nullptr && *best != 1 && (n == nullptr || *best != *n))
      return f.Fail("best_of", "'best_of' other than 1 (or n) is not supported");
  }
  return Status::Ok();
}

}  // namespace kvforge::server
