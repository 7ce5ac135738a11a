#include "chat/chat_template.h"

#include <charconv>
#include <new>

#include "chat/ast.h"
#include "chat/errors.h"
#include "chat/interpreter.h"
#include "chat/parser.h"

namespace kvforge::chat {

const char kDefaultChatTemplate[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ "
    "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' }}{% endif %}";

namespace {

// Days from 1970-01-01 to a civil date (proleptic Gregorian).
int64_t DaysFromCivil(int64_t y, int m, int d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy =
      (153 * static_cast<unsigned>(m + (m > 2 ? -3 : 9)) + 2) / 5 + static_cast<unsigned>(d) - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool IsLeap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int DaysInMonth(int y, int m) {
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeap(y) ? 29 : kDays[m - 1];
}

}  // namespace

std::tm MakeTime(int year, int month, int day, int hour, int minute, int second) {
  std::tm t{};
  t.tm_year = year - 1900;
  t.tm_mon = month - 1;
  t.tm_mday = day;
  t.tm_hour = hour;
  t.tm_min = minute;
  t.tm_sec = second;
  const int64_t days = DaysFromCivil(year, month, day);
  t.tm_wday = static_cast<int>(((days % 7) + 11) % 7);  // 1970-01-01 was a Thursday
  t.tm_yday = static_cast<int>(days - DaysFromCivil(year, 1, 1));
  t.tm_isdst = 0;
  return t;
}

Result<std::tm> ParseIsoTime(std::string_view text) {
  int parts[6] = {0, 1, 1, 0, 0, 0};
  const char seps[] = {'-', '-', 'T', ':', ':'};
  size_t pos = 0;
  int count = 0;
  for (int i = 0; i < 6; ++i) {
    const size_t width = i == 0 ? 4 : 2;
    if (pos + width > text.size()) break;
    auto res = std::from_chars(text.data() + pos, text.data() + pos + width, parts[i]);
    if (res.ec != std::errc() || res.ptr != text.data() + pos + width) {
      return Status::InvalidArgument("bad time '" + std::string(text) +
                                     "': expected YYYY-MM-DD[THH:MM[:SS]]");
    }
    pos += width;
    ++count;
    if (i < 5 && pos < text.size()) {
      const char sep = text[pos];
      if (sep != seps[i] && !(i == 2 && sep == ' ')) {
        return Status::InvalidArgument("bad time '" + std::string(text) +
                                       "': expected YYYY-MM-DD[THH:MM[:SS]]");
      }
      ++pos;
    }
  }
  if (pos != text.size() || (count != 3 && count != 5 && count != 6)) {
    return Status::InvalidArgument("bad time '" + std::string(text) +
                                   "': expected YYYY-MM-DD[THH:MM[:SS]]");
  }
  if (parts[1] < 1 || parts[1] > 12 || parts[2] < 1 || parts[2] > DaysInMonth(parts[0], parts[1]) ||
      parts[3] > 23 || parts[4] > 59 || parts[5] > 60) {
    return Status::InvalidArgument("bad time '" + std::string(text) + "': out of range");
  }
  return MakeTime(parts[0], parts[1], parts[2], parts[3], parts[4], parts[5]);
}

Result<ChatTemplate> ChatTemplate::Parse(std::string_view source, const Limits& limits) {
  if (source.size() > limits.max_template_bytes) {
    return Status::ResourceExhausted("template of " + std::to_string(source.size()) +
                                     " bytes exceeds max_template_bytes (" +
                                     std::to_string(limits.max_template_bytes) + ")");
  }
  try {
    ParseOptions options;
    options.max_nesting_depth = limits.max_nesting_depth;
    std::shared_ptr<const Template> tmpl = ParseTemplate(source, options);
    return ChatTemplate(std::move(tmpl), limits);
  } catch (const TemplateException& e) {
    return e.ToStatus();
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("out of memory while parsing the template");
  } catch (const std::exception& e) {
    return Status::Internal(std::string("chat template parser: ") + e.what());
  } catch (...) {
    return Status::Internal("chat template parser: unknown exception");
  }
}

Result<std::string> ChatTemplate::Render(const ChatInputs& inputs) const {
  try {
    RenderEnv env;
    env.globals.reserve(inputs.extra.size() + 5);
    for (const auto& [name, value] : inputs.extra) {
      if (value.is_undefined()) continue;  // stays "'name' is undefined"
      value.Freeze();
      env.globals.emplace_back(name, value);
    }
    if (!inputs.messages.is_undefined()) {
      inputs.messages.Freeze();
      env.globals.emplace_back("messages", inputs.messages);
    }
    if (inputs.bos_token) env.globals.emplace_back("bos_token", Value::Str(*inputs.bos_token));
    if (inputs.eos_token) env.globals.emplace_back("eos_token", Value::Str(*inputs.eos_token));
    env.globals.emplace_back("add_generation_prompt", Value::Bool(inputs.add_generation_prompt));
    if (!inputs.tools.is_undefined()) {
      inputs.tools.Freeze();
      env.globals.emplace_back("tools", inputs.tools);
    }
    if (inputs.now) {
      env.now = *inputs.now;
    } else {
      const std::time_t t = std::time(nullptr);
      localtime_r(&t, &env.now);
    }
    Interpreter interpreter(*tmpl_, limits_, env);
    return interpreter.Render();
  } catch (const TemplateException& e) {
    return e.ToStatus();
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("out of memory while rendering the template");
  } catch (const std::exception& e) {
    return Status::Internal(std::string("chat template renderer: ") + e.what());
  } catch (...) {
    return Status::Internal("chat template renderer: unknown exception");
  }
}

}  // namespace kvforge::chat
