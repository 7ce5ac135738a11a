// server/chat_values.h — a request's JSON (nlohmann, as the codec parsed it) as the chat
// template's values, converted once: no text in between for chat's own JSON parser to read again.
// Objects keep the client's key order; integers stay integers. Thread-safety: pure functions.
#pragma once

#include "chat/value.h"
#include "kvforge/status.h"
#include "server/json_fields.h"

namespace kvforge::server {

// The value, frozen (what ChatTemplate::Render takes). kInvalidArgument past `max_depth` levels of
// nesting (chat::JsonParseOptions' limit).
Result<chat::Value> ChatValueOf(const json_fields::json& j, int max_depth = 256);

}  // namespace kvforge::server
