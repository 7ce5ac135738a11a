#include "flags.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "base/strings.h"

namespace kvforge::cli {

FlagParser::FlagParser(std::string command, std::string summary)
    : command_(std::move(command)), summary_(std::move(summary)) {}

void FlagParser::Push(Flag flag) {
  flag.section = section_;
  flags_.push_back(std::move(flag));
}

void FlagParser::AddString(const std::string& name, std::string* dst, const std::string& help) {
  Flag f{name, help, "S", nullptr, false, false, *dst, "", false, ""};
  f.set = [dst](const std::string& v) {
    *dst = v;
    return Status::Ok();
  };
  Push(std::move(f));
}

void FlagParser::AddInt(const std::string& name, int64_t* dst, const std::string& help) {
  Flag f{name, help, "N", nullptr, false, false, *dst ? std::to_string(*dst) : "", "", false, ""};
  f.set = [dst, name](const std::string& v) {
    errno = 0;
    char* end = nullptr;
    long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || errno == ERANGE)
      return Status::InvalidArgument("--" + name + ": not an integer: '" + v + "'");
    *dst = x;
    return Status::Ok();
  };
  Push(std::move(f));
}

void FlagParser::AddFloat(const std::string& name, double* dst, const std::string& help) {
  Flag f{name, help,  "X", nullptr, false, false, *dst != 0 ? base::StrFormat("%g", *dst) : "",
         "",   false, ""};
  f.set = [dst, name](const std::string& v) {
    char* end = nullptr;
    double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !std::isfinite(x))
      return Status::InvalidArgument("--" + name + ": not a number: '" + v + "'");
    *dst = x;
    return Status::Ok();
  };
  Push(std::move(f));
}

void FlagParser::AddBool(const std::string& name, bool* dst, const std::string& help) {
  Flag f{name, help, "", nullptr, false, false, "", "true", false, ""};
  f.set = [dst](const std::string&) {
    *dst = true;
    return Status::Ok();
  };
  Push(std::move(f));
}

void FlagParser::AddSize(const std::string& name, uint64_t* dst, const std::string& help) {
  Flag f{name, help,  "SIZE", nullptr, false, false, *dst ? std::to_string(*dst) : "",
         "",   false, ""};
  f.set = [dst, name](const std::string& v) {
    if (!base::ParseByteSize(v, dst))
      return Status::InvalidArgument("--" + name + ": not a byte size: '" + v +
                                     "' (examples: 512MiB, 2GiB)");
    return Status::Ok();
  };
  Push(std::move(f));
}

void FlagParser::AddCustom(const Custom& c, std::function<Status(const std::string&)> set) {
  Push({c.name, c.help, c.metavar, std::move(set), false, false, c.default_text, c.implied,
        c.optional_value, ""});
}

void FlagParser::AddExitAction(const std::string& name, const std::string& help,
                               std::function<std::string()> output) {
  Push({name, help, "", [](const std::string&) { return Status::Ok(); }, false, false, "", "",
        false, ""});
  actions_.emplace_back(name, std::move(output));
}

void FlagParser::Require(const std::string& name) {
  if (Flag* f = Find(name)) f->required = true;
}

bool FlagParser::Given(const std::string& name) const {
  const Flag* f = Find(name);
  return f != nullptr && f->given;
}

bool FlagParser::Has(const std::string& name) const { return Find(name) != nullptr; }

bool FlagParser::IsSwitch(const std::string& name) const {
  const Flag* f = Find(name);
  return f != nullptr && f->metavar.empty();
}

bool FlagParser::SwitchTakesValue(const std::string& name) const {
  const Flag* f = Find(name);
  return f != nullptr && f->metavar.empty() && f->optional_value;
}

void FlagParser::AddAlias(const std::string& alias, const std::string& name) {
  aliases_.emplace_back(alias, name);
}

FlagParser::Flag* FlagParser::Find(const std::string& name) {
  return const_cast<Flag*>(static_cast<const FlagParser*>(this)->Find(name));
}

const FlagParser::Flag* FlagParser::Find(const std::string& name) const {
  for (const auto& f : flags_)
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
    if (f->metavar.empty()) {
      if (has_value && !f->optional_value)
        return Status::InvalidArgument("--" + name + " takes no value");
      if (!has_value) value = f->implied;
    } else if (!has_value) {
      if (i + 1 >= args.size()) return Status::InvalidArgument("--" + name + " needs a value");
      value = args[++i];
    }
    KVF_RETURN_IF_ERROR(f->set(value));
    f->given = true;
  }
  for (const auto& f : flags_)
    if (f.required && !f.given) return Status::InvalidArgument("missing required flag --" + f.name);
  for (const auto& check : checks_) KVF_RETURN_IF_ERROR(check());
  return Status::Ok();
}

std::string FlagParser::Usage() const {
  std::string out = "usage: kvforge " + command_ + " [flags]\n" + summary_ + "\n\nflags:\n";
  std::string section;
  for (const auto& f : flags_) {
    if (f.section != section) {
      section = f.section;
      out += "\n" + section + ":\n";
    }
    std::string left = "  --" + f.name;
    if (!f.metavar.empty()) left += " " + f.metavar;
    if (f.optional_value) left += "[=BOOL]";
    if (left.size() < 28) left.resize(28, ' ');
    out += left + " " + f.help;
    if (f.required)
      out += " (required)";
    else if (!f.default_text.empty())
      out += " [default: " + f.default_text + "]";
    out += "\n";
  }
  if (!aliases_.empty()) out += "\nother spellings:\n";
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
  for (const auto& [name, output] : parser.actions_)
    if (parser.Given(name)) {
      std::fputs(output().c_str(), stdout);
      return 0;
    }
  return -1;
}

int BadFlagValue(const Status& status) {
  std::fprintf(stderr, "kvforge: %s\n", status.message().c_str());
  return 2;
}

}  // namespace kvforge::cli
