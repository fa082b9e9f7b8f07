// Engine: registration, allocation of the flat state buffers, the boundary step, checkpoint state.
#include "zero/engine/engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine_impl.h"
#include "zero/core/error.h"
#include "zero/engine/memory_formula.h"

namespace zero {

// ---- GatheredUnit / GradientBuffer ----

GatheredUnit::GatheredUnit(GatheredUnit&& other) noexcept
    : engine_(std::exchange(other.engine_, nullptr)),
      unit_(other.unit_),
      data_(other.data_),
      layout_(other.layout_) {}

GatheredUnit& GatheredUnit::operator=(GatheredUnit&& other) noexcept {
  if (this != &other) {
    release();
    engine_ = std::exchange(other.engine_, nullptr);
    unit_ = other.unit_;
    data_ = other.data_;
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
  return {data_ + slot.offset_elements, slot.num_elements};
}

void GatheredUnit::release() {
  if (engine_ == nullptr) return;
  Engine* engine = std::exchange(engine_, nullptr);
  engine->release(unit_);
}

std::span<float> GradientBuffer::tensor(std::string_view name) const {
  const TensorSlot& slot = layout->slot(name);
  return {data + slot.offset_elements, slot.num_elements};
}

// ---- Impl helpers ----

Engine::Impl::Impl(Engine& owner, Communicator& communicator, std::unique_ptr<Optimizer> opt,
                   std::unique_ptr<LrSchedule> lr_schedule)
    : engine(owner),
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

void Engine::Impl::allocate() {
  const EngineOptions& options = engine.options_;
  Allocator& allocator = *engine.allocator_;
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
        options.stage == 3 && unit.layout.num_elements() < options.param_persistence_threshold;
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
  auto zero_fill = [](const Buffer& buffer) {
    if (buffer.size_bytes() > 0) std::memset(buffer.data(), 0, buffer.size_bytes());
  };
  zero_fill(full_grads);
  zero_fill(grad_shard);
  zero_fill(optimizer_state);
}

void Engine::Impl::initialize_values() {
  const int stage = engine.options_.stage;
  std::size_t largest = 0;
  for (const EngineUnit& unit : units) largest = std::max(largest, unit.padded);
  // Stage 3 materialises one unit at a time in a workspace buffer and keeps its shard.
  Buffer workspace;
  if (stage == 3)
    workspace = engine.allocator_->allocate(largest * sizeof(float), MemoryCategory::kWorkspace);
  if (planning) return;  // the plan records the staging buffer, nothing is computed
  for (UnitId u = 0; u < static_cast<UnitId>(units.size()); ++u) {
    EngineUnit& unit = units[u];
    float* full =
        stage == 3 ? workspace.data_as<float>() : full_params.data_as<float>() + unit.full_offset;
    std::memset(full, 0, unit.padded * sizeof(float));
    if (rank == 0) {
      if (unit.init) {
        for (const TensorSlot& slot : unit.layout.slots())
          unit.init(slot, std::span<float>(full + slot.offset_elements, slot.num_elements));
      } else {
        std::copy(unit.initial_values.begin(), unit.initial_values.end(), full);
      }
    }
    // Rank 0's values are the model (DeepSpeed broadcasts the module at initialisation).
    if (world > 1)
      comm.broadcast(full, full, unit.layout.num_elements(), DType::kFloat32, 0,
                     "init " + unit.name);
    if (stage == 3) {
      synchronize("broadcasting the initial values of unit '" + unit.name + "'");
      std::memcpy(param_shard.data_as<float>() + unit.owned_offset,
                  full + static_cast<std::size_t>(rank) * unit.shard, unit.shard * sizeof(float));
    }
    unit.initial_values.clear();
    unit.initial_values.shrink_to_fit();
    unit.init = nullptr;
  }
  synchronize("broadcasting the initial parameters");
}

// ---- Engine ----

Engine::Engine(EngineOptions options, Communicator& communicator,
               std::unique_ptr<Optimizer> optimizer, std::unique_ptr<LrSchedule> schedule,
               Allocator* allocator)
    : options_(std::move(options)), loss_scaler_(options_.fp16) {
  validate(options_);
  ZERO_CHECK(optimizer != nullptr, "the engine needs an optimizer");
  if (allocator == nullptr) {
    owned_ledger_ = std::make_unique<MemoryLedger>();
    owned_allocator_ = make_allocator(MemorySpace::kDevice, *owned_ledger_);
    allocator_ = owned_allocator_.get();
  } else {
    allocator_ = allocator;
  }
  ledger_ = &allocator_->ledger();
  impl_ = std::make_unique<Impl>(*this, communicator, std::move(optimizer), std::move(schedule));
  impl_->planning = allocator_->planning();
  state_.loss_scaler = loss_scaler_.state();
}

Engine::~Engine() {
  try {
    impl_->comm.synchronize();
  } catch (...) {
    // A failed collective was reported to the caller that waited for it.
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
  return GatheredUnit(this, unit, data, &d.units[unit].layout);
}

void Engine::release(UnitId unit) { impl_->release(unit); }

GradientBuffer Engine::grads(UnitId unit) {
  initialize();
  Impl& d = *impl_;
  ZERO_CHECK(unit >= 0 && unit < static_cast<UnitId>(d.units.size()), "grads: no unit #", unit);
  EngineUnit& u = d.units[unit];
  ZERO_CHECK(!u.reduced, "grads('", u.name, "') after reduce_grads('", u.name,
             "') in the same micro-step");
  if (options_.stage <= 1) return {d.full_grads_of(unit), &u.layout};
  if (!u.grad_buffer) {
    u.grad_buffer = std::make_shared<Buffer>(
        allocator_->allocate(u.padded * sizeof(float), MemoryCategory::kGrads));
    if (!d.planning) std::memset(u.grad_buffer->data(), 0, u.padded * sizeof(float));
  }
  return {u.grad_buffer->data_as<float>(), &u.layout};
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
  d.synchronize("zero_grad");
  if (d.planning) return;
  if (d.full_grads.size_bytes() > 0) std::memset(d.full_grads.data(), 0, d.full_grads.size_bytes());
  if (d.grad_shard.size_bytes() > 0) std::memset(d.grad_shard.data(), 0, d.grad_shard.size_bytes());
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
