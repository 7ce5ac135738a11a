#include "engine_flags.h"

#include <algorithm>
#include <string>

#include "base/strings.h"
#include "kvforge/config_names.h"

namespace kvforge::cli {
namespace {

std::string Metavar(const ConfigField& f) {
  switch (f.kind) {
    case ConfigFieldKind::kBool:
      return "";
    case ConfigFieldKind::kInt:
    case ConfigFieldKind::kUint:
      return f.byte_size ? "SIZE" : "N";
    case ConfigFieldKind::kFloat:
      return "X";
    case ConfigFieldKind::kString:
      return "S";
    case ConfigFieldKind::kChoice: {
      std::string names;
      for (const std::string& c : f.choices) names += (names.empty() ? "" : "|") + c;
      return names.size() <= 40 ? names : "NAME";
    }
  }
  return "S";
}

std::string Help(const ConfigField& f) {
  if (f.kind != ConfigFieldKind::kChoice || Metavar(f) != "NAME") return f.help;
  std::string names;
  for (const std::string& c : f.choices) names += (names.empty() ? "" : ", ") + c;
  return f.help + " (" + names + ")";
}

// The setter of one spelling: the field's parse, its error naming the flag.
std::function<Status(const std::string&)> Setter(const ConfigField& f, EngineConfig* config,
                                                 const std::string& flag) {
  return [&f, config, flag](const std::string& text) {
    return f.set(*config, text).WithContext("--" + flag);
  };
}

void AddField(FlagParser& p, const ConfigField& f, EngineConfig* config) {
  const std::string flag = ConfigFlagName(f.name);
  const bool is_switch = f.kind == ConfigFieldKind::kBool;
  if (!p.Has(flag)) {
    std::string def = f.get(*config);
    if (def.empty()) def = "''";
    FlagParser::Custom c{flag, Metavar(f), Help(f), def, is_switch ? "true" : "", is_switch};
    p.AddCustom(c, Setter(f, config, flag));
  }
  if (is_switch && !p.Has("no-" + flag)) {
    FlagParser::Custom off{"no-" + flag, "",      "the same as --" + flag + "=false",
                           "",           "false", false};
    p.AddCustom(off, Setter(f, config, "no-" + flag));
  }
  for (const ConfigAlias& a : f.aliases) {
    if (p.Has(a.flag)) continue;
    if (a.value.empty()) {
      p.AddAlias(a.flag, flag);
      continue;
    }
    FlagParser::Custom fixed{a.flag, "",      "the same as --" + flag + "=" + a.value,
                             "",     a.value, false};
    p.AddCustom(fixed, Setter(f, config, a.flag));
  }
}

}  // namespace

void AddEngineFlags(FlagParser& p, EngineConfig* config) {
  std::string group;
  for (const ConfigField& f : EngineConfigFields()) {
    if (f.group != group) {
      group = f.group;
      p.Section("engine: " + group);
    }
    AddField(p, f, config);
    if (f.name == "prefix_cache_mode" && !p.Has("prefix-cache")) {
      FlagParser::Custom c{"prefix-cache",
                           "off|hash|radix",
                           "shorthand: off is --no-enable-prefix-caching, hash or radix also "
                           "sets --prefix-cache-mode",
                           "",
                           "",
                           false};
      p.AddCustom(c, [config](const std::string& text) -> Status {
        if (text == "off") {
          config->enable_prefix_caching = false;
          return Status::Ok();
        }
        config->enable_prefix_caching = true;
        return SetConfigField(config, "prefix_cache_mode", text).WithContext("--prefix-cache");
      });
    }
  }
  p.Section("");
  p.AddCheck([config] { return ValidateEngineConfig(*config); });
  p.AddExitAction("print-engine-config",
                  "print the engine configuration the flags make (JSON, every option by its "
                  "name) and exit",
                  [config] {
                    std::string out = "{";
                    for (const ConfigField& f : EngineConfigFields())
                      out += (out.size() > 1 ? "," : "") + base::JsonQuote(f.name) + ":" +
                             base::JsonQuote(f.get(*config));
                    return out + "}\n";
                  });
}

Status RefuseUnusedEngineFields(const EngineConfig& config,
                                const std::vector<std::string_view>& used,
                                std::string_view command) {
  const EngineConfig defaults;
  for (const ConfigField& f : EngineConfigFields()) {
    if (std::find(used.begin(), used.end(), f.name) != used.end()) continue;
    if (f.get(config) != f.get(defaults))
      return Status::InvalidArgument(std::string(command) + " does not use --" +
                                     ConfigFlagName(f.name) +
                                     " (it runs the model's forward passes without the engine)");
  }
  return Status::Ok();
}

}  // namespace kvforge::cli
