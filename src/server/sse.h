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
// "event: <name>\ndata: <payload>\n\n": the typed events of the Anthropic and Responses APIs,
// whose SDKs dispatch on the event name.
std::string SseNamedEvent(std::string_view name, std::string_view payload);

// Incremental parser: feed bytes as they arrive; each complete event's data (its data lines
// joined with "\n") goes to the callback, with its `event:` name ("" when it has none) to an
// OnEvent callback. Comments and other fields are skipped; "\n", "\r\n" and "\r" all end a line.
class SseParser {
 public:
  using OnData = std::function<void(const std::string& data)>;
  using OnEvent = std::function<void(const std::string& event, const std::string& data)>;
  explicit SseParser(OnData on_data) : on_data_(std::move(on_data)) {}
  static SseParser WithEventNames(OnEvent on_event) {
    SseParser p(nullptr);
    p.on_event_ = std::move(on_event);
    return p;
  }

  void Feed(std::string_view bytes);
  // Dispatches a final event not followed by a blank line (a stream cut short).
  void Finish();

 private:
  void Line(std::string_view line);

  OnData on_data_;
  OnEvent on_event_;
  std::string line_;
  std::string event_;
  std::string data_;
  bool has_data_ = false;
  bool after_cr_ = false;
};

}  // namespace kvforge::server
