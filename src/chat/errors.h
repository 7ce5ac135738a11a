// errors.h — the exception the chat-template interpreter throws internally.
//
// Python-level errors (TypeError, UndefinedError, raise_exception's TemplateError, limit hits) are
// thrown as TemplateException from deep inside evaluation and converted to a kvforge::Status at the
// public boundary (ChatTemplate::Parse/Render, ParseJson/ToJson); nothing in this header escapes
// the module's public API. Message text follows Jinja2/Python wording: "<Type>: <message>".
// Thread-safety: plain values.
#pragma once

#include <exception>
#include <string>
#include <utility>

#include "kvforge/status.h"

namespace kvforge::chat {

class Value;

class TemplateException : public std::exception {
 public:
  TemplateException(std::string type, std::string message,
                    StatusCode code = StatusCode::kInvalidArgument)
      : type_(std::move(type)), message_(std::move(message)), code_(code) {}
  const char* what() const noexcept override { return message_.c_str(); }
  const std::string& type() const { return type_; }
  const std::string& message() const { return message_; }
  StatusCode code() const { return code_; }
  // "UndefinedError: 'x' is undefined"
  std::string Formatted() const { return type_ + ": " + message_; }
  Status ToStatus() const { return Status(code_, Formatted()); }

 private:
  std::string type_;
  std::string message_;
  StatusCode code_;
};

[[noreturn]] void ThrowError(const char* type, std::string message);
[[noreturn]] inline void ThrowTypeError(std::string message) {
  ThrowError("TypeError", std::move(message));
}
[[noreturn]] inline void ThrowValueError(std::string message) {
  ThrowError("ValueError", std::move(message));
}
// UndefinedError carrying the undefined value's own message.
[[noreturn]] void ThrowUndefined(const Value& undefined);
// A render or parse limit was hit (StatusCode::kResourceExhausted).
[[noreturn]] void ThrowLimit(std::string message);

}  // namespace kvforge::chat
