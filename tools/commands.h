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

// Thrown by stop_if_parse_only: main says the command line parses and exits 0.
struct ParsedOnly {};

// Under ZERO_PARSE_ONLY=1 (scripts/check_doc_commands.py runs the docs' commands so), a command
// calls this once its words are parsed and checked (unknown flags, values, the flag table's
// refusals, missing arguments), before it reads a file, starts a communicator or writes.
void stop_if_parse_only();

}  // namespace zero::cli
