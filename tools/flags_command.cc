// `zero flags`: the flag table as Markdown (docs/flags.md is this command's output).
#include <iostream>

#include "commands.h"
#include "zero/train/cli.h"
#include "zero/train/flags.h"

namespace zero::cli {

int run_flags(std::span<char* const> args) {
  po::options_description options("Options");
  options.add_options()("help,h", "print this help");
  const po::variables_map variables = parse(args, options);
  if (variables.count("help")) {
    std::cout << usage("flags",
                       "Prints every flag of `zero train`, `zero estimate` and `zero config` as "
                       "Markdown: type,\nzero's and Hugging Face's defaults, what zero does with "
                       "it (docs/flags.md is this output).",
                       options);
    return 0;
  }
  stop_if_parse_only();
  std::cout << train::flags_markdown();
  return 0;
}

}  // namespace zero::cli
