#include "flags.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "base/strings.h"

namespace kvforge::cli {

FlagParser::FlagParser(std::string command, std::string summary)
    : command_(std::move(command)), summary_(std::move(summary)) {}

void FlagParser::AddString(const std::string& name, std::string* dst, const std::string& help) {
  flags_.push_back({name, help, "string",
                    [dst](const std::string& v) {
                      *dst = v;
                      return Status::Ok();
                    },
                    false, false, *dst});
}

void FlagParser::AddInt(const std::string& name, int64_t* dst, const std::string& help) {
  flags_.push_back({name, help, "int",
                    [dst, name](const std::string& v) {
                      errno = 0;
                      char* end = nullptr;
                      long long x = std::strtoll(v.c_str(), &end, 10);
                      if (v.empty() || *end != '\0' || errno == ERANGE)
                        return Status::InvalidArgument("--" + name + ": not an integer: '" + v +
                                                       "'");
                      *dst = x;
                      return Status::Ok();
                    },
                    false, false, std::to_string(*dst)});
}

void FlagParser::AddFloat(const std::string& name, double* dst, const std::string& help) {
  flags_.push_back({name, help, "float",
                    [dst, name](const std::string& v) {
                      char* end = nullptr;
                      double x = std::strtod(v.c_str(), &end);
                      if (v.empty() || *end != '\0' || !std::isfinite(x))
                        return Status::InvalidArgument("--" + name + ": not a number: '" + v + "'");
                      *dst = x;
                      return Status::Ok();
                    },
                    false, false, base::StrFormat("%g", *dst)});
}

void FlagParser::AddBool(const std::string& name, bool* dst, const std::string& help) {
  flags_.push_back({name, help, "bool",
                    [dst](const std::string&) {
                      *dst = true;
                      return Status::Ok();
                    },
                    false, false, ""});
}

void FlagParser::AddSize(const std::string& name, uint64_t* dst, const std::string& help) {
  flags_.push_back({name, help, "size",
                    [dst, name](const std::string& v) {
                      if (!base::ParseByteSize(v, dst))
                        return Status::InvalidArgument("--" + name + ": not a byte size: '" + v +
                                                       "' (examples: 512MiB, 2GiB)");
                      return Status::Ok();
                    },
                    false, false, std::to_string(*dst)});
}

void FlagParser::Require(const std::string& name) {
  if (Flag* f = Find(name)) f->required = true;
}

bool FlagParser::Given(const std::string& name) const {
  for (const auto& f : flags_)
    if (f.name == name) return f.given;
  return false;
}

void FlagParser::AddAlias(const std::string& alias, const std::string& name) {
  aliases_.emplace_back(alias, name);
}

FlagParser::Flag* FlagParser::Find(const std::string& name) {
  for (auto& f : flags_)
    if (f.name == name) return &f;
  for (const auto& [alias, target] : aliases_)
    if (alias == name) return Find(target);
  return nullptr;
}

Status FlagParser::Parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      help_requested_ = true;
      return Status::Ok();
    }
    if (a.size() < 3 || a[0] != '-' || a[1] != '-')
      return Status::InvalidArgument("unexpected argument '" + a + "'");
    std::string name = a.substr(2);
    std::string value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    Flag* f = Find(name);
    if (f == nullptr) return Status::InvalidArgument("unknown flag '--" + name + "'");
    if (f->kind == "bool") {
      if (has_value) return Status::InvalidArgument("--" + name + " takes no value");
    } else if (!has_value) {
      if (i + 1 >= args.size()) return Status::InvalidArgument("--" + name + " needs a value");
      value = args[++i];
    }
    KVF_RETURN_IF_ERROR(f->set(value));
    f->given = true;
  }
  for (const auto& f : flags_)
    if (f.required && !f.given) return Status::InvalidArgument("missing required flag --" + f.name);
  return Status::Ok();
}

std::string FlagParser::Usage() const {
  std::string out = "usage: kvforge " + command_ + " [flags]\n" + summary_ + "\n\nflags:\n";
  for (const auto& f : flags_) {
    std::string left = "  --" + f.name;
    if (f.kind != "bool")
      left += " " + std::string(f.kind == "string" ? "S"
                                : f.kind == "size" ? "SIZE"
                                : f.kind == "int"  ? "N"
                                                   : "X");
    if (left.size() < 28) left.resize(28, ' ');
    out += left + " " + f.help;
    if (f.required)
      out += " (required)";
    else if (!f.default_text.empty() && f.default_text != "0" && f.kind != "bool")
      out += " [default: " + f.default_text + "]";
    out += "\n";
  }
  for (const auto& [alias, target] : aliases_) {
    std::string left = "  --" + alias;
    if (left.size() < 28) left.resize(28, ' ');
    out += left + " the same as --" + target + "\n";
  }
  out += "  --help                     show this help\n";
  return out;
}

int HandleParse(FlagParser& parser, const std::vector<std::string>& args) {
  Status s = parser.Parse(args);
  if (parser.help_requested()) {
    std::fputs(parser.Usage().c_str(), stdout);
    return 0;
  }
  if (!s.ok()) {
    std::fprintf(stderr, "kvforge: %s\n(see --help)\n", s.message().c_str());
    return 2;
  }
  return -1;
}

int BadFlagValue(const Status& status) {
  std::fprintf(stderr, "kvforge: %s\n", status.message().c_str());
  return 2;
}

}  // namespace kvforge::cli
