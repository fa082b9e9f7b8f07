// Command-line plumbing shared by the `zero` subcommands and the Python module (bindings/): option
// parsing with "did you mean".
#pragma once

#include <boost/program_options.hpp>
#include <span>
#include <string>

namespace zero::cli {

namespace po = boost::program_options;

// Thrown for bad command lines; main prints it with the usage hint and exits 2.
struct UsageError {
  std::string message;
};

// Parses `args` (the words after the subcommand) against `options` (and positional names, if
// any). An option given more than once takes its last value (HF argparse). Unknown options,
// missing values and bad values become UsageError naming the option and,
// for unknown ones, the nearest known option. Returns the variables map (already notified).
po::variables_map parse(std::span<char* const> args, const po::options_description& options,
                        const po::positional_options_description* positional = nullptr);

// "Usage: zero <command> [options]\n<summary>\n\n<options>"
std::string usage(const std::string& command, const std::string& summary,
                  const po::options_description& options);

}  // namespace zero::cli
