// A small multi-unit model for engine tests (not GPT-2): an input layer, residual blocks of
// linear + tanh + linear with a gain vector, and a linear head under a mean-squared-error loss.
// Forward and backward run in double and write float gradients, one unit at a time, through the
// engine's gather / grads / reduce_grads protocol.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ledger_checks.h"
#include "zero/core/error.h"
#include "zero/engine/engine.h"
#include "zero/factory/engine_factory.h"

namespace zero::testing {

struct StackShape {
  int inputs = 12;  // D
  int hidden = 24;  // H
  int outputs = 5;  // O
  int blocks = 3;   // K
};

// Deterministic value in [-1, 1) from a key (splitmix64).
inline double hashed_uniform(std::uint64_t key) {
  key += 0x9e3779b97f4a7c15ULL;
  key = (key ^ (key >> 30)) * 0xbf58476d1ce4e5b9ULL;
  key = (key ^ (key >> 27)) * 0x94d049bb133111ebULL;
  key ^= key >> 31;
  return static_cast<double>(key >> 11) / static_cast<double>(1ULL << 52) - 1.0;
}

// Rows of inputs and targets.
struct Batch {
  int rows = 0;
  std::vector<double> inputs;   // (rows, D)
  std::vector<double> targets;  // (rows, O)
};

// Rows [first, first + rows) of step `step`'s global batch; targets are a fixed smooth function.
inline Batch make_batch(const StackShape& shape, int step, int first, int rows) {
  Batch batch;
  batch.rows = rows;
  for (int r = 0; r < rows; ++r) {
    const std::uint64_t row = static_cast<std::uint64_t>(step) * 100003ULL + first + r;
    double sum = 0.0;
    for (int d = 0; d < shape.inputs; ++d) {
      const double x = hashed_uniform(row * 131 + d);
      batch.inputs.push_back(x);
      sum += x * (d % 3 - 1);
    }
    for (int o = 0; o < shape.outputs; ++o) batch.targets.push_back(std::sin(sum + o) * 0.5);
  }
  return batch;
}

class TinyStack {
 public:
  explicit TinyStack(StackShape shape = {}) : shape_(shape) {}

  // Registers "embed", "block.0".."block.K-1", "head" in that order.
  void register_units(Engine& engine) {
    const std::int64_t D = shape_.inputs, H = shape_.hidden, O = shape_.outputs;
    auto init = [](std::uint64_t seed, double scale, double offset) {
      return [seed, scale, offset](const TensorSlot& slot, std::span<float> values) {
        std::uint64_t tensor = 0;
        for (char c : slot.name) tensor = tensor * 131 + static_cast<unsigned char>(c);
        for (std::size_t i = 0; i < values.size(); ++i)
          values[i] = static_cast<float>(
              offset + scale * hashed_uniform(seed * 1000003 + tensor * 7919 + i));
      };
    };
    units_.push_back(engine.register_unit("embed", {{"weight", {H, D}}, {"bias", {H}}},
                                          init(1, 1.0 / std::sqrt(double(D)), 0.0)));
    for (int k = 0; k < shape_.blocks; ++k) {
      units_.push_back(engine.register_unit(
          "block." + std::to_string(k), {{"w1", {H, H}}, {"b1", {H}}, {"w2", {H, H}}, {"b2", {H}}},
          init(10 + k, 1.0 / std::sqrt(double(H)), 0.0)));
    }
    units_.push_back(engine.register_unit("head", {{"weight", {O, H}}, {"bias", {O}}},
                                          init(99, 1.0 / std::sqrt(double(H)), 0.0)));
  }
  const std::vector<UnitId>& units() const { return units_; }

