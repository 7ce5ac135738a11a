// kvredis/redis_reply.h — one RESP reply as plain owned data (hiredis's redisReply copied out, so
// nothing of hiredis leaks past redis_connection.cc).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvforge::kvredis {

struct RedisReply {
  enum class Type : uint8_t { kNil, kString, kStatus, kError, kInteger, kArray };
  Type type = Type::kNil;
  std::string str;  // kString (binary-safe), kStatus, kError
  long long integer = 0;
  std::vector<RedisReply> elements;  // kArray

  bool is_error() const { return type == Type::kError; }
  bool is_nil() const { return type == Type::kNil; }
  // An error reply's first word ("MOVED", "ASK", "OOM", "ERR", ...).
  std::string_view error_kind() const {
    if (type != Type::kError) return {};
    std::string_view s = str;
    return s.substr(0, s.find(' '));
  }
};

// A command's words, binary-safe; the views must outlive the call that sends them.
using RedisArgs = std::vector<std::string_view>;

}  // namespace kvforge::kvredis
