// zero::train: Hugging Face run_clm's training and evaluation of GPT-2 on zero's engine, shared by
// `zero train`, the demo and C++ callers. One call runs what the arguments ask for on every rank
// of `communicator`: tokenizer, data, engine from the DeepSpeed config, training with logging,
// evaluation and checkpoints, the final Hugging Face checkpoint and the result files.
#pragma once

#include "zero/comm/communicator.h"
#include "zero/train/arguments.h"
#include "zero/train/hf_schedule.h"
#include "zero/train/run_config.h"
#include "zero/train/run_types.h"

namespace zero::train {

// Runs on every rank of `communicator` (all ranks, same arguments), on the rank's device context
// (options.make_device_context). Every collective of the run, the trainer's host values included,
// takes buffers of that context's device allocator, so `communicator.buffers()` must be the
// device's kind; none is still queued when it returns. Throws InputError for bad input (before
// output_dir is touched) and zero::Error for failures while running. While it runs, SIGTERM and
// SIGUSR1 (and SIGINT with options.stop_on_interrupt) make every rank finish the step, save a
// checkpoint and return with `preempted` set; a second signal exits the process at once with
// 128 + the signal (the previous handlers are back when it returns).
// `run` resolved for communicator.world_size() ranks (for --dry_run, any world size).
TrainResult train(const RunConfig& run, Communicator& communicator, const RunOptions& options = {});
// train(make_run_config(arguments, W), ...): W is --world_size for --dry_run when given, else the
// communicator's; make_run_config's InputErrors (the DeepSpeed config's among them) come before
// any data is read.
TrainResult train(const TrainingArguments& arguments, Communicator& communicator,
                  const RunOptions& options = {});

}  // namespace zero::train
