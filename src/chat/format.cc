// Python string formatting: `"%s" % value` (printf-style) and str.format's mini-language.
#include <cmath>
#include <cstdio>
#include <string>

#include "chat/errors.h"
#include "chat/interpreter.h"
#include "chat/pyops.h"
#include "chat/pystr.h"

namespace kvforge::chat {
namespace {

// Guards widths/precisions before they turn into allocations.
int64_t CheckedWidth(Interpreter& in, int64_t w) {
  if (w < 0) return 0;
  if (static_cast<uint64_t>(w) > in.limits().max_output_bytes) {
    in.ChargeString(static_cast<size_t>(in.limits().max_output_bytes) + 1);  // throws
  }
  return w;
}

std::string Digits(uint64_t v, int base, bool upper) {
  if (v == 0) return "0";
  const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string s;
  while (v > 0) {
    s.push_back(digits[v % static_cast<uint64_t>(base)]);
    v /= static_cast<uint64_t>(base);
  }
  return std::string(s.rbegin(), s.rend());
}

uint64_t Magnitude(int64_t v) {
  return v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
}

std::string GroupDigits(const std::string& digits, char sep, size_t every = 3) {
  std::string out;
  const size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && (n - i) % every == 0) out.push_back(sep);
    out.push_back(digits[i]);
  }
  return out;
}

std::string CFormatDouble(char conv, int precision, bool alternate, double v) {
  char spec[16];
  std::snprintf(spec, sizeof(spec), "%%%s.%d%c", alternate ? "#" : "", precision, conv);
  const int n = std::snprintf(nullptr, 0, spec, v);
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), spec, v);
  out.resize(static_cast<size_t>(n));
  return out;
}

int64_t AsInteger(const Value& v, char conv) {
  if (v.is_int() || v.is_bool()) return v.int_value();
  if (v.is_float() && conv != 'x' && conv != 'X' && conv != 'o' && conv != 'c') {
    const double d = v.float_value();
    if (!std::isfinite(d)) ThrowError("OverflowError", "cannot convert float infinity to integer");
    if (std::fabs(d) >= 9.2e18)
      ThrowError("OverflowError", "integer result does not fit in 64 bits");
    return static_cast<int64_t>(d);
  }
  if (v.is_undefined()) ThrowUndefined(v);
  ThrowTypeError(std::string("%") + conv + " format: " +
                 (conv == 'x' || conv == 'X' || conv == 'o' ? "an integer" : "a real number") +
                 " is required, not " + std::string(PyTypeName(v)));
}

double AsDouble(const Value& v, char conv) {
  if (v.is_number()) return v.number_as_double();
  if (v.is_undefined()) ThrowUndefined(v);
  ThrowTypeError(std::string("must be real number, not ") + std::string(PyTypeName(v)) + " (in %" +
                 conv + ")");
}

// Pads `body` (already with sign/prefix) to `width` code points.
std::string PadTo(const std::string& body, int64_t width, bool left_align) {
  const auto len = static_cast<int64_t>(CodePointCount(body));
  if (len >= width) return body;
  const std::string pad(static_cast<size_t>(width - len), ' ');
  return left_align ? body + pad : pad + body;
}

}  // namespace

