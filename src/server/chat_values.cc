#include "server/chat_values.h"

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace kvforge::server {
namespace {

using json_fields::json;

Result<chat::Value> Convert(const json& j, int depth_left) {
  switch (j.type()) {
    case json::value_t::null:
      return chat::Value::None();
    case json::value_t::boolean:
      return chat::Value::Bool(j.get<bool>());
    case json::value_t::number_integer:
      return chat::Value::Int(j.get<int64_t>());
    case json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      // Too large for int64: a double, as chat's JSON parser reads such a number.
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return chat::Value::Float(static_cast<double>(u));
      return chat::Value::Int(static_cast<int64_t>(u));
    }
    case json::value_t::number_float:
      return chat::Value::Float(j.get<double>());
    case json::value_t::string:
      return chat::Value::Str(j.get<std::string>());
    case json::value_t::array: {
      if (depth_left <= 0) return Status::InvalidArgument("JSON nested too deeply");
      std::vector<chat::Value> items;
      items.reserve(j.size());
      for (const json& item : j) {
        KVF_ASSIGN_OR_RETURN(chat::Value v, Convert(item, depth_left - 1));
        items.push_back(std::move(v));
      }
      return chat::Value::List(std::move(items));
    }
    case json::value_t::object: {
      if (depth_left <= 0) return Status::InvalidArgument("JSON nested too deeply");
      chat::Value d = chat::Value::Dict();
      for (auto it = j.begin(); it != j.end(); ++it) {
        KVF_ASSIGN_OR_RETURN(chat::Value v, Convert(it.value(), depth_left - 1));
        d.dict().SetStr(it.key(), std::move(v));
      }
      return d;
    }
    default:  // binary and discarded values never come out of the codec's parse
      return Status::InvalidArgument("unsupported JSON value");
  }
}

}  // namespace

Result<chat::Value> ChatValueOf(const json_fields::json& j, int max_depth) {
  KVF_ASSIGN_OR_RETURN(chat::Value v, Convert(j, max_depth));
  v.Freeze();
  return v;
}

}  // namespace kvforge::server
