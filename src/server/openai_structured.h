// server/openai_structured.h — the constraint fields of the completions and chat APIs, read into
// SamplingParams, and the OpenAI fields kvforge refuses rather than ignores.
//
// Constraint fields (at most one per request): OpenAI's `response_format` (text, json_object,
// json_schema {name, schema, strict, description}); vLLM's `structured_outputs` {json, regex,
// choice, grammar, json_object} and its older `guided_json`, `guided_regex`, `guided_choice`,
// `guided_grammar`; llama.cpp's `grammar` and `json_schema`. Plus OpenAI's `logit_bias` (token
// ids as strings -> -100..100). Included by the codec's .cc files only (nlohmann/json).
#pragma once

#include "kvforge/sampling_params.h"
#include "server/json_fields.h"

namespace kvforge::server {

Status ParseConstraintFields(const json_fields::Fields& f, SamplingParams* p);
// OpenAI request fields with no kvforge meaning: a 400 naming the field, never a silent no-op.
Status RefuseUnsupportedFields(const json_fields::Fields& f, bool chat);

}  // namespace kvforge::server