std::string PercentFormat(Interpreter& in, std::string_view fmt, const Value& args) {
  std::vector<Value> positional;
  const Value* mapping = nullptr;
  if (args.is_tuple()) {
    positional = args.list().items;
  } else {
    if (args.is_dict()) mapping = &args;
    positional.push_back(args);
  }
  size_t next = 0;
  bool used_mapping = false;
  auto take = [&]() -> const Value& {
    if (next >= positional.size()) ThrowTypeError("not enough arguments for format string");
    return positional[next++];
  };
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c != '%') {
      out.push_back(c);
      continue;
    }
    if (++i >= fmt.size()) ThrowValueError("incomplete format");
    const Value* keyed = nullptr;
    if (fmt[i] == '(') {
      if (mapping == nullptr) ThrowTypeError("format requires a mapping");
      const size_t close = fmt.find(')', i);
      if (close == std::string_view::npos) ThrowValueError("incomplete format key");
      const std::string key(fmt.substr(i + 1, close - i - 1));
      keyed = mapping->dict().FindStr(key);
      if (keyed == nullptr) ThrowError("KeyError", "'" + key + "'");
      used_mapping = true;
      i = close + 1;
    }
    bool left = false, plus = false, space = false, alt = false, zero = false;
    for (; i < fmt.size(); ++i) {
      const char f = fmt[i];
      if (f == '-') {
        left = true;
      } else if (f == '+') {
        plus = true;
      } else if (f == ' ') {
        space = true;
      } else if (f == '#') {
        alt = true;
      } else if (f == '0') {
        zero = true;
      } else {
        break;
      }
    }
    int64_t width = 0;
    if (i < fmt.size() && fmt[i] == '*') {
      width = AsInteger(take(), 'd');
      if (width < 0) {
        left = true;
        width = -width;
      }
      ++i;
    } else {
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') {
        width = width * 10 + (fmt[i++] - '0');
        CheckedWidth(in, width);
      }
    }
    int64_t precision = -1;
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      precision = 0;
      if (i < fmt.size() && fmt[i] == '*') {
        precision = AsInteger(take(), 'd');
        ++i;
      } else {
        while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') {
          precision = precision * 10 + (fmt[i++] - '0');
          CheckedWidth(in, precision);
        }
      }
    }
    while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) ThrowValueError("incomplete format");
    const char conv = fmt[i];
    CheckedWidth(in, width);
    CheckedWidth(in, precision);
    if (conv == '%') {
      out.push_back('%');
      continue;
    }
    const Value& v = keyed ? *keyed : take();
    std::string body;
    switch (conv) {
      case 's':
      case 'r':
      case 'a': {
        body = conv == 's' ? ToStr(v) : Repr(v);
        if (precision >= 0 && CodePointCount(body) > static_cast<size_t>(precision)) {
          body = body.substr(0, CodePointOffsets(body)[static_cast<size_t>(precision)]);
        }
        out += PadTo(body, width, left);
        continue;
      }
      case 'c': {
        if (v.is_string() && CodePointCount(v.str()) == 1) {
          body = v.str();
        } else {
          const int64_t cp = AsInteger(v, 'c');
          if (cp < 0 || cp > 0x10FFFF) ThrowError("OverflowError", "%c arg not in range(0x110000)");
          AppendUtf8(static_cast<uint32_t>(cp), &body);
        }
        out += PadTo(body, width, left);
        continue;
      }
      case 'd':
      case 'i':
      case 'u':
      case 'x':
      case 'X':
      case 'o': {
        const int64_t n = AsInteger(v, conv);
        const int base = conv == 'x' || conv == 'X' ? 16 : (conv == 'o' ? 8 : 10);
        std::string digits = Digits(Magnitude(n), base, conv == 'X');
        if (precision > 0 && digits.size() < static_cast<size_t>(precision)) {
          digits.insert(0, static_cast<size_t>(precision) - digits.size(), '0');
        }
        std::string prefix = n < 0 ? "-" : (plus ? "+" : (space ? " " : ""));
        if (alt && base == 16) prefix += conv == 'X' ? "0X" : "0x";
        if (alt && base == 8) prefix += "0o";
        body = prefix + digits;
        if (zero && !left && static_cast<int64_t>(body.size()) < width) {
          body = prefix + std::string(static_cast<size_t>(width) - body.size(), '0') + digits;
        }
        out += PadTo(body, width, left);
        continue;
      }
      case 'e':
      case 'E':
      case 'f':
      case 'F':
      case 'g':
      case 'G': {
        const double d = AsDouble(v, conv);
        body = CFormatDouble(
            conv, precision < 0 ? 6 : static_cast<int>(std::min<int64_t>(precision, 1000)), alt,
            std::fabs(d));
        std::string sign =
            std::signbit(d) && !std::isnan(d) ? "-" : (plus ? "+" : (space ? " " : ""));
        if (zero && !left && std::isfinite(d) &&
            static_cast<int64_t>(sign.size() + body.size()) < width) {
          body = sign + std::string(static_cast<size_t>(width) - sign.size() - body.size(), '0') +
                 body;
        } else {
          body = sign + body;
        }
        out += PadTo(body, width, left);
        continue;
      }
      default:
        ThrowValueError(std::string("unsupported format character '") + conv + "'");
    }
  }
  if (next < positional.size() && !used_mapping && mapping == nullptr) {
    ThrowTypeError("not all arguments converted during string formatting");
  }
  return out;
}

