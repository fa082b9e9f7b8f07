// `zero train`: Hugging Face run_clm's command line on zero::train (train/), under mpirun or alone.
#include "zero/train/train_command.h"

#include <iostream>

#include "commands.h"
#include "zero/core/launch.h"
#include "zero/train/cli.h"
#include "zero/train/flag_options.h"

namespace zero::cli {

int run_train_command(std::span<char* const> args) {
  CommandFlags flags(train::Command::kTrain);
  flags.parse(args);
  if (flags.help()) {
    if (detect_launch().rank == 0)
      std::cout << usage("train",
                         "Trains and evaluates GPT-2 as Hugging Face run_clm.py does (or, with "
                         "--task text-classification,\nrun_classification.py with "
                         "GPT2ForSequenceClassification), with the engine set up from "
                         "--deepspeed.\nRun it under mpirun for several "
                         "ranks. Writes output_dir/{config.json, model.safetensors, tokenizer "
                         "files,\ncheckpoint-N/, metrics.jsonl, trainer_state.json, "
                         "*_results.json, loss.svg}.",
                         flags.options());
    return 0;
  }
  stop_if_parse_only();
  try {
    train::train_from_flags(flags);
  } catch (const train::InputError& error) {
    // Every rank throws the same one: rank 0 says it.
    if (detect_launch().rank == 0) std::cerr << "zero train: error: " << error.what() << "\n";
    return 2;
  }
  return 0;
}

}  // namespace zero::cli
