// Example: a two-layer MLP (y = W2 tanh(W1 x + b1) + b2) trained with zero::Engine under ZeRO-3,
// in fp32 or, with --bf16, with bf16 units (an fp32 master and AdamW's state in the shards).
// Run: ./mlp_engine [--bf16]   (one process)    mpirun -np 2 ./mlp_engine   (two ranks)
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "zero/comm/communicator.h"
#include "zero/engine/engine.h"
#include "zero/factory/engine_factory.h"

constexpr int D = 8, H = 32, B = 16;  // inputs, hidden width, rows per rank

// One element of a unit's tensor read, or accumulated into, in its stored dtype.
float get(float value) { return value; }
float get(zero::BFloat16 value) { return zero::to_float(value); }
void add(float& to, float value) { to += value; }
void add(zero::BFloat16& to, float value) { to = zero::to_bf16(zero::to_float(to) + value); }

// One micro-step on this rank's rows x (B, D) and targets t (B): P is the units' dtype
// (Engine::param_dtype()), G their gradients' (Engine::grad_dtype()). Returns the loss.
template <typename P, typename G>
float micro_step(zero::Engine& engine, zero::UnitId l1, zero::UnitId l2, const float* x,
                 const float* t) {
  std::vector<float> a(B * H), da(B * H);
  {  // layer 1 forward
    auto p1 = engine.gather(l1);
    auto w1 = p1.tensor_as<P>("w"), b1 = p1.tensor_as<P>("b");
    for (int r = 0; r < B; ++r)
      for (int h = 0; h < H; ++h) {
        float s = get(b1[h]);
        for (int d = 0; d < D; ++d) s += get(w1[h * D + d]) * x[r * D + d];
        a[r * H + h] = std::tanh(s);
      }
  }
  auto p2 = engine.gather(l2);
  auto w2 = p2.tensor_as<P>("w"), b2 = p2.tensor_as<P>("b");
  auto g2 = engine.grads(l2);
  auto gw2 = g2.tensor_as<G>("w"), gb2 = g2.tensor_as<G>("b");
  float loss = 0;
  for (int r = 0; r < B; ++r) {  // layer 2 forward, mean-squared-error loss, layer 2 backward
    float s = get(b2[0]);
    for (int h = 0; h < H; ++h) s += get(w2[h]) * a[r * H + h];
    const float dy = 2 * (s - t[r]) / B;
    loss += (s - t[r]) * (s - t[r]) / B;
    add(gb2[0], dy);
    for (int h = 0; h < H; ++h) {
      add(gw2[h], dy * a[r * H + h]);
      da[r * H + h] = dy * get(w2[h]) * (1 - a[r * H + h] * a[r * H + h]);
    }
  }
  p2.release();
  engine.reduce_grads(l2);
  {  // layer 1 backward
    auto p1 = engine.gather(l1);
    auto g1 = engine.grads(l1);
    auto gw1 = g1.tensor_as<G>("w"), gb1 = g1.tensor_as<G>("b");
    for (int r = 0; r < B; ++r)
      for (int h = 0; h < H; ++h) {
        add(gb1[h], da[r * H + h]);
        for (int d = 0; d < D; ++d) add(gw1[h * D + d], da[r * H + h] * x[r * D + d]);
      }
  }
  engine.reduce_grads(l1);
  return loss;
}

int main(int argc, char** argv) {
  const bool bf16 = argc > 1 && std::strcmp(argv[1], "--bf16") == 0;
  auto comm = zero::make_communicator(zero::DeviceKind::kCpu);
  zero::EngineOptions options;
  options.stage = 3;
  options.param_persistence_threshold = 0;  // gather every unit on use, even small ones
  options.bf16.enabled = bf16;              // bf16 units; their gradients too at stage 3
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
  const bool bf16_grads = engine->grad_dtype() == zero::DType::kBFloat16;

  std::vector<float> x(B * D), t(B);
  float loss = 0, first_loss = 0;
  for (int step = 0; step < 300; ++step) {
    for (int r = 0; r < B; ++r) {  // this rank's rows: target = sum of sines of the inputs
      t[r] = 0;
      for (int d = 0; d < D; ++d) {
        x[r * D + d] = std::sin(0.1f * (step * 97 + (comm->rank() * B + r) * 13 + d * 7));
        t[r] += std::sin(3 * x[r * D + d]) / 2;
      }
    }
    loss = !bf16 ? micro_step<float, float>(*engine, l1, l2, x.data(), t.data())
           : bf16_grads
               ? micro_step<zero::BFloat16, zero::BFloat16>(*engine, l1, l2, x.data(), t.data())
               : micro_step<zero::BFloat16, float>(*engine, l1, l2, x.data(), t.data());
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
