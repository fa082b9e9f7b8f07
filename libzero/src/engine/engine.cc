// Engine: registration, allocation of the flat state buffers, the boundary step, checkpoint state.
#include "zero/engine/engine.h"

#include <algorithm>
#include <cmath>

#include "engine_impl.h"
#include "zero/core/error.h"
#include "zero/engine/memory_formula.h"

namespace zero {

// ---- GatheredUnit / GradientBuffer ----

GatheredUnit::GatheredUnit(GatheredUnit&& other) noexcept
    : engine_(std::exchange(other.engine_, nullptr)),
      unit_(other.unit_),
      data_(other.data_),
      dtype_(other.dtype_),
      layout_(other.layout_) {}

GatheredUnit& GatheredUnit::operator=(GatheredUnit&& other) noexcept {
  if (this != &other) {
    release();
    engine_ = std::exchange(other.engine_, nullptr);
    unit_ = other.unit_;
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

std::span<float> GatheredUnit::tensor(std::string_view name) const {
  const TensorSlot& slot = layout_->slot(name);
  return {data() + slot.offset_elements, slot.num_elements};
}

void GatheredUnit::check_dtype(DType requested) const {
  ZERO_CHECK(requested == dtype_, "unit #", unit_, " is stored in ", name_of(dtype_),
             ", not read as ", name_of(requested));
}

void GradientBuffer::check_dtype(DType requested) const {
  ZERO_CHECK(requested == dtype, "gradients are stored in ", name_of(dtype), ", not read as ",
             name_of(requested));
}

void GatheredUnit::release() {
  if (engine_ == nullptr) return;
  Engine* engine = std::exchange(engine_, nullptr);
  engine->release(unit_);
}

std::span<float> GradientBuffer::tensor(std::string_view name) const {
  const TensorSlot& slot = layout->slot(name);
  return {data_as<float>() + slot.offset_elements, slot.num_elements};
}

// ---- Impl helpers ----

Engine::Impl::Impl(Engine& owner, DeviceContext& context, Communicator& communicator,
                   std::unique_ptr<Optimizer> opt, std::unique_ptr<LrSchedule> lr_schedule)
    : engine(owner),
      ctx(context),
      comm(communicator),
      optimizer(std::move(opt)),
      schedule(std::move(lr_schedule)),
      rank(communicator.rank()),
      world(communicator.world_size()) {}

float* Engine::Impl::owned_params(UnitId u) const {
  const EngineUnit& unit = units[u];
  if (engine.options_.stage == 3) return param_shard.data_as<float>() + unit.owned_offset;
  float* full = full_params.data_as<float>() + unit.full_offset;
  return engine.options_.stage == 0 ? full : full + static_cast<std::size_t>(rank) * unit.shard;
}

float* Engine::Impl::owned_grads(UnitId u) const {
  const EngineUnit& unit = units[u];
  const int stage = engine.options_.stage;
  if (stage >= 2) return grad_shard.data_as<float>() + unit.owned_offset;
  float* full = full_grads.data_as<float>() + unit.full_offset;
  return stage == 0 ? full : full + static_cast<std::size_t>(rank) * unit.shard;
}

float* Engine::Impl::full_grads_of(UnitId u) const {
  return full_grads.data_as<float>() + units[u].full_offset;
}

bool Engine::Impl::at_boundary_micro_step() const {
  return (engine.micro_steps_ + 1) % engine.options_.gradient_accumulation_steps == 0;
}

void Engine::Impl::synchronize(const std::string& what) {
  try {
    comm.synchronize();
  } catch (const Error& error) {
    ZERO_THROW("engine (rank ", rank, "/", world, ", stage ", engine.options_.stage, ") ", what,
               ": ", error.what());
  }
}

void Engine::Impl::synchronize_compute(const std::string& what) {
  try {
    ctx.compute_stream().synchronize();
  } catch (const Error& error) {
    ZERO_THROW("engine (rank ", rank, "/", world, ", stage ", engine.options_.stage, ") ", what,
               ": ", error.what());
  }
}

void Engine::Impl::hand_to_model(const Event& ready, const std::string& what) {
  ctx.compute_stream().wait(ready);
  if (ctx.model_runs_on_host()) synchronize_compute(what);
}

void Engine::Impl::comm_after_compute() { comm.stream().wait(ctx.compute_stream().record()); }

void Engine::Impl::note_comm_work() { comm_done = comm.stream().record(); }

void Engine::Impl::compute_after_comm() { ctx.compute_stream().wait(comm.stream().record()); }

void Engine::Impl::allocate() {
  const EngineOptions& options = engine.options_;
  Allocator& allocator = ctx.allocator(MemorySpace::kDevice);
  std::size_t full_total = 0, owned_total = 0, shard_total = 0;
  int tensors = 0;
  for (EngineUnit& unit : units) {
    unit.padded = unit.layout.padded_num_elements();
    unit.shard = unit.padded / static_cast<std::size_t>(world);
    unit.owned_count = options.stage == 0 ? unit.padded : unit.shard;
    unit.full_offset = full_total;
    unit.owned_offset = owned_total;
    unit.first_tensor = tensors;
    unit.persistent =
        options.stage == 3 &&
        unit.layout.num_elements() < static_cast<std::size_t>(options.param_persistence_threshold);
    full_total += unit.padded;
    owned_total += unit.owned_count;
    shard_total += unit.shard;
    tensors += static_cast<int>(unit.layout.slots().size());
  }
  num_tensors = tensors;
  constexpr std::size_t kFloat = sizeof(float);
  if (options.stage <= 2)
    full_params = allocator.allocate(full_total * kFloat, MemoryCategory::kParams);
  if (options.stage <= 1)
    full_grads = allocator.allocate(full_total * kFloat, MemoryCategory::kGrads);
  if (options.stage == 3)
    param_shard = allocator.allocate(shard_total * kFloat, MemoryCategory::kParamShard);
  if (options.stage >= 2)
    grad_shard = allocator.allocate(shard_total * kFloat, MemoryCategory::kGradShard);
  const auto states = static_cast<std::size_t>(optimizer->states_per_element());
  optimizer_state =
      allocator.allocate(states * owned_total * kFloat, MemoryCategory::kOptimizerState);
  std::vector<std::size_t> sizes;
  for (const EngineUnit& unit : units) sizes.push_back(unit.layout.num_elements());
  const BucketSize bucket_size = reduce_bucket_elements(options, sizes, world);
  bucket_capacity = bucket_size.bucket_elements;
  bucket = allocator.allocate(bucket_size.bucket_elements * kFloat, MemoryCategory::kCommBuffers);
  receive = allocator.allocate(bucket_size.receive_elements * kFloat, MemoryCategory::kCommBuffers);
  const std::size_t staging = allgather_staging_elements(options, sizes, world);
  if (staging > 0)
    gather_staging = allocator.allocate(staging * kFloat, MemoryCategory::kCommBuffers);
  if (planning) return;
  auto zero_fill = [&](const Buffer& buffer) {
    ctx.fill(ctx.compute_stream(), buffer.data(), DType::kFloat32,
             buffer.size_bytes() / sizeof(float), 0.0f);
  };
  zero_fill(full_grads);
  zero_fill(grad_shard);
  zero_fill(optimizer_state);
}

void Engine::Impl::initialize_values() {
  const int stage = engine.options_.stage;
  std::size_t largest = 0;
  for (const EngineUnit& unit : units) largest = std::max(largest, unit.padded);
  // The init functions fill a host staging buffer, copied into device memory unit by unit. Stage 3
  // materialises one unit at a time in a device workspace buffer and keeps its shard.
  Buffer workspace;
  if (stage == 3)
    workspace = ctx.allocator(MemorySpace::kDevice)
                    .allocate(largest * sizeof(float), MemoryCategory::kWorkspace);
  Buffer staging = ctx.allocator(MemorySpace::kHost)
                       .allocate(largest * sizeof(float), MemoryCategory::kWorkspace);
  if (planning) {  // the plan records the staging buffers (and the broadcasts), computes nothing
    if (!skip_collectives && world > 1)
      for (const EngineUnit& unit : units)
        comm.broadcast(nullptr, nullptr, unit.layout.num_elements(), DType::kFloat32, 0,
                       "init " + unit.name);
    synchronize("broadcasting the initial parameters");
    return;
  }
  Stream& compute = ctx.compute_stream();
  for (UnitId u = 0; u < static_cast<UnitId>(units.size()); ++u) {
    EngineUnit& unit = units[u];
    float* host = staging.data_as<float>();
    std::fill(host, host + unit.padded, 0.0f);
    if (rank == 0) {
      if (unit.init) {
        for (const TensorSlot& slot : unit.layout.slots())
          unit.init(slot, std::span<float>(host + slot.offset_elements, slot.num_elements));
      } else {
        std::copy(unit.initial_values.begin(), unit.initial_values.end(), host);
      }
    }
    float* full =
        stage == 3 ? workspace.data_as<float>() : full_params.data_as<float>() + unit.full_offset;
    ctx.copy(compute, host, full, unit.padded * sizeof(float));
    // Rank 0's values are the model (DeepSpeed broadcasts the module at initialisation).
    comm_after_compute();
    if (world > 1)
      comm.broadcast(full, full, unit.layout.num_elements(), DType::kFloat32, 0,
                     "init " + unit.name);
    if (stage == 3) {
      compute_after_comm();
      ctx.copy(compute, full + static_cast<std::size_t>(rank) * unit.shard,
               param_shard.data_as<float>() + unit.owned_offset, unit.shard * sizeof(float));
    }
    // The staging (and stage 3 workspace) buffer is reused by the next unit.
    compute_after_comm();
    synchronize_compute("initialising unit '" + unit.name + "'");
    unit.initial_values.clear();
    unit.initial_values.shrink_to_fit();
    unit.init = nullptr;
  }
  synchronize("broadcasting the initial parameters");
}

// ---- Engine ----

Engine::Engine(EngineOptions options, Communicator& communicator,
               std::unique_ptr<Optimizer> optimizer, std::unique_ptr<LrSchedule> schedule,
               DeviceContext* context)
    : options_(std::move(options)), loss_scaler_(options_.fp16) {
  validate(options_);
  ZERO_CHECK(optimizer != nullptr, "the engine needs an optimizer");
  if (context == nullptr) {
    owned_context_ = make_cpu_context();
    context = owned_context_.get();
  }
  context_ = context;
  impl_ = std::make_unique<Impl>(*this, *context_, communicator, std::move(optimizer),
                                 std::move(schedule));
  impl_->planning = context_->planning();
  impl_->skip_collectives = impl_->planning && communicator.moves_data();
  state_.loss_scaler = loss_scaler_.state();
}

Engine::~Engine() {
  // Queued work reads and frees the engine's buffers: drain it before they go.
  try {
    impl_->comm_done.synchronize();
  } catch (...) {
    // A failed collective was reported to the caller that waited for it.
  }
  for (Stream* stream : {&context_->compute_stream(), &context_->copy_stream()}) {
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
  unit.layout = FlatLayout(std::move(tensors), d.world, options_.alignment_elements);
  unit.init = std::move(init);
  d.units.push_back(std::move(unit));
  return static_cast<UnitId>(d.units.size() - 1);
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

UnitId Engine::unit(std::string_view name) const {
  for (std::size_t i = 0; i < impl_->units.size(); ++i)
    if (impl_->units[i].name == name) return static_cast<UnitId>(i);
  std::string known;
  for (const EngineUnit& unit : impl_->units) known += (known.empty() ? "" : ", ") + unit.name;
  ZERO_THROW("the engine has no unit '", name, "'; units: ", known);
}

std::size_t Engine::num_units() const { return impl_->units.size(); }

const std::string& Engine::unit_name(UnitId unit) const { return impl_->units.at(unit).name; }

const FlatLayout& Engine::layout(UnitId unit) const { return impl_->units.at(unit).layout; }

int Engine::rank() const { return impl_->rank; }

int Engine::world_size() const { return impl_->world; }

double Engine::lr() const {
  return impl_->schedule ? impl_->schedule->lr() : impl_->optimizer->lr();
}

bool Engine::is_gradient_accumulation_boundary() const { return impl_->at_boundary_micro_step(); }

GatheredUnit Engine::gather(UnitId unit) {
  initialize();
  Impl& d = *impl_;
  ZERO_CHECK(unit >= 0 && unit < static_cast<UnitId>(d.units.size()), "gather: no unit #", unit);
  float* data = d.gather(unit);
  return GatheredUnit(this, unit, data, DType::kFloat32, &d.units[unit].layout);
}

void Engine::release(UnitId unit) { impl_->release(unit); }

GradientBuffer Engine::grads(UnitId unit) {
  initialize();
  Impl& d = *impl_;
  ZERO_CHECK(unit >= 0 && unit < static_cast<UnitId>(d.units.size()), "grads: no unit #", unit);
  EngineUnit& u = d.units[unit];
  ZERO_CHECK(!u.reduced, "grads('", u.name, "') after reduce_grads('", u.name,
             "') in the same micro-step");
  float* data = nullptr;
  if (options_.stage <= 1) {
    data = d.full_grads_of(unit);
  } else {
    if (!u.grad_buffer) {
      u.grad_buffer = std::make_shared<Buffer>(
          allocator().allocate(u.padded * sizeof(float), MemoryCategory::kGrads));
      if (!d.planning)
        context_->fill(context_->compute_stream(), u.grad_buffer->data(), DType::kFloat32, u.padded,
                       0.0f);
    }
    data = u.grad_buffer->data_as<float>();
  }
  // Zeroed (and, stages 0-1, no longer read by a reduction) on the compute stream.
  if (!d.planning) d.hand_to_model(Event(), "zeroing the gradients of unit '" + u.name + "'");
  return {data, &u.layout, data, DType::kFloat32};
}

void Engine::reduce_grads(UnitId unit) {
  initialize();
  Impl& d = *impl_;
  ZERO_CHECK(unit >= 0 && unit < static_cast<UnitId>(d.units.size()), "reduce_grads: no unit #",
             unit);
  EngineUnit& u = d.units[unit];
  ZERO_CHECK(!u.reduced, "reduce_grads('", u.name, "') called twice in one micro-step");
  if (options_.stage >= 2 && !u.grad_buffer) grads(unit);  // a unit without gradient: zeros
  u.reduced = true;
  d.enqueue_reduction(unit);
  if (++d.reduced_units == static_cast<int>(d.units.size())) d.end_micro_step();
}

void Engine::zero_grad() {
  initialize();
  Impl& d = *impl_;
  if (d.planning) {
    d.synchronize("zero_grad");
    return;
  }
  // After every queued reduction into the gradients; the next reductions wait for the zeros
  // (flush_bucket orders the communication stream after the compute stream).
  d.compute_after_comm();
  Stream& compute = context_->compute_stream();
  context_->fill(compute, d.full_grads.data(), DType::kFloat32,
                 d.full_grads.size_bytes() / sizeof(float), 0.0f);
  context_->fill(compute, d.grad_shard.data(), DType::kFloat32,
                 d.grad_shard.size_bytes() / sizeof(float), 0.0f);
}

double Engine::average_across_ranks(double value) {
  Impl& d = *impl_;
  if (d.world == 1) return value;
  std::vector<float> values = {static_cast<float>(value)};
  d.comm.all_reduce(values.data(), values.data(), 1, DType::kFloat32, ReduceOp::kAvg,
                    "average_across_ranks");
  d.synchronize("averaging a value across ranks");
  return values[0];
}

}  // namespace zero