  // Forward and backward of one micro-batch; returns its mean loss (the caller steps).
  double micro_step(Engine& engine, const Batch& batch) {
    const int B = batch.rows, D = shape_.inputs, H = shape_.hidden, O = shape_.outputs;
    const int K = shape_.blocks;
    // Activations: h[0] after embed, h[k+1] after block k; a[k] = tanh(W1 h[k] + b1).
    std::vector<std::vector<double>> h(K + 1, std::vector<double>(B * H));
    std::vector<std::vector<double>> a(K, std::vector<double>(B * H));
    std::vector<double> y(B * O);
    {
      GatheredUnit p = engine.gather(units_[0]);
      auto w = p.tensor("weight");
      auto b = p.tensor("bias");
      for (int r = 0; r < B; ++r)
        for (int j = 0; j < H; ++j) {
          double s = b[j];
          for (int d = 0; d < D; ++d) s += w[j * D + d] * batch.inputs[r * D + d];
          h[0][r * H + j] = std::tanh(s);
        }
    }
    for (int k = 0; k < K; ++k) {
      GatheredUnit p = engine.gather(units_[1 + k]);
      auto w1 = p.tensor("w1"), b1 = p.tensor("b1"), w2 = p.tensor("w2"), b2 = p.tensor("b2");
      for (int r = 0; r < B; ++r) {
        for (int j = 0; j < H; ++j) {
          double s = b1[j];
          for (int i = 0; i < H; ++i) s += w1[j * H + i] * h[k][r * H + i];
          a[k][r * H + j] = std::tanh(s);
        }
        for (int j = 0; j < H; ++j) {
          double s = b2[j];
          for (int i = 0; i < H; ++i) s += w2[j * H + i] * a[k][r * H + i];
          h[k + 1][r * H + j] = h[k][r * H + j] + s;
        }
      }
    }
    double loss = 0.0;
    std::vector<double> dy(B * O);
    {
      GatheredUnit p = engine.gather(units_[K + 1]);
      auto w = p.tensor("weight"), b = p.tensor("bias");
      for (int r = 0; r < B; ++r)
        for (int o = 0; o < O; ++o) {
          double s = b[o];
          for (int j = 0; j < H; ++j) s += w[o * H + j] * h[K][r * H + j];
          y[r * O + o] = s;
          const double diff = s - batch.targets[r * O + o];
          loss += diff * diff;
          dy[r * O + o] = 2.0 * diff / (B * O) * engine.loss_scale();
        }
      loss /= B * O;
      // Backward of the head (still gathered).
      GradientBuffer g = engine.grads(units_[K + 1]);
      auto gw = g.tensor("weight"), gb = g.tensor("bias");
      std::vector<double> dh(B * H, 0.0);
      for (int o = 0; o < O; ++o) {
        double sb = 0.0;
        for (int r = 0; r < B; ++r) sb += dy[r * O + o];
        gb[o] += static_cast<float>(sb);
        for (int j = 0; j < H; ++j) {
          double sw = 0.0;
          for (int r = 0; r < B; ++r) sw += dy[r * O + o] * h[K][r * H + j];
          gw[o * H + j] += static_cast<float>(sw);
        }
      }
      for (int r = 0; r < B; ++r)
        for (int j = 0; j < H; ++j) {
          double s = 0.0;
          for (int o = 0; o < O; ++o) s += dy[r * O + o] * w[o * H + j];
          dh[r * H + j] = s;
        }
      dh_ = std::move(dh);
      p.release();
      engine.reduce_grads(units_[K + 1]);
    }
    for (int k = K - 1; k >= 0; --k) backward_block(engine, k, B, h[k], a[k]);
    {
      GatheredUnit p = engine.gather(units_[0]);
      GradientBuffer g = engine.grads(units_[0]);
      auto gw = g.tensor("weight"), gb = g.tensor("bias");
      for (int j = 0; j < H; ++j) {
        double sb = 0.0;
        std::vector<double> dz(B);
        for (int r = 0; r < B; ++r) {
          const double act = h[0][r * H + j];
          dz[r] = dh_[r * H + j] * (1.0 - act * act);
          sb += dz[r];
        }
        gb[j] += static_cast<float>(sb);
        for (int d = 0; d < D; ++d) {
          double sw = 0.0;
          for (int r = 0; r < B; ++r) sw += dz[r] * batch.inputs[r * D + d];
          gw[j * D + d] += static_cast<float>(sw);
        }
      }
      p.release();
      engine.reduce_grads(units_[0]);
    }
    return loss;
  }

  // Backward of residual block k: h[k+1] = h[k] + W2 a + b2, a = tanh(W1 h[k] + b1); dh_ holds
  // d h[k+1] on entry and d h[k] on return; the block's gradients are reduced.
  void backward_block(Engine& engine, int k, int B, const std::vector<double>& h_k,
                      const std::vector<double>& a_k) {
    const int H = shape_.hidden;
    GatheredUnit p = engine.gather(units_[1 + k]);
    auto w1 = p.tensor("w1"), w2 = p.tensor("w2");
    GradientBuffer g = engine.grads(units_[1 + k]);
    auto gw1 = g.tensor("w1"), gb1 = g.tensor("b1"), gw2 = g.tensor("w2"), gb2 = g.tensor("b2");
    // h[k+1] = h_k + W2 a + b2, a = tanh(W1 h_k + b1).
    std::vector<double> da(B * H, 0.0), dz(B * H), dh_in(dh_);
    for (int j = 0; j < H; ++j) {
      double sb = 0.0;
      for (int r = 0; r < B; ++r) sb += dh_[r * H + j];
      gb2[j] += static_cast<float>(sb);
      for (int i = 0; i < H; ++i) {
        double sw = 0.0;
        for (int r = 0; r < B; ++r) sw += dh_[r * H + j] * a_k[r * H + i];
        gw2[j * H + i] += static_cast<float>(sw);
      }
    }
    for (int r = 0; r < B; ++r)
      for (int i = 0; i < H; ++i) {
        double s = 0.0;
        for (int j = 0; j < H; ++j) s += dh_[r * H + j] * w2[j * H + i];
        const double act = a_k[r * H + i];
        dz[r * H + i] = s * (1.0 - act * act);
      }
    for (int j = 0; j < H; ++j) {
      double sb = 0.0;
      for (int r = 0; r < B; ++r) sb += dz[r * H + j];
      gb1[j] += static_cast<float>(sb);
      for (int i = 0; i < H; ++i) {
        double sw = 0.0;
        for (int r = 0; r < B; ++r) sw += dz[r * H + j] * h_k[r * H + i];
        gw1[j * H + i] += static_cast<float>(sw);
      }
    }
    for (int r = 0; r < B; ++r)
      for (int i = 0; i < H; ++i) {
        double s = 0.0;
        for (int j = 0; j < H; ++j) s += dz[r * H + j] * w1[j * H + i];
        dh_in[r * H + i] += s;
      }
    dh_ = std::move(dh_in);
    p.release();
    engine.reduce_grads(units_[1 + k]);
  }

