// The `zero` command: one binary, one table of subcommands.
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "commands.h"
#include "zero/comm/communicator.h"
#include "zero/core/error.h"
#include "zero/core/launch.h"
#include "zero/core/logging.h"
#include "zero/core/suggest.h"
#include "zero/train/cli.h"
#include "zero/version.h"

namespace {

struct Command {
  std::string_view name;
  std::string_view summary;
  int (*run)(std::span<char* const> args);
};

constexpr Command kCommands[] = {
    {"env", "print the launch environment, build features and devices", zero::cli::run_env},
    {"config", "resolve a DeepSpeed JSON config and print it with every default",
     zero::cli::run_config},
    {"tokenizer", "train a BPE tokenizer, encode text, decode ids", zero::cli::run_tokenizer},
    {"generate", "continue a prompt with a GPT-2 checkpoint (token ids, CPU)",
     zero::cli::run_generate},
    {"train", "train and evaluate GPT-2 as Hugging Face run_clm (DeepSpeed config, mpirun)",
     zero::cli::run_train_command},
    {"checkpoint", "describe and validate a resumable checkpoint, or consolidate it to HF",
     zero::cli::run_checkpoint},
    {"estimate", "will it fit? the run's memory plan per GPU and node, ranked configurations",
     zero::cli::run_estimate},
    {"flags", "every flag of train/estimate/config as Markdown (docs/flags.md)",
     zero::cli::run_flags},
};

void print_help() {
  std::cout << "zero " << zero::kVersion
            << ": ZeRO-sharded training of large language models\n\n"
               "Usage: zero <command> [options]      (zero <command> --help for its options)\n\n"
               "Commands:\n";
  for (const Command& command : kCommands)
    std::cout << "  " << command.name << std::string(12 - command.name.size(), ' ')
              << command.summary << "\n";
  std::cout << "\nOptions:\n  -h, --help     print this help\n  --version      print the version\n";
}

}  // namespace

void zero::cli::stop_if_parse_only() {
  const char* value = std::getenv("ZERO_PARSE_ONLY");
  if (value != nullptr && std::string_view(value) == "1") throw ParsedOnly{};
}

int main(int argc, char** argv) {
  zero::set_log_sink(zero::stderr_log_sink);  // the library is quiet until its host sets a sink
  // `python -m torch.distributed.launch --no-python zero train ...` runs
  // `zero --local-rank=N train ...` (torch < 2: --local_rank=N): the launcher's flag goes to the
  // command, as the first of its own.
  if (argc >= 3 && (std::string_view(argv[1]).starts_with("--local-rank=") ||
                    std::string_view(argv[1]).starts_with("--local_rank=")))
    std::swap(argv[1], argv[2]);
  if (argc < 2) {
    print_help();
    return 2;
  }
  const std::string_view word = argv[1];
  if (word == "--help" || word == "-h" || word == "help") {
    print_help();
    return 0;
  }
  if (word == "--version" || word == "version") {
    std::cout << "zero " << zero::kVersion << "\n";
    return 0;
  }
  const Command* command = nullptr;
  for (const Command& candidate : kCommands)
    if (candidate.name == word) command = &candidate;
  if (command == nullptr) {
    std::vector<std::string_view> names;
    for (const Command& candidate : kCommands) names.push_back(candidate.name);
    std::cerr << "zero: unknown " << (word.starts_with("-") ? "option" : "command") << " '" << word
              << "'";
    if (auto nearest = zero::nearest_name(word, names))
      std::cerr << "; did you mean '" << *nearest << "'?";
    std::cerr << "\nRun 'zero --help' for the list of commands.\n";
    return 2;
  }
  const int rank = zero::detect_launch().rank;
  try {
    const int code = command->run(std::span<char* const>(argv + 2, argv + argc));
    zero::finalize_communication();
    return code;
  } catch (const zero::cli::ParsedOnly&) {
    std::cout << "zero " << command->name << ": the command line parses (ZERO_PARSE_ONLY=1)\n";
    return 0;
  } catch (const zero::cli::UsageError& error) {
    std::cerr << "zero " << command->name << ": " << error.message << "\nRun 'zero "
              << command->name << " --help' for its options.\n";
    return 2;
  } catch (const std::exception& error) {
    std::cerr << "[rank " << rank << "] zero " << command->name << ": error: " << error.what()
              << std::endl;
    zero::abort_job(1);
  }
}
