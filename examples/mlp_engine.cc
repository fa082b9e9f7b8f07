// Example: a two-layer MLP (y = W2 tanh(W1 x + b1) + b2) trained with zero::Engine under ZeRO-3.
// Run: ./mlp_engine            (one process)    mpirun -np 2 ./mlp_engine   (two ranks)
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "zero/comm/communicator.h"
#include "zero/engine/engine.h"
#include "zero/factory/engine_factory.h"

int main() {
  constexpr int D = 8, H = 32, B = 16;  // inputs, hidden width, rows per rank
  auto comm = zero::make_communicator(zero::DeviceKind::kCpu);
  zero::EngineOptions options;
  options.stage = 3;
  options.param_persistence_threshold = 0;  // gather every unit on use, even small ones
  options.gradient_clipping = 1.0;
  options.optimizer = {
      .type = zero::config::OptimizerType::kAdamW, .lr = 1e-2, .weight_decay = 0.01};
  options.scheduler.type = zero::config::SchedulerType::kWarmupLR;
  options.scheduler.warmup_max_lr = 1e-2;
  options.scheduler.warmup_num_steps = 20;
  // AdamW and WarmupLR from the options (zero::optim); NVMe swap if asked (zero::offload).
  std::unique_ptr<zero::Engine> engine = zero::make_engine(options, *comm);
  auto init = [](const zero::TensorSlot& slot, std::span<float> values) {
    for (std::size_t i = 0; i < values.size(); ++i)  // deterministic: same on every rank
      values[i] = slot.name == "w" ? 0.3f * std::sin(1.7f * i + slot.num_elements) : 0.0f;
  };
  const zero::UnitId l1 = engine->register_unit("layer1", {{"w", {H, D}}, {"b", {H}}}, init);
  const zero::UnitId l2 = engine->register_unit("layer2", {{"w", {1, H}}, {"b", {1}}}, init);

  std::vector<float> x(B * D), t(B), a(B * H), y(B), da(B * H);
  float loss = 0, first_loss = 0;
  for (int step = 0; step < 300; ++step) {
    for (int r = 0; r < B; ++r) {  // this rank's rows: target = sum of sines of the inputs
      t[r] = 0;
      for (int d = 0; d < D; ++d) {
        x[r * D + d] = std::sin(0.1f * (step * 97 + (comm->rank() * B + r) * 13 + d * 7));
        t[r] += std::sin(3 * x[r * D + d]) / 2;
      }
    }
    {  // forward
      auto p1 = engine->gather(l1);
      for (int r = 0; r < B; ++r)
        for (int h = 0; h < H; ++h) {
          float s = p1.tensor("b")[h];
          for (int d = 0; d < D; ++d) s += p1.tensor("w")[h * D + d] * x[r * D + d];
          a[r * H + h] = std::tanh(s);
        }
    }
    auto p2 = engine->gather(l2);
    loss = 0;
    auto g2 = engine->grads(l2);
    for (int r = 0; r < B; ++r) {  // layer 2 forward, mean-squared-error loss, layer 2 backward
      float s = p2.tensor("b")[0];
      for (int h = 0; h < H; ++h) s += p2.tensor("w")[h] * a[r * H + h];
      const float dy = 2 * (s - t[r]) / B;
      loss += (s - t[r]) * (s - t[r]) / B;
      g2.tensor("b")[0] += dy;
      for (int h = 0; h < H; ++h) {
        g2.tensor("w")[h] += dy * a[r * H + h];
        da[r * H + h] = dy * p2.tensor("w")[h] * (1 - a[r * H + h] * a[r * H + h]);
      }
    }
    p2.release();
    engine->reduce_grads(l2);
    {  // layer 1 backward
      auto p1 = engine->gather(l1);
      auto g1 = engine->grads(l1);
      for (int r = 0; r < B; ++r)
        for (int h = 0; h < H; ++h) {
          g1.tensor("b")[h] += da[r * H + h];
          for (int d = 0; d < D; ++d) g1.tensor("w")[h * D + d] += da[r * H + h] * x[r * D + d];
        }
    }
    engine->reduce_grads(l1);
    engine->step();
    loss = static_cast<float>(engine->average_across_ranks(loss));
    if (step == 0) first_loss = loss;
    if (comm->rank() == 0 && step % 50 == 0) std::printf("step %3d  loss %.5f\n", step, loss);
  }
  if (comm->rank() == 0)
    std::printf("final loss %.5f\n%s", loss, engine->ledger().report("rank 0").c_str());
  const bool ok = loss < 0.1f * first_loss;
  engine.reset();  // before the communicator it uses (its last collectives may still be queued)
  comm.reset();
  zero::finalize_communication();
  return ok ? 0 : 1;
}
