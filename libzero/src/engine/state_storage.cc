// StateStorage: the flat state buffers, their swap regions and the units' views into them.
//
// Units are views at their offsets into one buffer per kind of state. Full buffers (stages 0-2)
// hold Σ P_u; owned buffers hold each unit's owned part (P_u at stage 0, S_u otherwise) back to
// back, so a sub-group of whole units is one contiguous range of every owned buffer and one swap
// region per state.
#include "state_storage.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "swap_io.h"
#include "zero/core/error.h"

namespace zero {

namespace {

// Element `index` of a buffer of `dtype`.
void* element(const Buffer& buffer, DType dtype, std::size_t index) {
  return static_cast<char*>(buffer.data()) + index * size_of(dtype);
}

// A plan's swap store: records each region under the nvme space of the ledger, moves nothing.
class PlanningSwapStore final : public SwapStore {
 public:
  explicit PlanningSwapStore(MemoryLedger& ledger) : ledger_(ledger) {}
  ~PlanningSwapStore() override {
    for (const auto& [bytes, category] : regions_)
      ledger_.record_free(MemorySpace::kNvme, category, bytes);
  }
  int add_region(std::string, std::size_t bytes, MemoryCategory category) override {
    ledger_.record_allocation(MemorySpace::kNvme, category, bytes);
    regions_.emplace_back(bytes, category);
    return static_cast<int>(regions_.size() - 1);
  }
  SwapTicket write(int, const void*) override { return {}; }
  SwapTicket read(int, void*) override { return {}; }
  SwapTicket read_range(int, std::size_t, std::size_t, void*) override { return {}; }
  void wait(SwapTicket) override {}
  void wait_all() override {}
  std::size_t io_alignment() const override { return 4096; }
  std::size_t padded_bytes(int region) const override {
    return round_up(regions_.at(static_cast<std::size_t>(region)).first, io_alignment());
  }
  const std::filesystem::path& directory() const override { return directory_; }

 private:
  MemoryLedger& ledger_;
  std::vector<std::pair<std::size_t, MemoryCategory>> regions_;
  std::filesystem::path directory_;
};

}  // namespace

StateStorage::StateStorage(StateStorageSetup setup) : setup_(std::move(setup)) {}

void StateStorage::set_swap_store_factory(SwapStoreFactory factory) {
  ZERO_CHECK(!allocated_, "set_swap_store_factory() after the state was allocated: call it first");
  swap_factory_ = std::move(factory);
}

const StateStorage::Placement& StateStorage::unit(UnitId u) const {
  ZERO_CHECK(u >= 0 && static_cast<std::size_t>(u) < units_.size(), "state storage: no unit #", u,
             " (", units_.size(), " placed)");
  return units_[static_cast<std::size_t>(u)];
}

const std::string& StateStorage::unit_name(UnitId u) const {
  return names_.at(static_cast<std::size_t>(u));
}

ShardChunk StateStorage::shard_chunk(UnitId u, float* params, const float* grads,
                                     float* state) const {
  const std::size_t count = unit(u).owned_count;
  return shard_chunk(u, 0, count, params, grads, state, count);
}

ShardChunk StateStorage::shard_chunk(UnitId u, std::size_t begin, std::size_t count, float* params,
                                     const float* grads, float* state,
                                     std::size_t state_stride) const {
  const Placement& at = unit(u);
  ZERO_CHECK(begin + count <= at.owned_count, "state storage: unit '", unit_name(u), "' owns ",
             at.owned_count, " elements, not [", begin, ", ", begin + count, ")");
  ShardChunk chunk;
  chunk.params = params;
  chunk.grads = grads;
  chunk.state = state;
  chunk.num_elements = count;
  chunk.state_stride_elements = state_stride;
  const std::size_t first = owned_range(u).begin + begin;
  const ElementRange owned{first, first + count};
  const std::vector<ElementRange>& tensors = tensors_[static_cast<std::size_t>(u)];
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    const ElementRange piece = intersect(tensors[t], owned);
    if (piece.empty()) continue;
    chunk.segments.push_back(
        {piece.begin - owned.begin, piece.size(), at.first_tensor + static_cast<int>(t)});
  }
  return chunk;
}

std::size_t StateStorage::group_at(std::size_t element) const {
  const auto after = std::upper_bound(
      sub_groups_.begin(), sub_groups_.end(), element,
      [](std::size_t value, const SubGroup& group) { return value < group.owned_offset; });
  ZERO_CHECK(after != sub_groups_.begin() && element < owned_total_,
             "state storage: no sub-group holds owned element ", element);
  return static_cast<std::size_t>(after - sub_groups_.begin()) - 1;
}

