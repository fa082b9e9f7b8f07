// `zero config FILE`: resolves a DeepSpeed JSON config as training would and prints the result.
#include "zero/train/config_command.h"

#include <iostream>
#include <string>
#include <vector>

#include "commands.h"
#include "zero/core/error.h"
#include "zero/train/cli.h"
#include "zero/train/config_precedence.h"
#include "zero/train/flag_options.h"

namespace zero::cli {

int run_config(std::span<char* const> args) {
  CommandFlags flags(train::Command::kConfig);
  po::positional_options_description positional;
  positional.add("file", 1);
  flags.parse(args, &positional);
  if (flags.help()) {
    std::cout << usage(
        "config FILE",
        "Resolves a DeepSpeed config as `zero train` would: fills \"auto\" from the "
        "flags, maps deprecated keys,\napplies DeepSpeed's defaults and batch rule, "
        "and prints the result as JSON (warnings on stderr).\nA flag given must agree "
        "with a concrete value in the config; a flag not given takes Hugging Face's\n"
        "TrainingArguments default, as `zero train` does (listed on stderr; --no_defaults "
        "turns that off).\nExits 2 listing every error when the config is invalid.",
        flags.options());
    return 0;
  }
  if (!flags.given("file")) throw UsageError{"missing the config FILE"};
  stop_if_parse_only();
  const std::string& file = flags.values().config.file;
  std::vector<std::string> notes;
  try {
    const train::ResolvedConfig resolved =
        train::resolve_config_flags(flags, train::read_deepspeed_file(file), file, notes);
    for (const std::string& note : notes) std::cerr << "zero config: " << note << "\n";
    for (const std::string& warning : resolved.warnings)
      std::cerr << "zero config: warning: " << warning << "\n";
    std::cout << resolved.json << "\n";
    return 0;
  } catch (const Error& error) {
    for (const std::string& note : notes) std::cerr << "zero config: " << note << "\n";
    std::cerr << "zero config: error: " << error.what() << "\n";
    return 2;
  }
}

}  // namespace zero::cli
