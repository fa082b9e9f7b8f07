// zero::Engine: the ZeRO engine (stages 0-3) that a model drives unit by unit.
//
// A model declares its parameters as units (named groups of tensors gathered together). Per
// micro-step, every rank calls, in the same order:
//   forward:  for u in order:    auto p = engine.gather(u); <forward of u with p>; p.release();
//   backward: for u in reverse:  auto p = engine.gather(u); <backward of u, += into
//                                engine.grads(u)>; p.release(); engine.reduce_grads(u);
//   then engine.step()  (a no-op returning false until gradient_accumulation_steps micro-steps
//                        have completed; DeepSpeed's engine.step() contract)
// The model's backward writes d(micro-batch mean loss)/dθ × loss_scale(); the engine averages
// over ranks and micro-steps. Stages follow docs/engine.md and DeepSpeed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "zero/comm/communicator.h"
#include "zero/core/allocator.h"
#include "zero/core/device_context.h"
#include "zero/core/dtype.h"
#include "zero/core/flat_buffer.h"
#include "zero/core/memory_ledger.h"
#include "zero/core/swap_store.h"
#include "zero/engine/loss_scaler.h"
#include "zero/engine/optimizer.h"
#include "zero/engine/options.h"
#include "zero/engine/types.h"

namespace zero {

class Engine;

// The full parameters of a gathered unit, valid until release() or destruction (RAII). They are
// in the engine's parameter dtype (Engine::param_dtype(): fp32, or bf16/fp16 in mixed precision)
// in the device space of the engine's context. Errors name the unit by its name ("unit 'fc1'").
class GatheredUnit {
 public:
  GatheredUnit() = default;
  // `name`: the unit's name, owned by the engine (valid while it lives).
  GatheredUnit(Engine* engine, UnitId unit, std::string_view name, void* data, DType dtype,
               const FlatLayout* layout)
      : engine_(engine), unit_(unit), name_(name), data_(data), dtype_(dtype), layout_(layout) {}
  GatheredUnit(GatheredUnit&& other) noexcept;
  GatheredUnit& operator=(GatheredUnit&& other) noexcept;
  GatheredUnit(const GatheredUnit&) = delete;
  GatheredUnit& operator=(const GatheredUnit&) = delete;
  ~GatheredUnit();

  UnitId unit() const { return unit_; }
  std::string_view name() const { return name_; }
  DType dtype() const { return dtype_; }
  void* raw() const { return data_; }  // padded_num_elements() elements of dtype()
  // Typed view; throws zero::Error naming the unit and both dtypes when T is not the unit's dtype
  // (float, BFloat16 or Float16: zero/core/dtype.h).
  template <typename T>
  T* data_as() const {
    check_dtype(dtype_of<T>(), {});
    return static_cast<T*>(data_);
  }
  float* data() const { return data_as<float>(); }  // fp32 units
  const FlatLayout& layout() const { return *layout_; }
  // The tensor `name` of the unit, typed as T (float, BFloat16 or Float16: the unit's dtype, as
  // Engine::param_dtype() says). Throws zero::Error naming the unit and the tensor when the unit
  // has no such tensor or is stored in another dtype.
  template <typename T>
  std::span<T> tensor_as(std::string_view name) const {
    return slot_view<T>(data_, checked_slot(name, dtype_of<T>()));
  }
  std::span<float> tensor(std::string_view name) const { return tensor_as<float>(name); }
  // Gives the unit back to the engine now (stage 3 may free or re-use its memory).
  void release();

