// Engine::step (overflow check, global norm, clipping, optimizer and schedule), the all-reduce of
// host values through the reducer's bucket, and the checkpoint state accessors (with nvme: the
// host copy of the regions shard_states() spans, and the one-sub-group-at-a-time visit that
// checkpoint saves stream from).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <utility>

#include "engine_impl.h"
#include "zero/core/error.h"

namespace zero {
bool Engine::step() {
  initialize();
  Impl& d = *impl_;
  d.offload.settle_step();
  ZERO_CHECK(d.reducer.reduced_units() == 0,
             "step() in the middle of a micro-step: ", d.reducer.reduced_units(), " of ",
             d.units.size(), " units have called reduce_grads()");
  TrainingState& state = d.training;
  const int accumulation = d.options.gradient_accumulation_steps;
  const std::int64_t boundary = d.micro_steps / accumulation;
  if (d.micro_steps == 0 || d.micro_steps % accumulation != 0 || boundary == state.global_steps)
    return false;
  ++state.global_steps;
  const StatePolicy& policy = d.policy;

  // Global squared norm over owned gradients: per shard on the compute stream once the
  // reductions have landed, summed on the host (the overflow flag and the norm are host values),
  // all-reduced (stage 0 holds replicas). A shard with an inf/NaN element contributes +inf, so
  // the all-reduced sum carries every rank's overflow flag. A plan runs this same path on no
  // data: its squares are zeros (the planning context's, and the host partition's untouched), so
  // its norm is finite and it records the allocations and collectives of a taken step.
  Stream& compute = d.ctx.compute_stream();
  std::vector<SquaresResult> partial(d.units.size());
  if (policy.host_step) {  // the gradient partition is on the host
    d.host_squares(partial);
  } else {
    d.compute_after_comm();
    for (UnitId u = 0; u < static_cast<UnitId>(d.units.size()); ++u)
      d.ctx.sum_of_squares(compute, d.storage.owned_grads(u), policy.accumulate,
                           d.storage.unit(u).owned_count, &partial[u]);
    d.synchronize_compute("reducing gradients before the optimizer step");
  }
  double squares = 0.0;
  bool nonfinite = false;
  for (const SquaresResult& result : partial) {
    squares += result.sum;
    nonfinite = nonfinite || result.nonfinite;
  }
  if (nonfinite) squares = std::numeric_limits<double>::infinity();
  if (policy.partitioned && d.world > 1) {
    float total = static_cast<float>(squares);
    d.all_reduce_host_values({&total, 1}, ReduceOp::kSum, "grad norm");
    squares = total;
  }
  const double scale = d.loss_scaler.scale();
  d.overflow = !std::isfinite(squares);
  d.grad_norm = d.overflow ? squares : std::sqrt(squares) / scale;
  if (d.overflow && d.options.fp16.enabled) {
    d.loss_scaler.update(true);
    state.loss_scaler = d.loss_scaler.state();
    ++state.skipped_steps;
    zero_grad();
    return false;
  }
  ZERO_CHECK(!d.overflow, "the global gradient norm is ", squares,
             " (inf/NaN gradients) and fp16 loss scaling is off; step ", state.global_steps);

  double grad_scale = 1.0 / scale;
  if (d.options.gradient_clipping > 0) {
    const double clip = (d.grad_norm + 1e-6) / d.options.gradient_clipping;
    if (clip > 1.0) grad_scale /= clip;
  }

  OptimizerStep args;
  args.step = ++state.optimizer_steps;
  args.lr = lr();
  args.beta1 = d.schedule ? d.schedule->beta1(d.optimizer->beta1()) : d.optimizer->beta1();
  args.grad_scale = grad_scale;
  args.num_tensors = d.storage.num_tensors();
  const bool partitioned = policy.partitioned && d.world > 1;
  args.all_reduce_sum = [&d, partitioned](float* values, std::size_t count) {
    if (!partitioned || count == 0) return;
    d.comm.all_reduce(values, values, count, DType::kFloat32, ReduceOp::kSum, "optimizer stats");
    d.synchronize("all-reducing optimizer statistics");
  };
  bool wrote_params = false;
  if (policy.host_step)  // offload_optimizer: on the host, sub-group by sub-group, the compute
    d.host_step(args);   // parameters refreshed behind it (engine_offload.cc)
  else
    wrote_params = d.device_step(args);
  if (d.schedule) d.schedule->step();
  d.loss_scaler.update(false);
  state.loss_scaler = d.loss_scaler.state();
  if (d.schedule) state.scheduler_last_batch_iteration = d.schedule->last_batch_iteration();

  d.refresh_compute_params(wrote_params);
  zero_grad();
  return true;
}

bool Engine::Impl::device_step(const OptimizerStep& args) {
  Stream& compute = ctx.compute_stream();
  // The optimizer writes the 16-bit compute copy in its own pass (no separate refresh).
  const bool write_params = policy.master_weights && !policy.offload_params();
  const auto chunk_of = [&](UnitId u, const float* grads) {
    ShardChunk chunk =
        storage.shard_chunk(u, storage.owned_params(u), grads, storage.owned_state(u));
    if (write_params) {
      chunk.params_16bit = storage.owned_compute_params(u);
      chunk.params_16bit_dtype = policy.compute;
    }
    return chunk;
  };
  std::vector<ShardChunk> chunks;
  chunks.reserve(units.size());
  if (policy.fp32_grads_for_step()) {
    for (UnitId u = 0; u < static_cast<UnitId>(units.size()); ++u)
      chunks.push_back(chunk_of(u, static_cast<const float*>(storage.owned_grads(u))));
    optimizer->step_on(ctx, compute, chunks, args);
  } else {
    // 16-bit accumulated gradients: the optimizer reads them in fp32 (DeepSpeed converts the
    // partition to fp32 for the step), one unit at a time through a workspace of the largest
    // unit's owned elements: converted, stepped, then the next unit (the compute stream orders
    // each conversion after the previous unit's step). The whole partition in fp32 would add 4
    // bytes a parameter to the step's peak. The optimizers are per element or per tensor (a
    // tensor lies in one unit), so unit by unit gives the numbers of one call over every unit.
    std::size_t largest = 0;
    for (UnitId u = 0; u < static_cast<UnitId>(units.size()); ++u)
      largest = std::max(largest, storage.unit(u).owned_count);
    const Buffer fp32_grads = ctx.allocator(MemorySpace::kDevice)
                                  .allocate(largest * sizeof(float), MemoryCategory::kWorkspace);
    for (UnitId u = 0; u < static_cast<UnitId>(units.size()); ++u) {
      ctx.convert(compute, storage.owned_grads(u), policy.accumulate, fp32_grads.data(),
                  DType::kFloat32, storage.unit(u).owned_count);
      chunks.assign(1, chunk_of(u, fp32_grads.data_as<const float>()));
      optimizer->step_on(ctx, compute, chunks, args);
    }
  }
  // The optimizer may issue collectives of its own (LAMB's trust ratios through all_reduce_sum):
  // they must be issued before the post-step gathers, in the same order on every rank.
  synchronize_compute("the optimizer step");
  return write_params;
}

void Engine::wait_for_step() {
  initialize();
  impl_->offload.settle_step();
}

void Engine::refresh_params() {
  initialize();
  impl_->offload.settle_step();
  impl_->refresh_compute_params();
}

void Engine::Impl::refresh_compute_params(bool step_wrote_params) {
  Impl& d = *this;
  // 16-bit training: the owned compute parameters from the (updated or loaded) fp32 master.
  // offload_optimizer: the host step refreshed them sub-group by sub-group on the copy stream
  // (a load refreshes them here), and the gathers follow the copy stream.
  if (d.policy.host_step) {
    d.write_back_checkpoint_view();  // spans written for a load reach the regions first
    if (!d.offload.take_params_refreshed()) d.offload.params_from_master();
    // An overlapped step: each gather waits for its unit's refresh instead
    // (HostOffload::param_shard).
    if (!d.planning && !d.offload.step_in_flight()) {
      d.params_ready = d.ctx.copy_stream().record();
      d.comm.stream().wait(d.params_ready);
    }
  } else if (!step_wrote_params) {
    d.params_from_master();
  }
  if (!d.planning) d.comm_after_compute();  // the updated (or loaded) shards come first
  if (d.policy.gather_after_step) d.all_gather_params();
  if (d.policy.param_shard) d.gatherer.regather_persistent(d.offload.step_in_flight());
}

std::vector<ShardState> Engine::shard_states() {
  initialize();
  Impl& d = *impl_;
  d.offload.settle_step();
  d.synchronize("reading shard state");
  d.synchronize_compute("reading shard state");
  // nvme: the regions are read into a host copy, written back by the next step() or
  // refresh_params() (so spans written for a load reach the regions).
  if (d.policy.swap_optimizer()) d.read_checkpoint_view();
  if (d.policy.host_step) {
    try {
      d.ctx.copy_stream().synchronize();  // the step's copies read the master
    } catch (const Error& error) {
      ZERO_THROW("reading shard state: ", error.what());
    }
  }
  const std::size_t owned_total = d.storage.owned_total();
  std::vector<ShardState> shards;
  const std::vector<std::string> names = d.optimizer->state_names();
  const auto states = static_cast<std::size_t>(d.optimizer->states_per_element());
  for (UnitId u = 0; u < static_cast<UnitId>(d.units.size()); ++u) {
    const EngineUnit& unit = d.units[u];
    const StateStorage::Placement& at = d.storage.unit(u);
    const ElementRange owned = d.storage.owned_range(u);
    const ElementRange range = intersect(owned, {0, unit.layout.num_elements()});
    ShardState shard;
    shard.unit = unit.name;
    shard.range = range;
    const std::size_t skip = range.begin - owned.begin;
    float* master =
        d.policy.swap_optimizer() ? d.view_master() + at.owned_offset : d.storage.owned_params(u);
    float* state = d.policy.swap_optimizer()
                       ? d.view_master() + owned_total + states * at.owned_offset
                       : d.storage.owned_state(u);
    shard.params = {master + skip, range.size()};
    for (std::size_t k = 0; k < states; ++k)
      shard.optimizer_state.emplace_back(
          names.at(k), std::span<float>(state + k * at.owned_count + skip, range.size()));
    shard.space = d.storage.shard_space(u);
    shards.push_back(std::move(shard));
  }
  return shards;
}

namespace {

// A shard state of unit `u` over `held` (the owned elements its spans cover, from their start;
// its real elements only: the range) at `master` and `state` (state k at k × stride).
ShardState shard_over(const Engine::Impl& d, UnitId u, ElementRange held, float* master,
                      float* state, std::size_t stride, const std::vector<std::string>& names) {
  const EngineUnit& unit = d.units[u];
  const ElementRange range = intersect(held, {0, unit.layout.num_elements()});
  const std::size_t skip = range.empty() ? 0 : range.begin - held.begin;
  ShardState shard;
  shard.unit = unit.name;
  shard.range = range;
  shard.params = {master + skip, range.size()};
  for (std::size_t k = 0; k < names.size(); ++k)
    shard.optimizer_state.emplace_back(names.at(k),
                                       std::span<float>(state + k * stride + skip, range.size()));
  shard.space = d.policy.staging_space;  // a slot or a host copy: host memory
  return shard;
}

// A sub-group piece's shard in its group's swap slot (laid out piece by piece).
ShardState slot_shard(const Engine::Impl& d, const SubGroupPiece& piece, const SwapSlot& slot,
                      const std::vector<std::string>& names) {
  const auto u = static_cast<UnitId>(piece.unit);
  const std::size_t first = d.storage.owned_range(u).begin + piece.unit_offset;
  return shard_over(d, u, {first, first + piece.num_elements}, slot.master + piece.group_offset,
                    slot.state + names.size() * piece.group_offset, piece.num_elements, names);
}

// A piece's optimizer states between a slot (k × piece elements at states × group_offset) and
// its unit's states laid out k × owned_count at `unit_state`.
void copy_piece_states(const SubGroupPiece& piece, std::size_t states, std::size_t unit_owned,
                       float* slot_state, float* unit_state, bool into_slot) {
  for (std::size_t k = 0; k < states; ++k) {
    float* in_slot = slot_state + states * piece.group_offset + k * piece.num_elements;
    float* in_unit = unit_state + k * unit_owned + piece.unit_offset;
    if (into_slot)
      std::memcpy(in_slot, in_unit, piece.num_elements * sizeof(float));
    else
      std::memcpy(in_unit, in_slot, piece.num_elements * sizeof(float));
  }
}

}  // namespace

void Engine::Impl::drain_for_shard_states() {
  offload.settle_step();
  synchronize("reading shard state");
  synchronize_compute("reading shard state");
  try {
    ctx.copy_stream().synchronize();  // the step's copies read its slots
  } catch (const Error& error) {
    ZERO_THROW("reading shard state: ", error.what());
  }
}

void Engine::visit_shard_states(const std::function<void(const ShardState&)>& visit) {
  initialize();
  Impl& d = *impl_;
  // Resident states, or regions a load has already read into the host copy: its spans.
  if (!d.policy.swap_optimizer() || d.checkpoint_view.allocated()) {
    for (const ShardState& shard : shard_states()) visit(shard);
    return;
  }
  d.drain_for_shard_states();
  SwapStore* swap = d.storage.optimizer_swap();
  const std::vector<SubGroup>& groups = d.storage.sub_groups();
  SwapSlot slot = d.offload.make_swap_slot();  // one sub-group's master and state
  const auto states = static_cast<std::size_t>(d.optimizer->states_per_element());
  // A unit split over sub-groups is handed whole (the shard files hold each state of a unit in
  // one run), gathered from its groups' slots into a buffer of its own master and states.
  std::size_t largest_split = 0;
  for (UnitId u = 0; u < static_cast<UnitId>(d.units.size()); ++u)
    if (d.storage.groups_of(u).second - d.storage.groups_of(u).first > 1)
      largest_split = std::max(largest_split, d.storage.unit(u).owned_count);
  auto split_buffer = [&](std::size_t elements) {
    return d.ctx.allocator(d.policy.staging_space)
        .allocate((1 + states) * elements * sizeof(float), MemoryCategory::kWorkspace);
  };
  if (d.planning) {
    if (largest_split > 0) split_buffer(largest_split);
    return;
  }
  const std::vector<std::string> names = d.optimizer->state_names();
  Buffer unit_states;  // the split unit being gathered: master, then states k × owned_count
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const SwapTicket master = swap->read(d.storage.master_region(g), slot.master);
    const SwapTicket state = d.storage.state_region(g) >= 0
                                 ? swap->read(d.storage.state_region(g), slot.state)
                                 : SwapTicket{};
    swap->wait(master);
    swap->wait(state);
    for (const SubGroupPiece& piece : d.storage.pieces(g)) {
      const auto u = static_cast<UnitId>(piece.unit);
      const std::size_t owned = d.storage.unit(u).owned_count;
      if (piece.whole(owned)) {
        visit(slot_shard(d, piece, slot, names));
        continue;
      }
      if (piece.unit_offset == 0) unit_states = split_buffer(owned);
      float* unit_master = unit_states.data_as<float>();
      std::memcpy(unit_master + piece.unit_offset, slot.master + piece.group_offset,
                  piece.num_elements * sizeof(float));
      copy_piece_states(piece, states, owned, slot.state, unit_master + owned, false);
      if (piece.unit_offset + piece.num_elements < owned) continue;
      visit(shard_over(d, u, d.storage.owned_range(u), unit_master, unit_master + owned, owned,
                       names));
      unit_states = Buffer();
    }
  }
}