namespace {

struct Spec {
  std::string fill = " ";
  char align = 0;  // '<', '>', '^', '=' or 0
  char sign = '-';
  bool alternate = false;
  int64_t width = -1;
  char grouping = 0;
  int64_t precision = -1;
  char type = 0;
};

Spec ParseSpec(Interpreter& in, std::string_view s) {
  Spec spec;
  size_t i = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  // fill may be any (UTF-8) character when followed by an align char
  if (!s.empty()) {
    size_t after = 0;
    DecodeUtf8(s, &after);
    if (after < s.size() && is_align(s[after])) {
      spec.fill = std::string(s.substr(0, after));
      spec.align = s[after];
      i = after + 1;
    } else if (is_align(s[0])) {
      spec.align = s[0];
      i = 1;
    }
  }
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) spec.sign = s[i++];
  if (i < s.size() && s[i] == '#') {
    spec.alternate = true;
    ++i;
  }
  if (i < s.size() && s[i] == '0') {
    if (spec.align == 0) {
      spec.fill = "0";
      spec.align = '=';
    }
    ++i;
  }
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    spec.width = (spec.width < 0 ? 0 : spec.width) * 10 + (s[i++] - '0');
    CheckedWidth(in, spec.width);
  }
  if (i < s.size() && (s[i] == ',' || s[i] == '_')) spec.grouping = s[i++];
  if (i < s.size() && s[i] == '.') {
    ++i;
    spec.precision = 0;
    if (i >= s.size() || s[i] < '0' || s[i] > '9')
      ThrowValueError("Format specifier missing precision");
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      spec.precision = spec.precision * 10 + (s[i++] - '0');
      CheckedWidth(in, spec.precision);
    }
  }
  if (i < s.size()) spec.type = s[i++];
  if (i < s.size()) ThrowValueError("Invalid format specifier '" + std::string(s) + "'");
  return spec;
}

std::string Align(const std::string& sign, const std::string& body, const Spec& spec,
                  char default_align) {
  const char align = spec.align ? spec.align : default_align;
  const auto len = static_cast<int64_t>(CodePointCount(sign) + CodePointCount(body));
  if (spec.width <= len) return sign + body;
  const auto pad = static_cast<size_t>(spec.width - len);
  auto fill = [&](size_t n) {
    std::string f;
    for (size_t k = 0; k < n; ++k) f += spec.fill;
    return f;
  };
  switch (align) {
    case '<':
      return sign + body + fill(pad);
    case '^':
      return fill(pad / 2) + sign + body + fill(pad - pad / 2);
    case '=':
      return sign + fill(pad) + body;
    default:
      return fill(pad) + sign + body;
  }
}

