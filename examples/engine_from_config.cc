// Example: zero::Engine set up from a DeepSpeed JSON config, as `zero train --deepspeed` sets it
// up, fitting y = w·x + b. load_config_file resolves the file ("auto" filled from the values given,
// as the Hugging Face Trainer fills them; DeepSpeed's defaults and batch rule), then
// engine_options_from_config maps it onto the engine's options.
// Run: ./engine_from_config configs/ds_zero3.json      mpirun -np 2 ./engine_from_config ...
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "zero/comm/communicator.h"
#include "zero/config/ds_config.h"
#include "zero/engine/engine.h"
#include "zero/engine/from_config.h"
#include "zero/factory/engine_factory.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DEEPSPEED_CONFIG.json\n", argv[0]);
    return 2;
  }
  constexpr int D = 4, B = 8;  // inputs, rows per rank and micro-step
  auto comm = zero::make_communicator(zero::DeviceKind::kCpu);
  // What the config's "auto" values become (--per_device_train_batch_size, --learning_rate, ...
  // in `zero train`); hidden_size fills the bucket sizes and stage 3's persistence threshold;
  // fp32, since this model reads its units as fp32.
  const zero::config::TrainerValues trainer{.world_size = comm->world_size(),
                                            .per_device_train_batch_size = B,
                                            .gradient_accumulation_steps = 1,
                                            .learning_rate = 0.05,
                                            .adam_beta1 = 0.9,
                                            .adam_beta2 = 0.999,
                                            .adam_epsilon = 1e-8,
                                            .weight_decay = 0.0,
                                            .warmup_steps = 10,
                                            .total_steps = 200,
                                            .max_grad_norm = 1.0,
                                            .fp16 = false,
                                            .bf16 = false,
                                            .hidden_size = D};
  // Both throw zero::Error naming the JSON path of every bad or unfilled setting.
  const zero::config::ConfigResult config = zero::config::load_config_file(argv[1], trainer);
  const zero::EngineOptionsResult options = zero::engine_options_from_config(config.config);
  for (const std::string& warning : config.warnings) std::printf("config: %s\n", warning.c_str());
  for (const std::string& warning : options.warnings) std::printf("engine: %s\n", warning.c_str());
  std::unique_ptr<zero::Engine> engine = zero::make_engine(options.options, *comm);
  const zero::UnitId linear =
      engine->register_unit("linear", {{"w", {D}}, {"b", {1}}}, std::vector<float>(D + 1, 0.0f));

  const int accumulation = options.options.gradient_accumulation_steps;
  float first_loss = 0, loss = 0;
  for (int micro_step = 0; micro_step < 200 * accumulation; ++micro_step) {
    auto p = engine->gather(linear);
    auto g = engine->grads(linear);
    float sum = 0;
    for (int r = 0; r < B; ++r) {  // this rank's rows; the target is 1.5 x0 - 2 x1 + 0.5
      float x[D], y = p.tensor("b")[0];
      for (int d = 0; d < D; ++d) {
        x[d] = std::sin(0.37f * (micro_step * 31 + (comm->rank() * B + r) * 7 + d * 3));
        y += p.tensor("w")[d] * x[d];
      }
      const float error = y - (1.5f * x[0] - 2 * x[1] + 0.5f);
      sum += error * error / B;
      for (int d = 0; d < D; ++d) g.tensor("w")[d] += 2 * error * x[d] / (B * accumulation);
      g.tensor("b")[0] += 2 * error / (B * accumulation);
    }
    p.release();
    engine->reduce_grads(linear);
    if (!engine->step()) continue;  // not at the accumulation boundary yet
    loss = static_cast<float>(engine->average_across_ranks(sum));
    if (first_loss == 0) first_loss = loss;
  }
  const int rank = comm->rank();
  engine.reset();  // before the communicator it uses
  comm.reset();
  zero::finalize_communication();
  const bool ok = loss < 0.01f * first_loss;
  if (rank == 0)
    std::printf("%s: ZeRO stage %d, %s, loss %.3g -> %.3g%s\n", argv[1], options.options.stage,
                std::string(zero::config::name_of(options.options.optimizer.type)).c_str(),
                first_loss, loss, ok ? "" : ": did not fall a hundredfold");
  return ok ? 0 : 1;
}