void Engine::fill_shard_states(const std::function<void(ShardState&)>& fill, ShardFill coverage) {
  initialize();
  Impl& d = *impl_;
  if (!d.policy.swap_optimizer() || d.checkpoint_view.allocated()) {
    for (ShardState& shard : shard_states()) fill(shard);
    return;
  }
  d.drain_for_shard_states();
  SwapStore* swap = d.storage.optimizer_swap();
  const std::vector<SubGroup>& groups = d.storage.sub_groups();
  SwapSlot slot = d.offload.make_swap_slot();  // one sub-group's master and state
  if (d.planning) return;
  const std::vector<std::string> names = d.optimizer->state_names();
  const std::size_t states = names.size();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const SubGroup& group = groups[g];
    const bool has_state = d.storage.state_region(g) >= 0;
    if (coverage == ShardFill::kEveryElement) {
      std::memset(slot.master, 0, group.num_elements * sizeof(float));
      if (has_state) std::memset(slot.state, 0, states * group.num_elements * sizeof(float));
    } else {
      const SwapTicket master = swap->read(d.storage.master_region(g), slot.master);
      const SwapTicket state =
          has_state ? swap->read(d.storage.state_region(g), slot.state) : SwapTicket{};
      swap->wait(master);
      swap->wait(state);
    }
    for (const SubGroupPiece& piece : d.storage.pieces(g)) {  // a split unit: piece by piece
      ShardState shard = slot_shard(d, piece, slot, names);
      fill(shard);
    }
    const SwapTicket master = swap->write(d.storage.master_region(g), slot.master);
    const SwapTicket state =
        has_state ? swap->write(d.storage.state_region(g), slot.state) : SwapTicket{};
    swap->wait(master);
    swap->wait(state);
  }
}

