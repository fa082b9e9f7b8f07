// Fuzzes the DeepSpeed config reader: the input is a config's JSON text, resolved as `zero train`
// resolves it, once with no trainer values and once with the values that fill "auto".
#include "fuzz_input.h"
#include "zero/config/ds_config.h"
#include "zero/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = zero::fuzz::as_text(data, size);
  zero::config::TrainerValues filled;
  filled.world_size = 2;
  filled.per_device_train_batch_size = 4;
  filled.gradient_accumulation_steps = 2;
  filled.learning_rate = 1e-4;
  filled.weight_decay = 0.01;
  filled.warmup_steps = 10;
  filled.total_steps = 100;
  filled.max_grad_norm = 1.0;
  filled.bf16 = true;
  filled.hidden_size = 768;
  for (const zero::config::TrainerValues& trainer : {zero::config::TrainerValues{}, filled}) {
    try {
      zero::config::resolve_config(text, trainer, "fuzz_ds_config.json");
    } catch (const zero::Error&) {
    }
  }
  return 0;
}