std::string FormatValue(const Value& v, const Spec& spec) {
  const bool numeric =
      (v.is_number() && !(v.is_bool() && spec.type == 0 && spec.width < 0 && spec.precision < 0));
  if (v.is_string() || !numeric) {
    if (spec.type != 0 && spec.type != 's') {
      ThrowValueError(std::string("Unknown format code '") + spec.type + "' for object of type '" +
                      std::string(PyTypeName(v)) + "'");
    }
    if (!v.is_string() && !v.is_number() &&
        (spec.width >= 0 || spec.precision >= 0 || spec.align != 0)) {
      ThrowTypeError("unsupported format string passed to " + std::string(PyTypeName(v)) +
                     ".__format__");
    }
    std::string s = ToStr(v);
    if (spec.precision >= 0 && CodePointCount(s) > static_cast<size_t>(spec.precision)) {
      s = s.substr(0, CodePointOffsets(s)[static_cast<size_t>(spec.precision)]);
    }
    return Align("", s, spec, '<');
  }
  char type = spec.type;
  const bool is_int = v.is_int() || v.is_bool();
  if (is_int && (type == 0 || type == 'd' || type == 'n' || type == 'x' || type == 'X' ||
                 type == 'o' || type == 'b' || type == 'c')) {
    const int64_t n = v.int_value();
    if (type == 'c') {
      std::string s;
      AppendUtf8(static_cast<uint32_t>(n), &s);
      return Align("", s, spec, '<');
    }
    const int base = type == 'x' || type == 'X' ? 16 : (type == 'o' ? 8 : (type == 'b' ? 2 : 10));
    std::string digits = Digits(Magnitude(n), base, type == 'X');
    if (spec.grouping) digits = GroupDigits(digits, spec.grouping, base == 10 ? 3 : 4);
    std::string sign = n < 0 ? "-" : (spec.sign == '+' ? "+" : (spec.sign == ' ' ? " " : ""));
    if (spec.alternate && base != 10) {
      sign += base == 16 ? (type == 'X' ? "0X" : "0x") : (base == 8 ? "0o" : "0b");
    }
    return Align(sign, digits, spec, '>');
  }
  if (is_int && (type != 'e' && type != 'E' && type != 'f' && type != 'F' && type != 'g' &&
                 type != 'G' && type != '%')) {
    ThrowValueError(std::string("Unknown format code '") + type + "' for object of type 'int'");
  }
  const double d = v.number_as_double();
  std::string body;
  const bool percent = type == '%';
  const double x = std::fabs(percent ? d * 100 : d);
  if (type == 0) {
    if (spec.precision < 0) {
      body = FloatRepr(x);
    } else {
      body = CFormatDouble('g', static_cast<int>(std::max<int64_t>(1, spec.precision)),
                           spec.alternate, x);
      if (std::isfinite(x) && body.find_first_of(".e") == std::string::npos) body += ".0";
    }
  } else if (type == 'e' || type == 'E' || type == 'f' || type == 'F' || type == 'g' ||
             type == 'G' || percent || type == 'n') {
    const char conv = percent ? 'f' : (type == 'n' ? 'g' : type);
    body = CFormatDouble(
        conv, static_cast<int>(spec.precision < 0 ? 6 : std::min<int64_t>(spec.precision, 1000)),
        spec.alternate, x);
    if (percent) body += "%";
  } else {
    ThrowValueError(std::string("Unknown format code '") + type + "' for object of type 'float'");
  }
  if (spec.grouping && std::isfinite(x)) {
    const size_t end = body.find_first_not_of("0123456789");
    body = GroupDigits(body.substr(0, end), spec.grouping) +
           (end == std::string::npos ? "" : body.substr(end));
  }
  std::string sign = std::signbit(d) && !std::isnan(d)
                         ? "-"
                         : (spec.sign == '+' ? "+" : (spec.sign == ' ' ? " " : ""));
  return Align(sign, body, spec, '>');
}

}  // namespace

