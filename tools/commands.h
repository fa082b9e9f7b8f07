// The `zero` subcommands. Each takes the words after its name and returns the exit code; each
// prints its own --help. The dispatch table in main.cc is the one list of them.
#pragma once

#include <span>

namespace zero::cli {

int run_env(std::span<char* const> args);
int run_config(std::span<char* const> args);
int run_tokenizer(std::span<char* const> args);
int run_generate(std::span<char* const> args);
int run_train_command(std::span<char* const> args);
int run_checkpoint(std::span<char* const> args);
int run_estimate(std::span<char* const> args);
int run_flags(std::span<char* const> args);

}  // namespace zero::cli
