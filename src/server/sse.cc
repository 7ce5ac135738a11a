#include "server/sse.h"

namespace kvforge::server {

std::string SseEvent(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 8);
  out += "data: ";
  out += payload;
  out += "\n\n";
  return out;
}

std::string SseNamedEvent(std::string_view name, std::string_view payload) {
  std::string out;
  out.reserve(name.size() + payload.size() + 16);
  out += "event: ";
  out += name;
  out += "\n";
  out += SseEvent(payload);
  return out;
}

void SseParser::Feed(std::string_view bytes) {
  for (char c : bytes) {
    if (after_cr_) {
      after_cr_ = false;
      if (c == '\n') continue;  // the second half of "\r\n"
    }
    if (c == '\r' || c == '\n') {
      after_cr_ = c == '\r';
      Line(line_);
      line_.clear();
    } else {
      line_ += c;
    }
  }
}

void SseParser::Finish() {
  if (!line_.empty()) {
    Line(line_);
    line_.clear();
  }
  Line("");
}

void SseParser::Line(std::string_view line) {
  if (line.empty()) {
    if (has_data_) {
      if (on_event_)
        on_event_(event_, data_);
      else
        on_data_(data_);
    }
    data_.clear();
    event_.clear();
    has_data_ = false;
    return;
  }
  if (line.front() == ':') return;  // a comment
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value =
      colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "event") {
    event_ = value;
    return;
  }
  if (field != "data") return;
  if (has_data_) data_ += '\n';
  data_ += value;
  has_data_ = true;
}

}  // namespace kvforge::server
