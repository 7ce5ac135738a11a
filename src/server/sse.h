// server/sse.h — Server-Sent Events framing (the OpenAI streaming wire format) and a parser for
// clients (bench serve, tests).
//
// A server writes SseEvent(json) per chunk, then kSseDone; kSseKeepAlive is a comment line that
// clients ignore, written while a request waits so that a vanished client is noticed.
// Thread-safety: SseEvent is pure; an SseParser belongs to one stream (one thread at a time).
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace kvforge::server {

inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";
inline constexpr std::string_view kSseKeepAlive = ": keep-alive\n\n";
inline constexpr std::string_view kSseContentType = "text/event-stream";

// "data: <payload>\n\n". `payload` must not contain a newline (compact JSON never does).
std::string SseEvent(std::string_view payload);

// Incremental parser: feed bytes as they arrive; each complete event's data (its data lines
// joined with "\n") goes to the callback. Comments and other fields are skipped; "\n", "\r\n"
// and "\r" all end a line.
class SseParser {
 public:
  using OnData = std::function<void(const std::string& data)>;
  explicit SseParser(OnData on_data) : on_data_(std::move(on_data)) {}

  void Feed(std::string_view bytes);
  // Dispatches a final event not followed by a blank line (a stream cut short).
  void Finish();

 private:
  void Line(std::string_view line);

  OnData on_data_;
  std::string line_;
  std::string data_;
  bool has_data_ = false;
  bool after_cr_ = false;
};

}  // namespace kvforge::server
