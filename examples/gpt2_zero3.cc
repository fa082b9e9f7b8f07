// Example: zero::train from C++ — the trainer `zero train` runs, as a library. A small GPT-2 is
// trained from scratch with ZeRO-3 (configs/ds_zero3_demo.json) on text files, evaluated, saved as
// a Hugging Face checkpoint, and sampled; every rank of the launch takes part.
// Run: mpirun -np 2 ./gpt2_zero3 OUTPUT_DIR FILE[,FILE...] [MAX_STEPS]
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>

#include "zero/comm/communicator.h"
#include "zero/core/logging.h"
#include "zero/train/trainer.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: mpirun -np 2 %s OUTPUT_DIR FILE[,FILE...] [MAX_STEPS]\n", argv[0]);
    return 2;
  }
  // Hugging Face's TrainingArguments defaults, then what run_clm's flags would set.
  zero::train::TrainingArguments arguments;
  arguments.output_dir = argv[1];
  arguments.overwrite_output_dir = true;
  arguments.train_files = {argv[2]};
  arguments.max_steps = argc > 3 ? std::atoll(argv[3]) : 300;
  arguments.do_train = arguments.do_eval = true;
  arguments.config_overrides =
      "n_layer=2,n_embd=64,n_head=2,n_positions=32,resid_pdrop=0,"
      "embd_pdrop=0,attn_pdrop=0";
  arguments.tokenizer_vocab_size = 512;
  arguments.block_size = 32;
  arguments.per_device_train_batch_size = 4;
  arguments.learning_rate = 3e-3;
  arguments.warmup_steps = arguments.max_steps / 10;
  arguments.adam_beta2 = 0.95;
  arguments.logging_steps = 5;
  arguments.max_eval_samples = 128;
  arguments.save_strategy = zero::train::IntervalStrategy::kNo;
  arguments.num_samples = 1;
  arguments.sample_tokens = 16;
  arguments.deepspeed = ZERO_SOURCE_DIR "/configs/ds_zero3_demo.json";
  arguments.plot = false;

  // The library logs (the launch line, data notes) only into a sink the program sets.
  zero::set_log_sink(zero::stderr_log_sink);
  std::unique_ptr<zero::Communicator> comm = zero::make_communicator(zero::DeviceKind::kCpu);
  zero::set_log_rank(comm->rank(), comm->world_size());
  int exit_code = 0;
  try {
    const zero::train::TrainResult result = zero::train::train(arguments, *comm);
    const std::vector<zero::train::LogEntry>& history = result.log_history;
    // The loss must fall: the first logged training loss against the last.
    const double first = history.front().loss.value_or(0.0);
    const double last = history[history.size() - 2].loss.value_or(first);
    if (comm->rank() == 0)
      std::printf("%s: train loss %.4f -> %.4f, eval loss %.4f\n",
                  last < first ? "done" : "FAILED (the loss did not fall)", first, last,
                  result.eval_loss.value_or(0.0));
    exit_code = last < first ? 0 : 1;
  } catch (const zero::train::InputError& error) {
    if (comm->rank() == 0) std::fprintf(stderr, "gpt2_zero3: %s\n", error.what());
    exit_code = 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "[rank %d] gpt2_zero3: %s\n", comm->rank(), error.what());
    zero::abort_job(1);
  }
  comm.reset();
  zero::finalize_communication();
  return exit_code;
}
