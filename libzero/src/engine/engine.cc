// Engine: registration, allocation (the state storage, the reducer's and gatherer's buffers),
// initial values, gather / grads / reduce_grads and zero_grad.
#include "zero/engine/engine.h"

#include <algorithm>
#include <cmath>

#include "engine_impl.h"
#include "waits.h"
#include "zero/core/error.h"
#include "zero/engine/memory_formula.h"

namespace zero {

// ---- GatheredUnit / GradientBuffer ----

namespace {

// The tensor `name` of a unit's layout; an error names the unit ("unit 'fc1'") and its tensors.
const TensorSlot& find_slot(const FlatLayout& layout, std::string_view name,
                            std::string_view unit) {
  for (const TensorSlot& slot : layout.slots())
    if (slot.name == name) return slot;
  std::string known;
  for (const TensorSlot& slot : layout.slots()) known += (known.empty() ? "" : ", ") + slot.name;
  ZERO_THROW("unit '", unit, "' has no tensor '", name, "'; it has: ", known);
}

// What a typed view of a unit (GatheredUnit: parameters; GradientBuffer: gradients) reads:
// `tensor` (empty: the whole unit) of `unit`, stored in `stored`, as `requested`. Throws naming
// the unit, the tensor and both dtypes ("tensor 'w' of unit 'fc1' is stored in bf16, not read as
// fp32").
struct TypedRead {
  bool gradients = false;
  std::string_view unit;
  std::string_view tensor;
  DType stored = DType::kFloat32;
  DType requested = DType::kFloat32;

