// What the training loop carries from step to step besides the engine (internal to zero::train):
// a Task adds its counts to it, and every checkpoint saves it (checkpointing.h).
#pragma once

#include <cstdint>

namespace zero::train::detail {

// What the loop carries from step to step besides the engine: saved with every checkpoint.
struct TrainerProgress {
  std::int64_t step = 0;               // optimizer steps done (global_step)
  std::uint64_t sampler_position = 0;  // micro-batches of B × W the sampler has handed out
  std::uint64_t stream_position = 0;   // --streaming: the stream's global batches read
  double train_loss_sum = 0.0;         // Σ of the step losses (train_loss = mean)
  double window_loss = 0.0;            // since the last log line
  std::int64_t window_steps = 0;
  double epoch_loss = 0.0, epoch_correct = 0.0, epoch_counted = 0.0;  // text-classification
  std::int64_t epoch_steps = 0;
  // --include_num_input_tokens_seen: every rank's tokens so far (the checkpoint's Hugging Face
  // trainer_state.json's num_input_tokens_seen, read back from there on resume; 0 without the
  // flag).
  std::int64_t input_tokens_seen = 0;
};

}  // namespace zero::train::detail
