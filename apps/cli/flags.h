// flags.h — the command-line flag parser shared by every `kvforge` subcommand.
// Accepts `--name value` and `--name=value`; boolean flags take no value. `--help`/`-h` sets
// help_requested(). Unknown flags, missing values and unparsable numbers are errors (exit 2).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kvforge/status.h"

namespace kvforge::cli {

class FlagParser {
 public:
  FlagParser(std::string command, std::string summary);

  void AddString(const std::string& name, std::string* dst, const std::string& help);
  void AddInt(const std::string& name, int64_t* dst, const std::string& help);
  void AddFloat(const std::string& name, double* dst, const std::string& help);
  void AddBool(const std::string& name, bool* dst, const std::string& help);
  // Byte sizes such as 2GiB, 512MiB, 1000000.
  void AddSize(const std::string& name, uint64_t* dst, const std::string& help);
  // `--alias` sets the same value as `--name` (an engine option's own name, e.g.
  // --kv-cache-dtype for --kv-dtype: EngineConfig's field with '-' for '_').
  void AddAlias(const std::string& alias, const std::string& name);
  // Marks a flag as required (checked after parsing unless --help).
  void Require(const std::string& name);
  // Records whether a flag was given at all.
  bool Given(const std::string& name) const;

  Status Parse(const std::vector<std::string>& args);
  bool help_requested() const { return help_requested_; }
  std::string Usage() const;

 private:
  struct Flag {
    std::string name;
    std::string help;
    std::string kind;  // "string", "int", "float", "bool", "size"
    std::function<Status(const std::string&)> set;
    bool required = false;
    bool given = false;
    std::string default_text;
  };
  Flag* Find(const std::string& name);
  std::string command_;
  std::string summary_;
  std::vector<Flag> flags_;
  std::vector<std::pair<std::string, std::string>> aliases_;  // alias -> flag name
  bool help_requested_ = false;
};

// Runs a parsed subcommand's standard prologue: prints usage on --help (returns 0), prints the
// error and usage hint on failure (returns 2), otherwise returns -1 meaning "go on".
int HandleParse(FlagParser& parser, const std::vector<std::string>& args);
// A flag value the engine configuration refused: prints "kvforge: MESSAGE", returns exit code 2.
int BadFlagValue(const Status& status);

}  // namespace kvforge::cli