 private:
  // The slot of `tensor`, after checking that the unit holds it and is stored in `requested`.
  const TensorSlot& checked_slot(std::string_view tensor, DType requested) const;
  void check_dtype(DType requested, std::string_view tensor) const;
  Engine* engine_ = nullptr;
  UnitId unit_ = -1;
  std::string_view name_;
  void* data_ = nullptr;
  DType dtype_ = DType::kFloat32;
  const FlatLayout* layout_ = nullptr;
};

class Engine {
 public:
  // `schedule` may be null (constant lr). `context` is the rank's device (zero/core/
  // device_context.h); null: the engine owns a CPU context (make_cpu_context()). Pass a planning
  // context (make_planning_context()) to record the allocation sequence without memory. The
  // communicator and a given context must outlive the engine.
  Engine(EngineOptions options, Communicator& communicator, std::unique_ptr<Optimizer> optimizer,
         std::unique_ptr<LrSchedule> schedule = nullptr, DeviceContext* context = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Registration, before the first gather/grads/step; every rank in the same order.
  UnitId register_unit(std::string name, std::vector<TensorSpec> tensors, InitFunction init);
  UnitId register_unit(std::string name, std::vector<TensorSpec> tensors,
                       std::vector<float> initial_values);  // num_elements() values
  UnitId register_unit(std::string name, std::vector<TensorSpec> tensors, RangeInitFunction init);
  // Allocates every buffer and initialises the parameters; runs on first use if not called.
  void initialize();
  // The swap stores for `device: nvme` offload come from `factory` (SwapStoreFactory,
  // zero/core/swap_store.h; set before initialize()). The engine has no default: zero::make_engine
  // (zero/factory/engine_factory.h) installs zero::offload's NVMe store, tests a double; an engine
  // with nvme offload and no factory throws at initialize(), saying so. A planning context
  // records the regions without a store (and needs no factory).
  void set_swap_store_factory(SwapStoreFactory factory);
  // What this rank's swap stores have moved so far (nvme offload; zeros without): the trainer
  // logs the read and write rates of each logging window from the difference of two calls.
  SwapTraffic swap_traffic() const;

  // All ranks, same order (stage 3 all-gathers; other stages return the resident parameters).
  GatheredUnit gather(UnitId unit);
  void release(UnitId unit);
  GradientBuffer grads(UnitId unit);
  // The unit's backward is complete: queue its gradients for reduction (all ranks, same order,
  // once per unit per micro-step).
  void reduce_grads(UnitId unit);
  // At an accumulation boundary: reduce, check overflow, clip, optimizer step, schedule step,
  // refresh parameters, zero gradients. Returns true when an optimizer step was taken; false
  // when not at a boundary or when the step was skipped for fp16 overflow.
  bool step();
  void zero_grad();
  // At stage 3 with offload_optimizer (no partial offload) step() returns once the global norm is
  // known and the step runs on a worker, sub-group by sub-group in the order of the next forward,
  // whose gathers each wait for their unit's sub-group. This waits for all of it (and rethrows
  // its error); reading the states (checkpoints, gather_master), the next backward and the
  // destructor wait by themselves. A no-op otherwise.
  void wait_for_step();

  // Averages `value` over all ranks (blocking; every rank calls it).
  double average_across_ranks(double value);

  UnitId unit(std::string_view name) const;
  std::size_t num_units() const;
  const std::string& unit_name(UnitId unit) const;
  const FlatLayout& layout(UnitId unit) const;
  int rank() const;
  int world_size() const;
  const EngineOptions& options() const;
  // The dtype of gathered parameters and of the gradient buffers grads() hands out (the state
  // policy's compute and model_grads dtypes, zero/engine/memory_formula.h).
  DType param_dtype() const;
  DType grad_dtype() const;

  // The global gradient norm of the last boundary, before clipping and after unscaling.
  double global_grad_norm() const;
  bool last_step_overflowed() const;
  double loss_scale() const;
  double lr() const;  // the learning rate the next optimizer step uses
  std::int64_t global_steps() const;
  std::int64_t micro_steps() const;
  bool is_gradient_accumulation_boundary() const;

  DeviceContext& context();
  MemoryLedger& ledger();
  // The context's device-space allocator (models allocate activations from it).
  Allocator& allocator();

  // Checkpoint state: this rank's shards (writable: load, then call refresh_params()). With
  // offload_optimizer nvme the spans are a host copy of the whole shard (read from the regions,
  // written back by the next step() or refresh_params()): loads use fill_shard_states instead.
  // The spans are where the states live (ShardState::space; device memory on a GPU): the host
  // reads them through read_shard_values / write_shard_values.
  std::vector<ShardState> shard_states();
  // The same shards for reading only, handed to `visit` one unit at a time in unit order, each
  // valid during its call: with offload_optimizer nvme one sub-group is read from the swap
  // regions at a time (host memory: one sub-group's master and state, not the rank's shard; a
  // unit split over sub-groups is gathered whole into a buffer of its own first),
  // otherwise the resident spans (device memory on a GPU: ShardState::space, read through
  // read_shard_values). Checkpoint writers stream shard files from it.
  void visit_shard_states(const std::function<void(const ShardState&)>& visit);
  // Unit `unit`'s fp32 master, whole (padded_num_elements() values; a 16-bit run's model is saved
  // from it, as Hugging Face's Trainer saves the fp32 parameters): every rank's shard of it, read
  // from where it lives (device or host memory, or its sub-group's swap region with
  // offload_optimizer nvme), all-gathered through a device buffer. All ranks, in the same order (a
  // collective; stage 0 gathers nothing). Rank 0 gets the values in memory the host reads (host
  // memory, or the device buffer where the model runs on the host), other ranks an empty Buffer.
  // Memory: one unit in fp32 on every rank, and with nvme a buffer of its sub-group's master
  // size, into which only the region's blocks around the unit's part are read. Throws
  // zero::Error when the engine keeps no fp32 master (fp32 parameters: gather() gives them).
  Buffer gather_master(UnitId unit);
  // Loading checkpoint state in place: hands `fill` each unit's shard, writable, one unit at a
  // time in unit order, each valid during its call. Resident states: their own spans (device
  // memory on a GPU: ShardState::space, written through write_shard_values). With
  // offload_optimizer nvme: one sub-group's host slot (master and state, the memory
  // visit_shard_states holds), written to the sub-group's swap regions once its last unit is
  // filled, so a load never holds the rank's shard in host memory; a unit larger than
  // sub_group_size, split over sub-groups, comes in pieces (ShardState::range: each piece's).
  // kEveryElement: `fill` writes every element of every span (a checkpoint), the slot starts zeroed
  // (its padding zero) and the regions are not read; kSomeElements: the spans start with the
  // current values (nvme: read from the regions first). Call refresh_params() after it.
  enum class ShardFill { kEveryElement, kSomeElements };
  void fill_shard_states(const std::function<void(ShardState&)>& fill, ShardFill coverage);
  // Host access to one span of a ShardState (or a subspan of one), wherever `space` puts it, in
  // pieces of at most shard_piece_elements() values handed over in order, each valid during its
  // call with its offset into `values`. Host-addressable spans are one piece, the span itself (no
  // copy); otherwise each piece is a pinned host buffer filled by the context's copy on the copy
  // stream and awaited (read), or copied back into the span and awaited once `produce` has written
  // it (write; `current`: the piece starts with the span's values, else unspecified). Memory: one
  // piece of pinned host memory, never the span.
  void read_shard_values(std::span<const float> values, MemorySpace space,
                         const std::function<void(std::size_t, std::span<const float>)>& use);
  void write_shard_values(std::span<float> values, MemorySpace space, bool current,
                          const std::function<void(std::size_t, std::span<float>)>& produce);
  std::size_t shard_piece_elements() const;             // 16 MiB of fp32 unless set
  void set_shard_piece_elements(std::size_t elements);  // > 0; tests use small pieces
  // The optimizer state names of ShardState::optimizer_state, in order ("exp_avg", ...).
  std::vector<std::string> optimizer_state_names() const;
  TrainingState training_state() const;
  void set_training_state(const TrainingState& state);
  // Makes the compute copies agree with the (possibly rewritten) shards: stage 1/2 all-gather,
  // stage 3 re-gathers persistent units. All ranks.
  void refresh_params();

  // The engine's state and parts (libzero/src/engine/engine_impl.h).
  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace zero