 private:
  StackShape shape_;
  std::vector<UnitId> units_;
  std::vector<double> dh_;
};

// The optimizer and schedule of every parity run: AdamW (lr 1e-2, weight decay 0.01) and a linear
// WarmupDecayLR over 20 steps (5 warm-up steps from 1e-3).
inline void set_parity_training(EngineOptions& options) {
  options.optimizer.type = config::OptimizerType::kAdamW;
  options.optimizer.lr = 1e-2;
  options.optimizer.weight_decay = 0.01;
  options.scheduler.type = config::SchedulerType::kWarmupDecayLR;
  options.scheduler.warmup_min_lr = 1e-3;
  options.scheduler.warmup_max_lr = 1e-2;
  options.scheduler.warmup_num_steps = 5;
  options.scheduler.warmup_type = config::WarmupType::kLinear;
  options.scheduler.total_num_steps = 20;
}

// The parity configuration: AdamW + WarmupDecayLR + clipping, small buckets so units split
// across buckets, a persistent head at stage 3 and a bounded prefetch.
inline EngineOptions parity_options(int stage, int accumulation) {
  EngineOptions options;
  options.stage = stage;
  options.gradient_accumulation_steps = accumulation;
  options.reduce_bucket_size = 300;
  options.allgather_bucket_size = 300;
  options.prefetch_bucket_size = 1300;
  options.max_live_parameters = 2500;
  options.param_persistence_threshold = 130;  // the head (125 elements) stays gathered
  options.gradient_clipping = 0.5;
  set_parity_training(options);
  return options;
}

struct TrainResult {
  std::vector<double> losses;              // global mean loss per step
  std::vector<std::vector<float>> params;  // final full parameters per unit
  std::vector<double> grad_norms;
};

// The training loop of every engine parity test: `steps` optimizer steps of
// gradient_accumulation_steps micro-steps each; rank r's micro-step m takes global samples
// [(m·W + r)·rows, (m·W + r + 1)·rows). `micro_step(step, first_sample)` runs one and returns its
// loss. Every rank returns the same result: losses averaged over ranks and micro-steps, global
// gradient norms, and the final parameters.
template <typename MicroStep>
TrainResult train_steps(Communicator& comm, Engine& engine, int steps, int rows,
                        MicroStep micro_step) {
  const int accumulation = engine.options().gradient_accumulation_steps;
  TrainResult result;
  for (int step = 0; step < steps; ++step) {
    double loss = 0.0;
    for (int micro = 0; micro < accumulation; ++micro) {
      loss += micro_step(step, (micro * comm.world_size() + comm.rank()) * rows);
      engine.step();
    }
    result.losses.push_back(engine.average_across_ranks(loss / accumulation));
    result.grad_norms.push_back(engine.global_grad_norm());
  }
  result.params = gathered_parameters(engine);
  return result;
}

// Trains `steps` optimizer steps on a global batch of `global_batch` rows split over ranks and
// micro-steps; every rank returns the same result.
inline TrainResult train_stack(Communicator& comm, const EngineOptions& options, int steps,
                               int global_batch, StackShape shape = {}) {
  std::unique_ptr<Engine> engine = make_engine(options, comm);
  TinyStack model(shape);
  model.register_units(*engine);
  const int rows = global_batch / (comm.world_size() * options.gradient_accumulation_steps);
  return train_steps(comm, *engine, steps, rows, [&](int step, int first) {
    return model.micro_step(*engine, make_batch(shape, step, first, rows));
  });
}

}  // namespace zero::testing
