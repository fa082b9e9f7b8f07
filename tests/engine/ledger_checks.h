// Engine test helpers shared by the MLP-stack and GPT-2 tests: the ledger checked against the
// ZeRO memory formula, and every unit's gathered parameters.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "zero/core/partition.h"
#include "zero/engine/engine.h"
#include "zero/engine/memory_formula.h"

namespace zero::testing {

// The engine's ledger bytes after a step (device space, the engine's dtypes, Adam's two moments).
struct MeasuredModelStates {
  ModelStateBytes model;               // params exclude the persistent units
  std::int64_t persistent_params = 0;  // stage 3: units below the persistence threshold
  std::int64_t comm_buffers = 0;
  std::int64_t params_peak = 0;
};

inline std::vector<std::size_t> unit_sizes(const Engine& engine) {
  std::vector<std::size_t> sizes;
  for (std::size_t u = 0; u < engine.num_units(); ++u)
    sizes.push_back(engine.layout(static_cast<UnitId>(u)).num_elements());
  return sizes;
}

// EXPECTs every model-state category of `engine`'s ledger to equal model_state_bytes() (plus,
// at stage 3, the units kept gathered under the persistence threshold) and the communication
// buffers to equal the bucket and staging sizes; returns what it measured. Every rank may call it.
inline MeasuredModelStates check_ledger_against_formula(Engine& engine) {
  const EngineOptions& options = engine.options();
  const int world = engine.world_size();
  MemoryLedger& ledger = engine.ledger();
  auto current = [&](MemoryCategory category) {
    return ledger.entry(MemorySpace::kDevice, category).current_bytes;
  };
  const std::vector<std::size_t> sizes = unit_sizes(engine);
  const StatePolicy policy = state_policy(options);
  const ModelStateBytes formula =
      model_state_bytes(options.stage, sizes, world, options.alignment_elements, policy.compute, 2,
                        policy.accumulate);
  const auto compute_bytes = static_cast<std::int64_t>(size_of(policy.compute));
  MeasuredModelStates measured;
  if (options.stage == 3)
    for (std::size_t count : sizes)
      if (count < static_cast<std::size_t>(options.param_persistence_threshold))
        measured.persistent_params +=
            compute_bytes * static_cast<std::int64_t>(
                                padded_num_elements(count, world, options.alignment_elements));
  measured.model.params = current(MemoryCategory::kParams) - measured.persistent_params;
  measured.model.param_shard = current(MemoryCategory::kParamShard);
  measured.model.grads = current(MemoryCategory::kGrads);
  measured.model.grad_shard = current(MemoryCategory::kGradShard);
  measured.model.master_params = current(MemoryCategory::kMasterParams);
  measured.model.optimizer_state = current(MemoryCategory::kOptimizerState);
  measured.comm_buffers = current(MemoryCategory::kCommBuffers);
  measured.params_peak = ledger.entry(MemorySpace::kDevice, MemoryCategory::kParams).peak_bytes;

  EXPECT_EQ(measured.model.params, formula.params);
  EXPECT_EQ(measured.model.param_shard, formula.param_shard);
  EXPECT_EQ(measured.model.grads, formula.grads);
  EXPECT_EQ(measured.model.grad_shard, formula.grad_shard);
  EXPECT_EQ(measured.model.master_params, formula.master_params);
  EXPECT_EQ(measured.model.optimizer_state, formula.optimizer_state);
  EXPECT_EQ(measured.comm_buffers,
            reduce_bucket_elements(options, sizes, world).bytes() +
                compute_bytes *
                    static_cast<std::int64_t>(allgather_staging_elements(options, sizes, world)));
  return measured;
}

// Every unit's full parameters (unpadded, as fp32 whatever the engine stores), gathered: all
// ranks must call it.
inline std::vector<std::vector<float>> gathered_parameters(Engine& engine) {
  std::vector<std::vector<float>> values;
  for (std::size_t u = 0; u < engine.num_units(); ++u) {
    GatheredUnit p = engine.gather(static_cast<UnitId>(u));
    std::vector<float> unit(p.layout().num_elements());
    convert(p.raw(), p.dtype(), unit.data(), DType::kFloat32, unit.size());
    values.push_back(std::move(unit));
  }
  return values;
}

}  // namespace zero::testing
