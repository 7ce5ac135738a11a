// flags.h — the command-line flag parser shared by every `kvforge` subcommand.
// Accepts `--name value` and `--name=value`; boolean flags take no value (switches may take
// `=true`/`=false`). `--help`/`-h` sets help_requested(). Unknown flags, missing values and
// unparsable numbers are errors (exit 2). --help lists the flags in sections (Section()).
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
  // A flag with its own setter. `metavar` names its value in --help; a switch (metavar "") takes
  // no value and passes `implied` to the setter, or takes `=VALUE` when `optional_value`.
  struct Custom {
    std::string name;
    std::string metavar;
    std::string help;
    std::string default_text;  // shown as [default: ...] when not empty
    std::string implied;       // a switch's value when none is given
    bool optional_value = false;
  };
  void AddCustom(const Custom& flag, std::function<Status(const std::string&)> set);
  // `--alias` sets the same value as `--name`.
  void AddAlias(const std::string& alias, const std::string& name);
  // The flags added after this are listed under `title` in --help.
  void Section(const std::string& title) { section_ = title; }
  // Whether `name` is already a flag or an alias.
  bool Has(const std::string& name) const;
  // Whether the flag `name` is a switch (takes no value), and whether it also takes =VALUE.
  bool IsSwitch(const std::string& name) const;
  bool SwitchTakesValue(const std::string& name) const;
  // A switch that, once the flags are parsed, makes HandleParse print `output()` and exit 0.
  void AddExitAction(const std::string& name, const std::string& help,
                     std::function<std::string()> output);
  // A check run after a successful parse (not with --help); its error fails the parse.
  void AddCheck(std::function<Status()> check) { checks_.push_back(std::move(check)); }
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
    std::string metavar;  // "" for a switch
    std::function<Status(const std::string&)> set;
    bool required = false;
    bool given = false;
    std::string default_text;
    std::string implied;          // a switch's value without =VALUE
    bool optional_value = false;  // a switch that also takes =VALUE
    std::string section;
  };
  void Push(Flag flag);
  Flag* Find(const std::string& name);
  const Flag* Find(const std::string& name) const;
  std::string command_;
  std::string summary_;
  std::vector<Flag> flags_;
  std::vector<std::pair<std::string, std::string>> aliases_;  // alias -> flag name
  bool help_requested_ = false;
  std::string section_;
  std::vector<std::function<Status()>> checks_;
  std::vector<std::pair<std::string, std::function<std::string()>>> actions_;  // flag -> output
  friend int HandleParse(FlagParser& parser, const std::vector<std::string>& args);
};

// Runs a parsed subcommand's standard prologue: prints usage on --help (returns 0), prints the
// error and usage hint on failure (returns 2), otherwise returns -1 meaning "go on".
int HandleParse(FlagParser& parser, const std::vector<std::string>& args);
// A flag value the engine configuration refused: prints "kvforge: MESSAGE", returns exit code 2.
int BadFlagValue(const Status& status);

}  // namespace kvforge::cli