void Engine::set_shard_piece_elements(std::size_t elements) {
  ZERO_CHECK(elements > 0, "set_shard_piece_elements: a piece needs at least one element");
  impl_->shard_piece_elements = elements;
}

namespace {

// Waits for the staging copies on `stream`; errors name what was being done.
void await_staging(Stream& stream, const char* what) {
  try {
    stream.synchronize();
  } catch (const Error& error) {
    ZERO_THROW(what, ": ", error.what());
  }
}

}  // namespace

void Engine::read_shard_values(
    std::span<const float> values, MemorySpace space,
    const std::function<void(std::size_t, std::span<const float>)>& use) {
  DeviceContext& ctx = impl_->ctx;
  if (ctx.host_addressable(space)) {
    use(0, values);
    return;
  }
  if (values.empty()) return;
  const std::size_t piece = std::min(values.size(), impl_->shard_piece_elements);
  Buffer staging = ctx.allocator(MemorySpace::kHostPinned)
                       .allocate(piece * sizeof(float), MemoryCategory::kWorkspace);
  if (ctx.planning()) return;
  Stream& stream = ctx.copy_stream();
  const float* host = staging.data_as<float>();
  for (std::size_t offset = 0; offset < values.size(); offset += piece) {
    const std::size_t count = std::min(piece, values.size() - offset);
    ctx.copy(stream, values.data() + offset, staging.data(), count * sizeof(float));
    await_staging(stream, "reading shard state from device memory");
    use(offset, {host, count});
  }
}

