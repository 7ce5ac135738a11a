#include "config_file.h"

#include <yaml.h>

#include <cstdio>
#include <memory>

#include "base/strings.h"

namespace kvforge::cli {

namespace {

using base::StrFormat;

// One libyaml parser over an open file; closes both.
class YamlEvents {
 public:
  YamlEvents(FILE* f) : file_(f) {
    ok_ = yaml_parser_initialize(&parser_) == 1;
    if (ok_) yaml_parser_set_input_file(&parser_, file_);
  }
  ~YamlEvents() {
    if (has_event_) yaml_event_delete(&event_);
    if (ok_) yaml_parser_delete(&parser_);
    std::fclose(file_);
  }
  YamlEvents(const YamlEvents&) = delete;
  YamlEvents& operator=(const YamlEvents&) = delete;

  // The next event, or an error naming the line.
  Result<const yaml_event_t*> Next(const std::string& path) {
    if (!ok_) return Status::Internal("cannot set up the YAML parser");
    if (has_event_) yaml_event_delete(&event_);
    has_event_ = false;
    if (yaml_parser_parse(&parser_, &event_) != 1)
      return Status::InvalidArgument(
          StrFormat("%s:%zu: %s", path.c_str(), parser_.problem_mark.line + 1,
                    parser_.problem != nullptr ? parser_.problem : "YAML syntax error"));
    has_event_ = true;
    return &event_;
  }

 private:
  FILE* file_;
  yaml_parser_t parser_{};
  yaml_event_t event_{};
  bool ok_ = false;
  bool has_event_ = false;
};

std::string ScalarText(const yaml_event_t& e) {
  return std::string(reinterpret_cast<const char*>(e.data.scalar.value), e.data.scalar.length);
}

size_t Line(const yaml_event_t& e) { return e.start_mark.line + 1; }

// "enable_prefix_caching" / "--port" -> "enable-prefix-caching" / "port".
std::string FlagName(std::string key) {
  if (key.rfind("--", 0) == 0) key = key.substr(2);
  for (char& c : key)
    if (c == '_') c = '-';
  return key;
}

Result<bool> SwitchValue(const std::string& key, const std::string& v) {
  if (v == "true" || v == "True" || v == "TRUE" || v == "yes" || v == "on") return true;
  if (v == "false" || v == "False" || v == "FALSE" || v == "no" || v == "off") return false;
  return Status::InvalidArgument("'" + key + "' is a switch: give true or false, not '" + v + "'");
}

// One key's value: a scalar, or a sequence of scalars joined with commas.
Result<std::string> ReadValue(YamlEvents& events, const std::string& path, const std::string& key) {
  KVF_ASSIGN_OR_RETURN(const yaml_event_t* e, events.Next(path));
  if (e->type == YAML_SCALAR_EVENT) {
    std::string v = ScalarText(*e);
    const bool plain = e->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    if (v.empty() || (plain && (v == "~" || v == "null")))
      return Status::InvalidArgument(
          StrFormat("%s:%zu: '%s' has no value", path.c_str(), Line(*e), key.c_str()));
    return v;
  }
  if (e->type != YAML_SEQUENCE_START_EVENT)
    return Status::InvalidArgument(StrFormat("%s:%zu: '%s' must be a scalar or a list of scalars",
                                             path.c_str(), Line(*e), key.c_str()));
  std::string joined;
  for (;;) {
    KVF_ASSIGN_OR_RETURN(const yaml_event_t* item, events.Next(path));
    if (item->type == YAML_SEQUENCE_END_EVENT) break;
    if (item->type != YAML_SCALAR_EVENT)
      return Status::InvalidArgument(StrFormat("%s:%zu: the list of '%s' must hold scalars",
                                               path.c_str(), Line(*item), key.c_str()));
    joined += (joined.empty() ? "" : ",") + ScalarText(*item);
  }
  return joined;
}

// The argument(s) for one key, appended to *args; unknown keys are collected in *unknown.
Status AddFlag(const FlagParser& parser, const std::string& path, const std::string& key,
               const std::string& value, std::vector<std::string>* args,
               std::vector<std::string>* unknown) {
  const std::string name = FlagName(key);
  if (name == "config")
    return Status::InvalidArgument(path + ": 'config' cannot name another config file");
  if (!parser.Has(name)) {
    unknown->push_back(key);
    return Status::Ok();
  }
  if (!parser.IsSwitch(name)) {
    args->push_back("--" + name + "=" + value);
    return Status::Ok();
  }
  auto on = SwitchValue(key, value);
  if (!on.ok()) return on.status().WithContext(path);
  if (*on)
    args->push_back("--" + name);
  else if (parser.SwitchTakesValue(name))
    args->push_back("--" + name + "=false");
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::string>> ReadConfigFile(const std::string& path, const FlagParser& parser) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Status::InvalidArgument("cannot read the config file " + path);
  YamlEvents events(f);
  std::vector<std::string> args, unknown;
  bool in_mapping = false;
  for (;;) {
    KVF_ASSIGN_OR_RETURN(const yaml_event_t* e, events.Next(path));
    if (e->type == YAML_STREAM_END_EVENT) break;
    if (e->type == YAML_STREAM_START_EVENT || e->type == YAML_DOCUMENT_START_EVENT ||
        e->type == YAML_DOCUMENT_END_EVENT)
      continue;
    if (!in_mapping) {
      if (e->type != YAML_MAPPING_START_EVENT)
        return Status::InvalidArgument(StrFormat(
            "%s:%zu: the file must be a mapping of flag names to values", path.c_str(), Line(*e)));
      in_mapping = true;
      continue;
    }
    if (e->type == YAML_MAPPING_END_EVENT) {
      in_mapping = false;
      continue;
    }
    if (e->type != YAML_SCALAR_EVENT)
      return Status::InvalidArgument(
          StrFormat("%s:%zu: keys must be flag names", path.c_str(), Line(*e)));
    const std::string key = ScalarText(*e);
    KVF_ASSIGN_OR_RETURN(std::string value, ReadValue(events, path, key));
    KVF_RETURN_IF_ERROR(AddFlag(parser, path, key, value, &args, &unknown));
  }
  if (!unknown.empty()) {
    std::string names;
    for (const auto& k : unknown) names += (names.empty() ? "'" : ", '") + k + "'";
    return Status::InvalidArgument(path + ": unknown key" + (unknown.size() > 1 ? "s " : " ") +
                                   names + " (keys are the flag names; see --help)");
  }
  return args;
}

Result<std::vector<std::string>> WithConfigFile(const FlagParser& parser,
                                                const std::vector<std::string>& args) {
  std::string path;
  bool found = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config") {
      if (i + 1 >= args.size()) return Status::InvalidArgument("--config needs a value");
      path = args[i + 1];
      found = true;
    } else if (args[i].rfind("--config=", 0) == 0) {
      path = args[i].substr(9);
      found = true;
    }
  }
  if (!found) return args;
  KVF_ASSIGN_OR_RETURN(std::vector<std::string> out, ReadConfigFile(path, parser));
  out.insert(out.end(), args.begin(), args.end());
  return out;
}

}  // namespace kvforge::cli