ElementRange StateStorage::owned_range(UnitId u) const {
  const Placement& unit = this->unit(u);
  if (!setup_.policy.partitioned) return {0, unit.padded};
  const std::size_t own = static_cast<std::size_t>(setup_.rank) * unit.shard;
  return {own, own + unit.shard};
}

void StateStorage::allocate(const std::vector<UnitShape>& units) {
  ZERO_CHECK(!allocated_, "the engine's state is allocated once");
  ZERO_CHECK(!units.empty(), "the engine's state needs at least one unit");
  allocated_ = true;
  place(units);
  allocate_buffers();
  create_swap_stores(units);
  if (!setup_.context.planning()) zero_fill();
}

void StateStorage::place(const std::vector<UnitShape>& units) {
  const StatePolicy& policy = setup_.policy;
  const auto world = static_cast<std::size_t>(setup_.world);
  std::vector<std::size_t> sizes;
  for (const UnitShape& shape : units) sizes.push_back(shape.elements);
  swapped_params_ = swapped_param_units(setup_.options, sizes, setup_.world);
  std::vector<std::size_t> owned_counts;
  for (std::size_t i = 0; i < units.size(); ++i) {
    ZERO_CHECK(units[i].padded % world == 0, "unit '", units[i].name, "': ", units[i].padded,
               " padded elements do not split into ", world, " shards");
    Placement unit;
    unit.padded = units[i].padded;
    unit.shard = unit.padded / world;
    unit.owned_count = policy.partitioned ? unit.shard : unit.padded;
    unit.full_offset = full_total_;
    unit.owned_offset = owned_total_;
    unit.param_offset = param_total_;
    unit.first_tensor = num_tensors_;
    full_total_ += unit.padded;
    owned_total_ += unit.owned_count;
    shard_total_ += unit.shard;
    if (!swapped_params_[i]) param_total_ += unit.shard;
    num_tensors_ += static_cast<int>(units[i].tensors.size());
    owned_counts.push_back(unit.owned_count);
    units_.push_back(unit);
    names_.push_back(units[i].name);
    tensors_.push_back(units[i].tensors);
  }
  if (policy.host_step) {
    sub_groups_ = optimizer_sub_groups(owned_counts, setup_.options.sub_group_size);
    groups_of_.assign(units_.size(), {sub_groups_.size(), 0});
    for (std::size_t g = 0; g < sub_groups_.size(); ++g) {
      pieces_.push_back(sub_group_pieces(sub_groups_[g], owned_counts));
      for (const SubGroupPiece& piece : pieces_.back()) {
        auto& [first, last] = groups_of_[piece.unit];
        first = std::min(first, g);
        last = g + 1;
      }
    }
    device_groups_ = device_sub_groups(policy, sub_groups_);
    owned_split_ = device_groups_ < sub_groups_.size() ? sub_groups_[device_groups_].owned_offset
                                                       : owned_total_;
  }
}

void StateStorage::allocate_buffers() {
  const StatePolicy& policy = setup_.policy;
  constexpr std::size_t kFloat = sizeof(float);
  const std::size_t compute = size_of(policy.compute);
  const std::size_t accumulate = size_of(policy.accumulate);
  // Each state in the space state_policy() gives it; nvme states are swap regions instead
  // (create_swap_stores).
  auto allocate_in = [&](MemorySpace space, std::size_t size_bytes, MemoryCategory category) {
    if (space == MemorySpace::kNvme) return Buffer();
    return setup_.context.allocator(space).allocate(size_bytes, category);
  };
  const MemorySpace param_space =
      policy.swap_params() ? policy.param_cache_space : policy.params_space;
  if (policy.full_params)
    full_params_ = allocate_in(param_space, full_total_ * compute, MemoryCategory::kParams);
  if (policy.full_grads)
    full_grads_ =
        allocate_in(policy.full_grads_space, full_total_ * accumulate, MemoryCategory::kGrads);
  if (policy.param_shard)
    param_shard_ = allocate_in(param_space, param_total_ * compute, MemoryCategory::kParamShard);
  const std::size_t states = setup_.states_per_element;
  if (owned_split_ > 0) {  // partial offload: the leading sub-groups' part on the device
    device_grads_ =
        allocate_in(MemorySpace::kDevice, owned_split_ * size_of(policy.grad_shard_dtype),
                    MemoryCategory::kGradShard);
    device_master_ =
        allocate_in(MemorySpace::kDevice, owned_split_ * kFloat, MemoryCategory::kMasterParams);
    device_state_ = allocate_in(MemorySpace::kDevice, states * owned_split_ * kFloat,
                                MemoryCategory::kOptimizerState);
  }
  if (policy.grad_shard)
    grad_shard_ = allocate_in(policy.grad_shard_space,
                              (shard_total_ - owned_split_) * size_of(policy.grad_shard_dtype),
                              MemoryCategory::kGradShard);
  if (policy.master_weights)
    master_params_ = allocate_in(policy.master_space, (owned_total_ - owned_split_) * kFloat,
                                 MemoryCategory::kMasterParams);
  optimizer_state_ =
      allocate_in(policy.optimizer_state_space, states * (owned_total_ - owned_split_) * kFloat,
                  MemoryCategory::kOptimizerState);
}

