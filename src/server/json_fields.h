// server/json_fields.h — the request-reading helpers of the OpenAI codec: strict typed reads
// of one JSON object's fields, each failure naming its field. Included only by the codec's .cc
// files (nlohmann/json stays out of every other header).
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/strings.h"
#include "kvforge/status.h"

namespace kvforge::server::json_fields {

using json = nlohmann::ordered_json;
using base::StrFormat;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

inline std::string Dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Parses a request body that must be a JSON object of at most `max_depth` nesting levels.
Status ParseObject(std::string_view body, int max_depth, json* out);

inline const char* TypeName(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    default:
      return "an unsupported value";
  }
}

// Reads the fields of one JSON object; every failure names the field in *param.
class Fields {
 public:
  Fields(const json& obj, std::string* param, std::string prefix = "")
      : obj_(obj), param_(param), prefix_(std::move(prefix)) {}

  // The field, or nullptr when absent or null.
  const json* Get(const char* key) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  std::string* param() const { return param_; }

  Status Fail(const char* key, const std::string& msg) const {
    *param_ = prefix_ + key;
    return Status::InvalidArgument(msg);
  }
  Status WrongType(const char* key, const char* expected, const json& got) const {
    return Fail(
        key, StrFormat("'%s%s' must be %s, not %s", prefix_.c_str(), key, expected, TypeName(got)));
  }

  Status Int(const char* key, int64_t lo, int64_t hi, bool* given, int64_t* out) const {
    *given = false;
    const json* v = Get(key);
    if (v == nullptr) return Status::Ok();
    int64_t x = 0;
    if (v->is_number_unsigned()) {
      if (v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return OutOfRange(key, lo, hi);
      x = static_cast<int64_t>(v->get<uint64_t>());
    } else if (v->is_number_integer()) {
      x = v->get<int64_t>();
    } else if (v->is_number_float()) {
      const double d = v->get<double>();
      if (!std::isfinite(d) || d != std::floor(d)) return WrongType(key, "an integer", *v);
      if (d < static_cast<double>(lo) || d > static_cast<double>(hi))
        return OutOfRange(key, lo, hi);
      x = static_cast<int64_t>(d);
    } else {
      return WrongType(key, "an integer", *v);
    }
    if (x < lo || x > hi) return OutOfRange(key, lo, hi);
    *given = true;
    *out = x;
    return Status::Ok();
  }
  Status Int32(const char* key, int64_t lo, int64_t hi, int32_t* out) const {
    bool given = false;
    int64_t x = 0;
    KVF_RETURN_IF_ERROR(Int(key, lo, hi, &given, &x));
    if (given) *out = static_cast<int32_t>(x);
    return Status::Ok();
  }

  // A number in [lo, hi]; `lo_open` excludes lo itself.
  Status Number(const char* key, double lo, double hi, bool lo_open, float* out) const {
    const json* v = Get(key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_number()) return WrongType(key, "a number", *v);
    const double d = v->get<double>();
    if (!std::isfinite(d) || d < lo || d > hi || (lo_open && d == lo))
      return Fail(key, StrFormat("'%s%s' must be in %s%g, %g], got %g", prefix_.c_str(), key,
                                 lo_open ? "(" : "[", lo, hi, d));
    *out = static_cast<float>(d);
    return Status::Ok();
  }

  Status Bool(const char* key, bool* out, bool* given = nullptr) const {
    if (given) *given = false;
    const json* v = Get(key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_boolean()) return WrongType(key, "a boolean", *v);
    *out = v->get<bool>();
    if (given) *given = true;
    return Status::Ok();
  }

  Status String(const char* key, std::string* out) const {
    const json* v = Get(key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_string()) return WrongType(key, "a string", *v);
    *out = v->get<std::string>();
    return Status::Ok();
  }

  // For APIs that refuse what they do not implement rather than ignore it: the first field
  // outside `known` (a null counts as absent) is an error naming it, `what` saying what is taken.
  Status OnlyKnown(std::initializer_list<std::string_view> known, const char* what) const {
    for (auto it = obj_.begin(); it != obj_.end(); ++it) {
      if (it->is_null()) continue;
      bool found = false;
      for (std::string_view k : known) found = found || it.key() == k;
      if (!found)
        return Fail(it.key().c_str(), StrFormat("'%s%s' is not supported (%s)", prefix_.c_str(),
                                                it.key().c_str(), what));
    }
    return Status::Ok();
  }

 private:
  Status OutOfRange(const char* key, int64_t lo, int64_t hi) const {
    if (hi == std::numeric_limits<int64_t>::max())
      return Fail(key,
                  StrFormat("'%s%s' must be at least %lld", prefix_.c_str(), key, (long long)lo));
    return Fail(key, StrFormat("'%s%s' must be an integer between %lld and %lld", prefix_.c_str(),
                               key, (long long)lo, (long long)hi));
  }

  const json& obj_;
  std::string* param_;
  std::string prefix_;
};

}  // namespace kvforge::server::json_fields