void Engine::write_shard_values(std::span<float> values, MemorySpace space, bool current,
                                const std::function<void(std::size_t, std::span<float>)>& produce) {
  DeviceContext& ctx = impl_->ctx;
  if (ctx.host_addressable(space)) {
    produce(0, values);
    return;
  }
  if (values.empty()) return;
  const std::size_t piece = std::min(values.size(), impl_->shard_piece_elements);
  Buffer staging = ctx.allocator(MemorySpace::kHostPinned)
                       .allocate(piece * sizeof(float), MemoryCategory::kWorkspace);
  if (ctx.planning()) return;
  Stream& stream = ctx.copy_stream();
  float* host = staging.data_as<float>();
  for (std::size_t offset = 0; offset < values.size(); offset += piece) {
    const std::size_t count = std::min(piece, values.size() - offset);
    if (current) {
      ctx.copy(stream, values.data() + offset, host, count * sizeof(float));
      await_staging(stream, "reading shard state from device memory");
    }
    produce(offset, {host, count});
    ctx.copy(stream, host, values.data() + offset, count * sizeof(float));
    await_staging(stream, "writing shard state to device memory");
  }
}

std::vector<std::string> Engine::optimizer_state_names() const {
  return impl_->optimizer->state_names();
}

void Engine::Impl::read_checkpoint_view() {
  SwapStore* swap = storage.optimizer_swap();
  const std::vector<SubGroup>& groups = storage.sub_groups();
  if (checkpoint_view.allocated()) return;
  const std::size_t owned_total = storage.owned_total();
  const auto states = static_cast<std::size_t>(optimizer->states_per_element());
  checkpoint_view =
      ctx.allocator(policy.staging_space)
          .allocate((1 + states) * owned_total * sizeof(float), MemoryCategory::kWorkspace);
  SwapSlot slot = offload.make_swap_slot();
  if (planning) return;
  float* master = view_master();
  float* state = master + owned_total;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const SubGroup& group = groups[g];
    swap->wait(swap->read(storage.master_region(g), slot.master));
    std::memcpy(master + group.owned_offset, slot.master, group.num_elements * sizeof(float));
    if (storage.state_region(g) < 0) continue;
    swap->wait(swap->read(storage.state_region(g), slot.state));
    for (const SubGroupPiece& piece : storage.pieces(g)) {
      const StateStorage::Placement& at = storage.unit(static_cast<UnitId>(piece.unit));
      copy_piece_states(piece, states, at.owned_count, slot.state, state + states * at.owned_offset,
                        false);
    }
  }
}

