// EngineModel: GPT-2 driven by zero::Engine, one rank's share: registers GPT-2's units with the
// engine and runs a training micro-step or an evaluation forward through gather / grads /
// reduce_grads, per the engine's unit contract (docs/engine.md).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "zero/core/allocator.h"
#include "zero/engine/engine.h"
#include "zero/gpt2/compute.h"
#include "zero/gpt2/config.h"
#include "zero/gpt2/hf_weights.h"
#include "zero/gpt2/units.h"

namespace zero::gpt2 {

// A gathered unit's parameters and a unit's gradient buffer as the kernels take them, in the
// engine's dtype (fp32, or bf16/fp16 in mixed precision); and the compute options with the
// engine's parameter dtype. Shared by EngineModel and EngineClassifier.
inline ConstUnitData params_of(const GatheredUnit& unit) { return {unit.raw(), unit.dtype()}; }
inline UnitData grads_of(const GradientBuffer& buffer) { return {buffer.raw, buffer.dtype}; }
inline ComputeOptions with_engine_dtype(ComputeOptions options, const Engine& engine) {
  options.param_dtype = engine.param_dtype();
  return options;
}

// Every rank constructs one with the same config and seed, at the same point relative to other
// registrations with the engine. The constructor registers gpt2_units(config) (initialised by
// init_unit_range(config, unit, seed, ...): the same values whatever the stage, world size or
// sharding), initialises the engine (Engine::initialize) and then allocates one micro-batch's
// activations and scratch, (B = rows, T = seq_len), from `activations`: pass engine.allocator()
// to count them in the engine's ledger, or an allocator over another ledger to keep them out
// (memory of the engine context's device space, or host memory where its model runs on the
// host). The kernels are the engine context's (make_kernels(engine.context())), on its compute
// stream. The engine and the allocator must outlive the model. The compute runs in the engine's
// parameter dtype (Engine::param_dtype(), whatever options.param_dtype says): fp32, or bf16/fp16
// storage under the engine's mixed precision, with gradients in Engine::grad_dtype().
class EngineModel {
 public:
  EngineModel(Engine& engine, const GPT2Config& config, std::int64_t rows, std::int64_t seq_len,
              std::uint64_t seed, Allocator& activations, ComputeOptions options = {});
  EngineModel(const EngineModel&) = delete;
  EngineModel& operator=(const EngineModel&) = delete;

  // Forward and backward of one micro-batch; returns its mean loss over counted targets.
  // tokens and targets are (B, T) as GPT2Compute::set_inputs takes them. All ranks, same order.
  // (An untied head, the Llama family's, is in the final unit: the embeddings are not gathered
  // for it and their gradient buffer is first taken by backward_embeddings.)
  // Gathers: embeddings, h.0 .. h.(L-1), then ln_f and embeddings together for the tied head
  // (forward, loss and backward under one gather), h.(L-1) .. h.0, embeddings. Reductions, each
  // queued as soon as the unit's gradient is complete: ln_f, h.(L-1) .. h.0, embeddings last
  // (wte's gradient completes only after backward_embeddings). The gradient written is
  // d(micro-batch mean loss)/dθ × engine.loss_scale(). The caller calls engine.step().
  double train_micro_step(std::span<const int> tokens, std::span<const int> targets,
                          DropoutKey dropout);

  // Forward only (no dropout, no gradients, no reductions); returns the micro-batch mean loss
  // over counted targets (0 when none count; num_counted_targets() says how many did). Gathers
  // as the training forward: embeddings, h.0 .. h.(L-1), ln_f + embeddings. All ranks.
  double eval_loss(std::span<const int> tokens, std::span<const int> targets);

  // Targets counted by the last train_micro_step or eval_loss.
  std::int64_t num_counted_targets() const { return compute_.num_counted_targets(); }

  // The engine's unit id of each of gpt2_units(config), in that order.
  const std::vector<UnitId>& units() const { return units_; }
  const std::vector<UnitSpec>& unit_specs() const { return specs_; }
  const GPT2Config& config() const { return config_; }
  Engine& engine() { return engine_; }
  GPT2Compute& compute() { return compute_; }
  const GPT2Compute& compute() const { return compute_; }

 private:
  // Registers the units and initialises the engine; returns the unit ids.
  static std::vector<UnitId> register_units(Engine& engine, const GPT2Config& config,
                                            const std::vector<UnitSpec>& specs, std::uint64_t seed);
  // Forward through the tied head's loss; the head's two units stay gathered in `norm`, `wte`.
  void forward(GatheredUnit& norm, GatheredUnit& wte);

  Engine& engine_;
  GPT2Config config_;
  std::vector<UnitSpec> specs_;
  std::vector<UnitId> units_;
  GPT2Compute compute_;
};

// Loads a Hugging Face checkpoint into this rank's shards (Engine::fill_shard_states) of GPT-2's
// units `body_units` (gpt2_units(weights.config()) order), reading from the files only each
// shard's range of each tensor: the rank's partition at stages 1-3, the whole unit at stage 0
// (where every rank holds it); then Engine::refresh_params(). `extra_units` are units whose
// tensors are stored under their own names (the classifier's score.weight): each tensor the
// checkpoint holds is loaded, the others keep their initialisation. Memory besides the shards:
// one SafetensorsReader::kStreamChunkBytes of mapped pages at a time, plus one sub-group's swap
// slot under NVMe optimizer offload. All ranks, same order (refresh_params gathers).
void load_hf_partitions(Engine& engine, std::span<const UnitId> body_units,
                        const HFWeights& weights, std::span<const UnitId> extra_units = {});

}  // namespace zero::gpt2