std::unique_ptr<SwapStore> StateStorage::make_store(const std::string& path, const char* key) {
  DeviceContext& ctx = setup_.context;
  if (ctx.planning()) return std::make_unique<PlanningSwapStore>(ctx.ledger());
  const int rank = setup_.rank;
  NvmeSwapOptions store_options;
  store_options.nvme_path = path;
  store_options.rank = rank;
  store_options.aio = setup_.options.aio;
  store_options.ledger = &ctx.ledger();
  ZERO_CHECK(swap_factory_, "engine (rank ", rank, "/", setup_.world, ") zero_optimization.", key,
             ".device is \"nvme\" but the engine has no swap store factory: build the engine "
             "with zero::make_engine (zero/factory/engine_factory.h, target zero::factory), or "
             "call engine.set_swap_store_factory(zero::make_nvme_swap_store) "
             "(zero/offload/nvme_swap_store.h, target zero::offload) before initialize()");
  try {
    std::unique_ptr<SwapStore> store = swap_factory_(store_options);
    ZERO_CHECK(store != nullptr, "the swap store factory returned no store");
    return store;
  } catch (const Error& error) {
    ZERO_THROW("engine (rank ", rank, "/", setup_.world, ") zero_optimization.", key,
               ".nvme_path '", path, "': ", error.what());
  }
}

void StateStorage::create_swap_stores(const std::vector<UnitShape>& units) {
  const StatePolicy& policy = setup_.policy;
  const EngineOptions& options = setup_.options;
  if (!policy.swap_optimizer() && !policy.swap_params()) return;
  const std::size_t states = setup_.states_per_element;
  if (policy.swap_optimizer()) {
    optimizer_swap_ = make_store(options.offload_optimizer.nvme_path, "offload_optimizer");
    for (std::size_t g = 0; g < sub_groups_.size(); ++g) {
      const std::size_t count = sub_groups_[g].num_elements;
      master_regions_.push_back(
          optimizer_swap_->add_region("master_params sub-group " + std::to_string(g),
                                      count * sizeof(float), MemoryCategory::kMasterParams));
      state_regions_.push_back(states == 0 ? -1
                                           : optimizer_swap_->add_region(
                                                 "optimizer_state sub-group " + std::to_string(g),
                                                 states * count * sizeof(float),
                                                 MemoryCategory::kOptimizerState));
    }
    // The gradient partition (ZeRO-Infinity): a region per host sub-group, in grad_swap_dtype.
    if (policy.swap_grads()) {
      grad_regions_.assign(sub_groups_.size(), -1);
      for (std::size_t g = device_groups_; g < sub_groups_.size(); ++g)
        grad_regions_[g] = optimizer_swap_->add_region(
            "grad_shard sub-group " + std::to_string(g),
            sub_groups_[g].num_elements * size_of(policy.grad_swap_dtype),
            MemoryCategory::kGradShard);
    }
  }
  if (policy.swap_params()) {
    if (optimizer_swap_ && options.offload_param.nvme_path == options.offload_optimizer.nvme_path) {
      param_store_ = optimizer_swap_.get();  // one folder per rank and path
    } else {
      param_swap_ = make_store(options.offload_param.nvme_path, "offload_param");
      param_store_ = param_swap_.get();
    }
    for (std::size_t u = 0; u < units_.size(); ++u)
      if (swapped_params_[u])
        units_[u].param_region = param_store_->add_region("param_shard " + units[u].name,
                                                          units_[u].shard * size_of(policy.compute),
                                                          MemoryCategory::kParamShard);
  }
}

void StateStorage::zero_fill() const {
  const StatePolicy& policy = setup_.policy;
  DeviceContext& ctx = setup_.context;
  auto fill = [&](const Buffer& buffer, DType dtype, MemorySpace space) {
    if (space == MemorySpace::kDevice)
      ctx.fill(ctx.compute_stream(), buffer.data(), dtype, buffer.size_bytes() / size_of(dtype),
               0.0f);
    else if (buffer.data() != nullptr)  // host memory: zeroed here (+0 is all-zero bits)
      std::memset(buffer.data(), 0, buffer.size_bytes());
  };
  fill(full_grads_, policy.accumulate, policy.full_grads_space);
  fill(grad_shard_, policy.grad_shard_dtype, policy.grad_shard_space);
  fill(optimizer_state_, DType::kFloat32, policy.optimizer_state_space);
  fill(device_grads_, policy.grad_shard_dtype, MemorySpace::kDevice);
  fill(device_state_, DType::kFloat32, MemorySpace::kDevice);
}