void Engine::Impl::write_back_checkpoint_view() {
  SwapStore* swap = storage.optimizer_swap();
  const std::vector<SubGroup>& groups = storage.sub_groups();
  if (!checkpoint_view.allocated()) return;
  // Its slot is not held beside the gradient windows squares() kept: those are written out.
  offload.spill_windows();
  if (!planning) {
    const std::size_t owned_total = storage.owned_total();
    const auto states = static_cast<std::size_t>(optimizer->states_per_element());
    SwapSlot slot = offload.make_swap_slot();
    float* master = view_master();
    float* state = master + owned_total;
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const SubGroup& group = groups[g];
      std::memcpy(slot.master, master + group.owned_offset, group.num_elements * sizeof(float));
      const SwapTicket master_write = swap->write(storage.master_region(g), slot.master);
      SwapTicket state_write;
      if (storage.state_region(g) >= 0) {
        for (const SubGroupPiece& piece : storage.pieces(g)) {
          const StateStorage::Placement& at = storage.unit(static_cast<UnitId>(piece.unit));
          copy_piece_states(piece, states, at.owned_count, slot.state,
                            state + states * at.owned_offset, true);
        }
        state_write = swap->write(storage.state_region(g), slot.state);
      }
      swap->wait(master_write);
      swap->wait(state_write);
    }
  }
  checkpoint_view.reset();
}

