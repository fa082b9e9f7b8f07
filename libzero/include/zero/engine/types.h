// The engine's types that its parts and users share without the facade (zero/engine/engine.h):
// a unit's id and initialisers, the gradient buffer the model accumulates into, a rank's shard
// of the checkpoint state, and the training progress.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "zero/core/allocator.h"
#include "zero/core/dtype.h"
#include "zero/core/flat_buffer.h"
#include "zero/core/memory_ledger.h"
#include "zero/core/partition.h"
#include "zero/engine/loss_scaler.h"

namespace zero {

using UnitId = int;

// Fills a unit's tensors with initial values: called once per tensor with its slot and its
// (num_elements) values. Must give the same values on every rank (rank 0's are broadcast).
using InitFunction = std::function<void(const TensorSlot& slot, std::span<float> values)>;
// Fills elements [range) of a unit's flat parameters (within [0, num_elements()), any range, in
// layout order) with their initial values, the same value for an element whatever range covers
// it: each rank then generates only the elements it holds (its partition at stage 3, the whole
// unit where it holds it all) and nothing is broadcast.
using RangeInitFunction = std::function<void(ElementRange range, std::span<float> values)>;

// The elements of `slot` in a unit's flat buffer `data` of T (GatheredUnit's and GradientBuffer's
// tensor_as, once the dtype is checked).
template <typename T>
std::span<T> slot_view(void* data, const TensorSlot& slot) {
  return {static_cast<T*>(data) + slot.offset_elements, slot.num_elements};
}

// The buffer a unit's backward accumulates (+=) its gradients into: zero at the start of each
// accumulation cycle (stages 0, 1) or of each micro-step (stages 2, 3). `raw` holds the layout's
// padded elements of `dtype` (Engine::grad_dtype()); `data` is the same memory typed when dtype
// is fp32 (else null). Errors name the unit by its name.
struct GradientBuffer {
  float* data = nullptr;
  const FlatLayout* layout = nullptr;
  void* raw = nullptr;
  DType dtype = DType::kFloat32;
  std::string_view unit;  // the unit's name (errors name it), valid while the engine lives
  // The gradient of the tensor `name`, typed as T (float, BFloat16 or Float16: zero/core/dtype.h;
  // Engine::grad_dtype()). Throws zero::Error naming the unit and the tensor when the unit has no
  // such tensor or its gradients are stored in another dtype.
  template <typename T>
  std::span<T> tensor_as(std::string_view name) const {
    return slot_view<T>(raw, checked_slot(name, dtype_of<T>()));
  }
  std::span<float> tensor(std::string_view name) const { return tensor_as<float>(name); }
  template <typename T>
  T* data_as() const {
    check_dtype(dtype_of<T>(), {});
    return static_cast<T*>(raw);
  }

 private:
  // The slot of `tensor`, after checking that the unit holds it and is stored in `requested`.
  const TensorSlot& checked_slot(std::string_view tensor, DType requested) const;
  void check_dtype(DType requested, std::string_view tensor) const;
};

// One contiguous piece of a unit owned by this rank, for checkpoints: its flat range within the
// unit's layout (world-independent numbering; padding excluded), the fp32 master values and
// the optimizer state slices over the same range. `space` is where the spans live: where the
// engine's context says the host cannot address it (DeviceContext::host_addressable: device
// memory of a GPU), the host reaches the values only through Engine::read_shard_values and
// write_shard_values, which stage them through bounded pinned buffers.
struct ShardState {
  std::string unit;
  ElementRange range;
  std::span<float> params;
  std::vector<std::pair<std::string, std::span<float>>> optimizer_state;
  MemorySpace space = MemorySpace::kHost;
};

struct TrainingState {
  std::int64_t global_steps = 0;     // boundaries reached (taken or skipped), as DeepSpeed
  std::int64_t skipped_steps = 0;    // boundaries skipped for fp16 overflow
  std::int64_t optimizer_steps = 0;  // steps taken (Adam's bias-correction step)
  std::int64_t scheduler_last_batch_iteration = -1;
  LossScaler::State loss_scaler;
};

}  // namespace zero