std::string BraceFormat(Interpreter& in, std::string_view fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  int numbering = 0;  // 0 unknown, 1 automatic, 2 manual
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      ThrowValueError("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    // Find the matching '}' (one level of nesting allowed inside the spec).
    size_t j = i + 1;
    int nest = 1;
    for (; j < fmt.size(); ++j) {
      if (fmt[j] == '{') ++nest;
      if (fmt[j] == '}' && --nest == 0) break;
    }
    if (j >= fmt.size()) ThrowValueError("expected '}' before end of string");
    std::string_view field = fmt.substr(i + 1, j - i - 1);
    i = j;
    std::string_view spec_text;
    char conversion = 0;
    const size_t colon = field.find(':');
    std::string_view head = field.substr(0, colon);
    if (colon != std::string_view::npos) spec_text = field.substr(colon + 1);
    const size_t bang = head.find('!');
    if (bang != std::string_view::npos) {
      if (bang + 2 != head.size()) ThrowValueError("expected ':' after conversion specifier");
      conversion = head[bang + 1];
      head = head.substr(0, bang);
    }
    // Argument name: leading index or identifier, then .attr / [key] accessors.
    size_t k = 0;
    while (k < head.size() && head[k] != '.' && head[k] != '[') ++k;
    const std::string_view arg_name = head.substr(0, k);
    Value value;
    if (arg_name.empty() || (arg_name[0] >= '0' && arg_name[0] <= '9')) {
      size_t index = 0;
      if (arg_name.empty()) {
        if (numbering == 2) {
          ThrowValueError(
              "cannot switch from manual field specification to automatic field numbering");
        }
        numbering = 1;
        index = auto_index++;
      } else {
        if (numbering == 1) {
          ThrowValueError(
              "cannot switch from automatic field numbering to manual field specification");
        }
        numbering = 2;
        for (char d : arg_name) {
          if (d < '0' || d > '9') ThrowValueError("invalid format field");
          index = index * 10 + static_cast<size_t>(d - '0');
          if (index > 1000000) ThrowError("IndexError", "Replacement index out of range");
        }
      }
      if (index >= args.positional.size()) {
        ThrowError("IndexError", "Replacement index " + std::to_string(index) +
                                     " out of range for positional args tuple");
      }
      value = args.positional[index];
    } else {
      bool found = false;
      for (const auto& [key, v] : args.keyword) {
        if (key == arg_name) {
          value = v;
          found = true;
        }
      }
      if (!found) ThrowError("KeyError", "'" + std::string(arg_name) + "'");
    }
    while (k < head.size()) {
      if (head[k] == '.') {
        size_t e = k + 1;
        while (e < head.size() && head[e] != '.' && head[e] != '[') ++e;
        value = in.GetAttr(value, head.substr(k + 1, e - k - 1));
        k = e;
      } else {
        const size_t e = head.find(']', k);
        if (e == std::string_view::npos) ThrowValueError("Missing ']' in format string");
        const std::string_view key = head.substr(k + 1, e - k - 1);
        bool digits = !key.empty() && key.size() < 18;
        for (char d : key) digits = digits && d >= '0' && d <= '9';
        value =
            in.GetItem(value, digits ? Value::Int(std::stoll(std::string(key))) : Value::Str(key));
        k = e + 1;
      }
    }
    if (value.is_undefined()) ThrowUndefined(value);
    if (conversion == 'r' || conversion == 'a') {
      value = Value::Str(Repr(value));
    } else if (conversion == 's') {
      value = Value::Str(ToStr(value));
    } else if (conversion != 0) {
      ThrowValueError(std::string("Unknown conversion specifier ") + conversion);
    }
    std::string spec_resolved;
    if (spec_text.find('{') != std::string_view::npos) {
      CallArgs nested = args;
      spec_resolved = BraceFormat(in, spec_text, nested);
      spec_text = spec_resolved;
    }
    out += FormatValue(value, ParseSpec(in, spec_text));
    if (out.size() > in.limits().max_output_bytes) in.ChargeString(out.size());
  }
  return out;
}

}  // namespace kvforge::chat