std::size_t Engine::shard_piece_elements() const { return impl_->shard_piece_elements; }

TrainingState Engine::training_state() const { return impl_->training; }

void Engine::set_training_state(const TrainingState& state) {
  Impl& d = *impl_;
  d.offload.settle_step();
  d.training = state;
  d.loss_scaler.set_state(state.loss_scaler);
  if (d.schedule) d.schedule->set_last_batch_iteration(state.scheduler_last_batch_iteration);
  d.micro_steps = state.global_steps * d.options.gradient_accumulation_steps;
}

// ---- all-reduces of host values (the grad norm, average_across_ranks) ----

void Engine::Impl::all_reduce_host_values(std::span<float> values, ReduceOp op,
                                          const std::string& label) {
  if (skip_collectives) return;  // a plan on a communicator that moves data: nothing to reduce
  const std::size_t bytes = values.size_bytes();
  const Buffer& bucket = reducer.bucket();
  ZERO_CHECK(bucket.size_bytes() >= bytes, "engine: ", label, " needs ", bytes,
             " bytes of the reduce bucket, which has ", bucket.size_bytes());
  // The bucket is packed only inside a flush on the communication stream: once the compute
  // stream has waited for that stream's queued work it is free until the next flush.
  Stream& compute = ctx.compute_stream();
  compute_after_comm();
  ctx.copy(compute, values.data(), bucket.data(), bytes);
  comm_after_compute();
  comm.all_reduce(bucket.data(), bucket.data(), values.size(), DType::kFloat32, op, label);
  compute_after_comm();
  ctx.copy(compute, bucket.data(), values.data(), bytes);
  synchronize_compute("all-reducing " + label);  // `values` is host memory the copy writes
}

double Engine::average_across_ranks(double value) {
  Impl& d = *impl_;
  if (d.world == 1) return value;
  float average = static_cast<float>(value);
  d.all_reduce_host_values({&average, 1}, ReduceOp::kAvg, "average_across_ranks");
  return average;
}

}  // namespace zero
