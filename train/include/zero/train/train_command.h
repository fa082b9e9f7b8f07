// `zero train` as a library call: the flags parsed from `zero train`'s command line (or from the
// Python module's arguments, `zero.train`, bindings/) run on every rank of the launch, as the CLI
// runs them: Hugging Face's process flags applied to the environment, Hub ids resolved from the
// local cache, a host-buffer communicator for the launch (one rank alone; every rank under mpirun,
// srun or torchrun), the config precedence rule, then train().
#pragma once

#include "zero/train/flag_options.h"
#include "zero/train/trainer.h"

namespace zero::train {

// All ranks, same flags. Throws InputError for bad input (every rank the same one, before
// output_dir is touched) and zero::Error for failures while running; with --dry_run the plans
// come back in TrainResult::plan. The caller finalizes communication (finalize_communication)
// once, before the process exits.
TrainResult train_from_flags(cli::CommandFlags& flags, const RunOptions& options = {});

}  // namespace zero::train