void StateStorage::zero_device_grads(Stream& stream) const {
  const StatePolicy& policy = setup_.policy;
  DeviceContext& ctx = setup_.context;
  const DType accumulate = policy.accumulate;
  ctx.fill(stream, full_grads_.data(), accumulate, full_grads_.size_bytes() / size_of(accumulate),
           0.0f);
  if (policy.grad_shard_space == MemorySpace::kDevice)
    ctx.fill(stream, grad_shard_.data(), accumulate, grad_shard_.size_bytes() / size_of(accumulate),
             0.0f);
  const DType device_grads = policy.grad_shard_dtype;  // partial offload's device part
  ctx.fill(stream, device_grads_.data(), device_grads,
           device_grads_.size_bytes() / size_of(device_grads), 0.0f);
}

float* StateStorage::owned_params(UnitId u) const {
  const Placement& unit = this->unit(u);
  if (setup_.policy.master_weights) {  // null where the master is in swap regions (nvme)
    if (on_device(u)) return device_master_.data_as<float>() + unit.owned_offset;
    if (master_params_.data() == nullptr) return nullptr;
    return master_params_.data_as<float>() + (unit.owned_offset - owned_split_);
  }
  return static_cast<float*>(owned_compute_params(u));
}

const float* StateStorage::group_master(std::size_t g) const {
  const SubGroup& group = sub_groups_.at(g);
  const auto first = static_cast<UnitId>(group.first_unit);
  const float* master = owned_params(first);
  return master == nullptr ? nullptr : master + group.first_unit_offset;
}

float* StateStorage::owned_state(UnitId u) const {
  const Placement& unit = this->unit(u);
  const std::size_t states = setup_.states_per_element;
  if (on_device(u)) return device_state_.data_as<float>() + states * unit.owned_offset;
  if (optimizer_state_.data() == nullptr) return nullptr;
  return optimizer_state_.data_as<float>() + states * (unit.owned_offset - owned_split_);
}

void* StateStorage::owned_compute_params(UnitId u) const {
  const StatePolicy& policy = setup_.policy;
  const Placement& unit = this->unit(u);
  if (policy.param_shard) {  // null for a shard in a swap region (offload_param nvme)
    if (unit.param_region >= 0 || param_shard_.data() == nullptr) return nullptr;
    return element(param_shard_, policy.compute, unit.param_offset);
  }
  return element(full_params_, policy.compute, unit.full_offset + owned_range(u).begin);
}

void* StateStorage::owned_grads(UnitId u) const {
  const StatePolicy& policy = setup_.policy;
  const Placement& unit = this->unit(u);
  if (policy.grad_shard) {
    if (policy.swap_grads()) return nullptr;  // in swap regions
    if (on_device(u)) return element(device_grads_, policy.grad_shard_dtype, unit.owned_offset);
    return element(grad_shard_, policy.grad_shard_dtype, unit.owned_offset - owned_split_);
  }
  return element(full_grads_, policy.accumulate, unit.full_offset + owned_range(u).begin);
}

void* StateStorage::full_grads(UnitId u) const {
  return element(full_grads_, setup_.policy.accumulate, unit(u).full_offset);
}

void* StateStorage::full_params(UnitId u) const {
  return element(full_params_, setup_.policy.compute, unit(u).full_offset);
}

MemorySpace StateStorage::shard_space(UnitId u) const {
  const StatePolicy& policy = setup_.policy;
  if (policy.swap_optimizer()) return policy.staging_space;  // the host copy of the regions
  if (on_device(u)) return MemorySpace::kDevice;             // partial offload's device part
  const MemorySpace master = policy.master_weights  ? policy.master_space
                             : policy.swap_params() ? policy.param_cache_space
                                                    : policy.params_space;
  const DeviceContext& ctx = setup_.context;
  const bool host =
      ctx.host_addressable(master) && ctx.host_addressable(policy.optimizer_state_space);
  return host ? master : MemorySpace::kDevice;
}

SwapTraffic StateStorage::swap_traffic() const {
  SwapTraffic traffic;
  if (optimizer_swap_) traffic += optimizer_swap_->traffic();
  if (param_swap_) traffic += param_swap_->traffic();
  return traffic;
}

}  // namespace zero
