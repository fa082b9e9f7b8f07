// A command's options built from the flag table (zero/train/flags.h), and the values read back:
// the `zero` CLI parses its words with it, and the Python module (bindings/) its keyword arguments.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "zero/train/cli.h"
#include "zero/train/flags.h"

namespace zero::cli {

// The options of one command: every row of the table that names it, under its name and aliases,
// plus -h/--help. `zero train` prints one group per table section; the others one "Options" group.
// `zero config` shows no defaults (a flag it is not given takes Hugging Face's default there, and
// says so); the others show them where the row asks.
class CommandFlags {
 public:
  explicit CommandFlags(train::Command command);
  CommandFlags(const CommandFlags&) = delete;
  CommandFlags& operator=(const CommandFlags&) = delete;

  const po::options_description& options() const { return options_; }

  // Parses `args` (the words after the subcommand). "--flag True" is read as "--flag=True" for a
  // bool flag; bool values are True/False, 1/0, yes/no in any case. Each flag on the command line,
  // or with a default shown, lands in values(). Throws UsageError for a malformed command line (as
  // cli::parse) and for a refused flag (naming the reason); a flag accepted without effect adds a
  // line to notes().
  void parse(std::span<char* const> args,
             const po::positional_options_description* positional = nullptr);

  bool help() const { return variables_.count("help") > 0; }
  // Whether `name` (or one of its aliases) was on the command line, not defaulted.
  bool given(std::string_view name) const;

  // The names of the rows given on the command line (under their name or an alias).
  std::vector<std::string> given_names() const;

  train::FlagValues& values() { return values_; }
  const train::FlagValues& values() const { return values_; }
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  void read(const train::Flag& flag, const std::string& spelling);

  train::Command command_;
  po::options_description options_;
  po::variables_map variables_;
  train::FlagValues values_;
  std::vector<std::string> notes_;
};

}  // namespace zero::cli