  void check() const {
    std::string what = "unit '" + std::string(unit) + "'";
    if (!tensor.empty()) what = "tensor '" + std::string(tensor) + "' of " + what;
    ZERO_CHECK(requested == stored, gradients ? "the gradients of " : "", what,
               gradients ? " are" : " is", " stored in ", name_of(stored), ", not read as ",
               name_of(requested));
  }
  // The tensor's slot in `layout` (null: an empty view), its dtype checked.
  const TensorSlot& slot(const FlatLayout* layout) const {
    ZERO_CHECK(layout != nullptr, "tensor '", tensor, "' of an empty ",
               gradients ? "GradientBuffer" : "GatheredUnit");
    const TensorSlot& found = find_slot(*layout, tensor, unit);
    check();
    return found;
  }
};

}  // namespace

GatheredUnit::GatheredUnit(GatheredUnit&& other) noexcept
    : engine_(std::exchange(other.engine_, nullptr)),
      unit_(other.unit_),
      name_(other.name_),
      data_(other.data_),
      dtype_(other.dtype_),
      layout_(other.layout_) {}

GatheredUnit& GatheredUnit::operator=(GatheredUnit&& other) noexcept {
  if (this != &other) {
    release();
    engine_ = std::exchange(other.engine_, nullptr);
    unit_ = other.unit_;
    name_ = other.name_;
    data_ = other.data_;
    dtype_ = other.dtype_;
    layout_ = other.layout_;
  }
  return *this;
}

GatheredUnit::~GatheredUnit() {
  try {
    release();
  } catch (...) {
    // Destructors never throw; release() only fails on a misuse already reported elsewhere.
  }
}

const TensorSlot& GatheredUnit::checked_slot(std::string_view tensor, DType requested) const {
  return TypedRead{false, name_, tensor, dtype_, requested}.slot(layout_);
}

void GatheredUnit::check_dtype(DType requested, std::string_view tensor) const {
  TypedRead{false, name_, tensor, dtype_, requested}.check();
}

const TensorSlot& GradientBuffer::checked_slot(std::string_view tensor, DType requested) const {
  return TypedRead{true, unit, tensor, dtype, requested}.slot(layout);
}

void GradientBuffer::check_dtype(DType requested, std::string_view tensor) const {
  TypedRead{true, unit, tensor, dtype, requested}.check();
}

void GatheredUnit::release() {
  if (engine_ == nullptr) return;
  Engine* engine = std::exchange(engine_, nullptr);
  engine->release(unit_);
}

// ---- Impl helpers ----

Engine::Impl::Impl(EngineOptions engine_options, DeviceContext* given_context,
                   Communicator& communicator, std::unique_ptr<Optimizer> opt,
                   std::unique_ptr<LrSchedule> lr_schedule)
    : options(std::move(engine_options)),
      owned_context(given_context == nullptr ? make_cpu_context() : nullptr),
      ctx(given_context == nullptr ? *owned_context : *given_context),
      comm(communicator),
      optimizer(std::move(opt)),
      schedule(std::move(lr_schedule)),
      policy(state_policy(options)),
      planning(ctx.planning()),
      skip_collectives(planning && communicator.moves_data()),
      rank(communicator.rank()),
      world(communicator.world_size()),
      loss_scaler(options.fp16),
      storage(StateStorageSetup{
          .context = ctx,
          .options = options,
          .policy = policy,
          .rank = rank,
          .world = world,
          .states_per_element = static_cast<std::size_t>(optimizer->states_per_element()),
      }),
      offload(HostOffloadSetup{
          .context = ctx,
          .communicator = communicator,
          .options = options,
          .policy = policy,
          .storage = storage,
          .optimizer = *optimizer,
      }),
      gatherer(ParamGatherSetup{
          .context = ctx,
          .communicator = communicator,
          .options = options,
          .comm_done = comm_done,
          .compute = policy.compute,
          .param_shard = policy.param_shard,
          .skip_collectives = skip_collectives,
          .shards = offload,
      }),
      reducer(GradReduceSetup{
          .context = ctx,
          .communicator = communicator,
          .options = options,
          .policy = policy,
          .comm_done = comm_done,
          .skip_collectives = skip_collectives,
          .storage = storage,
          .host = offload,
      }) {
  training.loss_scaler = loss_scaler.state();
}

bool Engine::Impl::at_boundary_micro_step() const {
  return (micro_steps + 1) % options.gradient_accumulation_steps == 0;
}

void Engine::Impl::synchronize(const std::string& what) {
  synchronize_naming(comm, options.stage, what);
}

void Engine::Impl::synchronize_compute(const std::string& what) {
  synchronize_naming(ctx.compute_stream(), comm, options.stage, what);
}

void Engine::Impl::hand_to_model(const Event& ready, const std::string& what) {
  ctx.compute_stream().wait(ready);
  if (ctx.model_runs_on_host()) synchronize_compute(what);
}

void Engine::Impl::comm_after_compute() { comm.stream().wait(ctx.compute_stream().record()); }

void Engine::Impl::compute_after_comm() { ctx.compute_stream().wait(comm.stream().record()); }

void Engine::Impl::allocate() {
  std::vector<StateStorage::UnitShape> stored;
  for (const EngineUnit& unit : units) {
    std::vector<ElementRange> tensors;
    for (const TensorSlot& slot : unit.layout.slots()) tensors.push_back(slot.range());
    stored.push_back({unit.name, unit.layout.num_elements(), unit.layout.padded_num_elements(),
                      std::move(tensors)});
  }
  storage.allocate(stored);
  std::vector<ParamGatherer::UnitShape> shapes;
  std::vector<GradReducer::UnitShape> reduced_shapes;
  std::vector<std::size_t> sizes;
  for (UnitId u = 0; u < static_cast<UnitId>(units.size()); ++u) {
    const EngineUnit& unit = units[u];
    const StateStorage::Placement& at = storage.unit(u);
    shapes.push_back({unit.name, unit.layout.num_elements(), at.padded, at.shard});
    reduced_shapes.push_back({unit.name, unit.layout.num_elements(), at.shard});
    sizes.push_back(unit.layout.num_elements());
  }
  gatherer.set_units(std::move(shapes));
  reducer.set_units(std::move(reduced_shapes));
  const BucketSize bucket_size = reduce_bucket_elements(options, sizes, world);
  reducer.allocate(bucket_size);
  if (policy.host_step)  // the largest reduced block a flush hands to the host: one rank's
    offload.allocate(bucket_size.bucket_elements / static_cast<std::size_t>(world));
  const std::size_t staging = allgather_staging_elements(options, sizes, world);
  if (staging > 0)
    gather_staging = ctx.allocator(MemorySpace::kDevice)
                         .allocate(staging * size_of(policy.compute), MemoryCategory::kCommBuffers);
}

void Engine::Impl::initialize_values() {
  std::size_t largest = 0;
  for (UnitId u = 0; u < static_cast<UnitId>(units.size()); ++u)
    largest = std::max(largest, storage.unit(u).padded);
  // The init functions fill a host staging buffer, copied into device memory unit by unit. Where
  // the device does not hold the full unit in fp32 (stage 3, 16-bit compute), the unit is
  // materialised in an fp32 device workspace, broadcast there, and the owned and compute parts
  // are taken from it.
  const bool direct = policy.full_params && !policy.master_weights;
  Buffer workspace;
  if (!direct)
    workspace = ctx.allocator(MemorySpace::kDevice)
                    .allocate(largest * sizeof(float), MemoryCategory::kWorkspace);
  Buffer staging = ctx.allocator(MemorySpace::kHost)
                       .allocate(largest * sizeof(float), MemoryCategory::kWorkspace);
  // Offload with swap regions: one sub-group's master and zero state, written when complete;
  // one swapped parameter shard, written once converted.
  SwapSlot group_slot = offload.make_swap_slot();
  AlignedHostBuffer param_io = make_param_io_buffer(ctx, policy, storage);
  // offload_param where the step runs on the device (without offload_optimizer, or partial
  // offload's device sub-groups): the shard is converted on the device and copied out.
  const Buffer param_staging = offload.make_param_device_staging();
  if (planning) {  // the plan records the staging buffers (and the broadcasts), computes nothing
    if (!skip_collectives && world > 1)
      for (const EngineUnit& unit : units)
        if (!unit.range_init)
          comm.broadcast(nullptr, nullptr, unit.layout.num_elements(), DType::kFloat32, 0,
                         "init " + unit.name);
    synchronize("broadcasting the initial parameters");
    return;
  }
  Stream& compute = ctx.compute_stream();
  for (UnitId u = 0; u < static_cast<UnitId>(units.size()); ++u) {
    EngineUnit& unit = units[u];
    const StateStorage::Placement& at = storage.unit(u);
    float* host = staging.data_as<float>();
    std::fill(host, host + at.padded, 0.0f);
    const std::size_t own = storage.owned_range(u).begin;
    if (unit.range_init) {
      // What this rank reads below: the whole unit where it keeps it, else its owned part.
      const ElementRange held =
          intersect(policy.full_params ? ElementRange{0, at.padded} : storage.owned_range(u),
                    {0, unit.layout.num_elements()});
      if (!held.empty()) unit.range_init(held, std::span<float>(host + held.begin, held.size()));
    } else if (rank == 0) {
      if (unit.init) {
        for (const TensorSlot& slot : unit.layout.slots())
          unit.init(slot, std::span<float>(host + slot.offset_elements, slot.num_elements));
      } else {
        std::copy(unit.initial_values.begin(), unit.initial_values.end(), host);
      }
    }
    float* full = direct ? static_cast<float*>(storage.full_params(u)) : workspace.data_as<float>();
    ctx.copy(compute, host, full, at.padded * sizeof(float));
    // Rank 0's values are the model (DeepSpeed broadcasts the module at initialisation), unless
    // every rank generated what it holds.
    comm_after_compute();
    if (world > 1 && !unit.range_init)
      comm.broadcast(full, full, unit.layout.num_elements(), DType::kFloat32, 0,
                     "init " + unit.name);
    if (!direct) {
      compute_after_comm();
      // Offloaded master: through the host staging buffer (its copy to the device ran before, in
      // stream order), from where host_initialize_unit takes it.
      const bool host_master = policy.host_step && !storage.on_device(u);
      float* master = host_master ? host : storage.owned_params(u);
      if (policy.master_weights)
        ctx.copy(compute, full + own, master, at.owned_count * sizeof(float));
      if (policy.full_params)  // the whole unit in the compute dtype
        ctx.convert(compute, full, DType::kFloat32, storage.full_params(u), policy.compute,
                    at.padded);
      else if (!policy.offload_params())  // stage 3: the owned shard
        ctx.convert(compute, full + own, DType::kFloat32, storage.owned_compute_params(u),
                    policy.compute, at.shard);
      // The host-side initialisation below reads what these queued copies write.
      compute_after_comm();
      synchronize_compute("initialising unit '" + unit.name + "'");
      if (host_master) offload.initialize_unit(u, master, group_slot, param_io);
      if (policy.offload_params() && !host_master)
        offload.store_param_shard(u, full + own, param_staging, param_io);
    }
    // The staging (and workspace) buffer is reused by the next unit.
    compute_after_comm();
    synchronize_compute("initialising unit '" + unit.name + "'");
    unit.initial_values.clear();
    unit.initial_values.shrink_to_fit();
    unit.init = nullptr;
    unit.range_init = nullptr;
  }
  synchronize("broadcasting the initial parameters");
}

// ---- Engine ----

Engine::Engine(EngineOptions options, Communicator& communicator,
               std::unique_ptr<Optimizer> optimizer, std::unique_ptr<LrSchedule> schedule,
               DeviceContext* context) {
  validate(options);
  ZERO_CHECK(optimizer != nullptr, "the engine needs an optimizer");
  impl_ = std::make_unique<Impl>(std::move(options), context, communicator, std::move(optimizer),
                                 std::move(schedule));
}

Engine::~Engine() {
  // Queued work reads and frees the engine's buffers: drain it before they go.
  try {
    impl_->offload.wait_for_step();
  } catch (...) {
    // Reported to the caller that waited for it, or lost with the engine.
  }
  try {
    impl_->comm_done.synchronize();
  } catch (...) {
    // A failed collective was reported to the caller that waited for it.
  }
  for (Stream* stream : {&impl_->ctx.compute_stream(), &impl_->ctx.copy_stream()}) {
    try {
      stream->synchronize();
    } catch (...) {
      // A failed operation was reported to the caller that waited for it.
    }
  }
}

UnitId Engine::register_unit(std::string name, std::vector<TensorSpec> tensors, InitFunction init) {
  Impl& d = *impl_;
  ZERO_CHECK(!d.initialized, "register_unit('", name,
             "') after the engine was initialised: register ",
             "every unit before the first gather, grads or step");
  for (const EngineUnit& unit : d.units)
    ZERO_CHECK(unit.name != name, "unit '", name, "' is registered twice");
  EngineUnit unit;
  unit.name = std::move(name);
  unit.layout = FlatLayout(std::move(tensors), d.world, d.options.alignment_elements);
  unit.init = std::move(init);
  d.units.push_back(std::move(unit));
  return static_cast<UnitId>(d.units.size() - 1);
}

UnitId Engine::register_unit(std::string name, std::vector<TensorSpec> tensors,
                             RangeInitFunction init) {
  ZERO_CHECK(init, "unit '", name, "': the range initialiser is empty");
  const UnitId id = register_unit(std::move(name), std::move(tensors), InitFunction{});
  impl_->units[id].range_init = std::move(init);
  return id;
}

UnitId Engine::register_unit(std::string name, std::vector<TensorSpec> tensors,
                             std::vector<float> initial_values) {
  const UnitId id = register_unit(std::move(name), std::move(tensors), InitFunction{});
  EngineUnit& unit = impl_->units[id];
  ZERO_CHECK(initial_values.size() == unit.layout.num_elements(), "unit '", unit.name, "' has ",
             unit.layout.num_elements(), " elements but ", initial_values.size(),
             " initial values were given");
  unit.initial_values = std::move(initial_values);
  return id;
}

void Engine::initialize() {
  Impl& d = *impl_;
  if (d.initialized) return;
  ZERO_CHECK(!d.units.empty(), "the engine has no units: register the model's units first");
  d.initialized = true;
  d.allocate();
  d.initialize_values();
}

namespace {

std::string names_of(const std::vector<EngineUnit>& units) {
  std::string known;
  for (const EngineUnit& unit : units) known += (known.empty() ? "" : ", ") + unit.name;
  return known;
}

}  // namespace

UnitId Engine::unit(std::string_view name) const {
  for (std::size_t i = 0; i < impl_->units.size(); ++i)
    if (impl_->units[i].name == name) return static_cast<UnitId>(i);
  ZERO_THROW("the engine has no unit '", name, "'; units: ", names_of(impl_->units));
}

void Engine::Impl::check_unit(UnitId unit, std::string_view what) const {
  if (unit >= 0 && static_cast<std::size_t>(unit) < units.size()) return;
  ZERO_THROW(what, ": no unit #", unit, "; the engine has ", units.size(), " unit(s)",
             units.empty() ? "" : ": ", names_of(units));
}

std::size_t Engine::num_units() const { return impl_->units.size(); }

const std::string& Engine::unit_name(UnitId unit) const { return impl_->units.at(unit).name; }

const FlatLayout& Engine::layout(UnitId unit) const { return impl_->units.at(unit).layout; }

int Engine::rank() const { return impl_->rank; }

const EngineOptions& Engine::options() const { return impl_->options; }

double Engine::global_grad_norm() const { return impl_->grad_norm; }

bool Engine::last_step_overflowed() const { return impl_->overflow; }

double Engine::loss_scale() const { return impl_->loss_scaler.scale(); }

std::int64_t Engine::global_steps() const { return impl_->training.global_steps; }

std::int64_t Engine::micro_steps() const { return impl_->micro_steps; }

DeviceContext& Engine::context() { return impl_->ctx; }

MemoryLedger& Engine::ledger() { return impl_->ctx.ledger(); }

Allocator& Engine::allocator() { return impl_->ctx.allocator(MemorySpace::kDevice); }

DType Engine::param_dtype() const { return impl_->policy.compute; }

DType Engine::grad_dtype() const { return impl_->policy.model_grads; }

int Engine::world_size() const { return impl_->world; }

double Engine::lr() const {
  return impl_->schedule ? impl_->schedule->lr() : impl_->optimizer->lr();
}

bool Engine::is_gradient_accumulation_boundary() const { return impl_->at_boundary_micro_step(); }

GatheredUnit Engine::gather(UnitId unit) {
  initialize();
  Impl& d = *impl_;
  d.check_unit(unit, "gather");
  void* data = nullptr;
  if (d.policy.param_shard) {
    data = d.gatherer.gather(unit);
  } else {
    // Stages 0-2: the post-step all-gather must have landed before compute reads parameters.
    d.hand_to_model(d.params_ready, "gathering unit '" + d.units[unit].name + "'");
    d.gatherer.hold(unit);
    data = d.storage.full_params(unit);
  }
  return GatheredUnit(this, unit, d.units[unit].name, data, d.policy.compute,
                      &d.units[unit].layout);
}

void Engine::release(UnitId unit) { impl_->gatherer.release(unit); }

GradientBuffer Engine::grads(UnitId unit) {
  initialize();
  Impl& d = *impl_;
  d.check_unit(unit, "grads");
  EngineUnit& u = d.units[unit];
  const std::size_t padded = d.storage.unit(unit).padded;
  ZERO_CHECK(!d.reducer.reduced(unit), "grads('", u.name, "') after reduce_grads('", u.name,
             "') in the same micro-step");
  void* data = nullptr;
  const DType dtype = d.policy.model_grads;
  if (d.policy.full_grads) {
    data = d.storage.full_grads(unit);
  } else {
    if (!u.grad_buffer) {
      u.grad_buffer = std::make_shared<Buffer>(
          allocator().allocate(padded * size_of(dtype), MemoryCategory::kGrads));
      if (!d.planning)
        d.ctx.fill(d.ctx.compute_stream(), u.grad_buffer->data(), dtype, padded, 0.0f);
    }
    data = u.grad_buffer->data();
  }
  // Zeroed (and, stages 0-1, no longer read by a reduction) on the compute stream.
  if (!d.planning) d.hand_to_model(Event(), "zeroing the gradients of unit '" + u.name + "'");
  return {dtype == DType::kFloat32 ? static_cast<float*>(data) : nullptr, &u.layout, data, dtype,
          u.name};
}

void Engine::reduce_grads(UnitId unit) {
  initialize();
  Impl& d = *impl_;
  d.check_unit(unit, "reduce_grads");
  EngineUnit& u = d.units[unit];
  ZERO_CHECK(!d.reducer.reduced(unit), "reduce_grads('", u.name,
             "') called twice in one micro-step");
  if (!d.policy.full_grads && !u.grad_buffer) grads(unit);  // a unit without gradient: zeros
  if (d.reducer.reduce(unit, std::move(u.grad_buffer), d.at_boundary_micro_step()))
    d.end_micro_step();
}

void Engine::zero_grad() {
  initialize();
  Impl& d = *impl_;
  if (d.planning) {
    d.synchronize("zero_grad");
    return;
  }
  // After every queued reduction into the gradients; the next reductions wait for the zeros
  // (the reducer's flush orders the communication stream after the compute stream).
  d.compute_after_comm();
  d.storage.zero_device_grads(d.ctx.compute_stream());
  if (d.policy.grad_shard_space == MemorySpace::kDevice) return;
  // The host partition, on the copy stream (an overlapped step still reading it: once settled).
  d.offload.zero();
}

}  // namespace zero
