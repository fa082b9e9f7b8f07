// Gradient reduction: units' gradients packed into buckets of reduce_bucket_size elements and
// reduced on the communication stream while the model's backward goes on.
//
// Stage 0 packs flat (all-reduce). Stages 1-3 pack rank-blocked: the bucket holds W blocks, block
// r the pieces of every queued unit that rank r owns, so one reduce-scatter hands each rank its
// shard of every unit in the bucket. Packing (with the pre-scale), the collective and unpacking
// (with the post-scale, into the owned gradients) are device operations in order on the
// communication stream, after an event of the compute stream (the gradients are written and
// zeroed there), so one bucket buffer serves every flush without host waits.
#include <algorithm>
#include <string>

#include "engine_impl.h"
#include "zero/core/error.h"
#include "zero/engine/memory_formula.h"

namespace zero {

void Engine::Impl::enqueue_reduction(UnitId u) {
  EngineUnit& unit = units[u];
  std::shared_ptr<Buffer> source = std::move(unit.grad_buffer);
  // Stages 0 and 1 accumulate full gradients locally and reduce once, at the boundary.
  if (policy.full_grads && !at_boundary_micro_step()) return;
  const bool blocked = policy.partitioned;
  const std::size_t total = blocked ? unit.shard : unit.layout.num_elements();
  const std::size_t capacity =
      blocked ? bucket_capacity / static_cast<std::size_t>(world) : bucket_capacity;
  std::size_t begin = 0;
  while (begin < total) {
    if (pending_elements == capacity) flush_bucket();
    const std::size_t take = std::min(capacity - pending_elements, total - begin);
    pending.push_back({u, begin, begin + take, source});
    pending_elements += take;
    begin += take;
  }
}

void Engine::Impl::flush_bucket() {
  if (pending.empty()) return;
  const EngineOptions& options = engine.options_;
  std::vector<BucketItem> items = std::move(pending);
  pending.clear();
  const std::size_t block = pending_elements;
  pending_elements = 0;
  allocate_gradient_windows();  // swapped gradients: from the step's first reduction on
  if (skip_collectives) return;

  const bool blocked = policy.partitioned;
  // Stages 2-3 add every micro-step's reduction into the grad shard; stages 0-1 reduce once.
  const bool accumulate = !policy.full_grads;
  // The bucket holds the model's gradient dtype; reduced values go into the owned gradients'
  // dtype (the host's fp32 partition with offload_optimizer).
  const DType bucket_dtype = policy.model_grads;
  const DType destination_dtype = blocked ? policy.owned_grads_dtype() : policy.accumulate;
  const std::size_t bucket_bytes = size_of(bucket_dtype);
  const auto in_bucket = [bucket_bytes](void* base, std::size_t index) {
    return static_cast<char*>(base) + index * bucket_bytes;
  };
  const auto in_destination = [&](void* base, std::size_t index) {
    return static_cast<char*>(base) + index * size_of(destination_dtype);
  };
  // DeepSpeed's allreduce_bucket: by default divide by gradient_predivide_factor before the sum
  // and multiply by predivide / W after; prescale_gradients divides by W before instead.
  const double predivide = options.gradient_predivide_factor;
  const auto pre = static_cast<float>(options.prescale_gradients ? 1.0 / world : 1.0 / predivide);
  const auto post = static_cast<float>((options.prescale_gradients ? 1.0 : predivide / world) /
                                       options.gradient_accumulation_steps);

  // The model's writes and the compute stream's zeroing of the gradients come first.
  comm_after_compute();
  Stream& stream = comm.stream();
  void* send = bucket.data();
  void* recv = receive.data();
  const int blocks = blocked ? world : 1;
  struct Piece {
    void* destination;  // owned gradients (blocked) or full gradients (flat)
    std::size_t count;
    std::size_t bucket_offset;  // within a block
    bool host;                  // into the host gradient partition (offload_optimizer)
    UnitId unit;
    std::size_t begin;  // within the unit's owned gradients
  };
  std::vector<Piece> pieces;
  std::size_t offset = 0;
  for (BucketItem& item : items) {
    const EngineUnit& unit = units[item.unit];
    // The source: a transient buffer (stages 2-3) or the full gradients, both bucket_dtype.
    void* base = item.source ? item.source->data() : full_grads_of(item.unit);
    const std::size_t count = item.end - item.begin;
    // Block r of the piece is at source + r·shard.
    for (int r = 0; r < blocks; ++r)
      ctx.scale(stream, in_bucket(base, item.begin + static_cast<std::size_t>(r) * unit.shard),
                bucket_dtype, in_bucket(send, static_cast<std::size_t>(r) * block + offset),
                bucket_dtype, count, pre);
    // Null for a swapped gradient partition: the host task finds the sub-group's window.
    void* owned = blocked ? owned_grads(item.unit) : full_grads_of(item.unit);
    pieces.push_back({owned ? in_destination(owned, item.begin) : nullptr, count, offset,
                      policy.host_step && !on_device(item.unit), item.unit, item.begin});
    offset += count;
    // Transient gradient buffers are free once packed.
    if (item.source) ctx.release_after(stream, std::move(item.source));
  }
  // Labelled with the units it carries ("grads h.5..h.3"), so a diverging rank is named by unit.
  std::string label = "grads " + units[items.front().unit].name;
  if (items.back().unit != items.front().unit) label += ".." + units[items.back().unit].name;
  void* reduced = send;
  if (!blocked) {
    comm.all_reduce(send, send, block, bucket_dtype, ReduceOp::kSum, label);
  } else if (options.reduce_scatter && world > 1) {
    comm.reduce_scatter(send, recv, block, bucket_dtype, ReduceOp::kSum, label);
    reduced = recv;
  } else {
    comm.all_reduce(send, send, block * static_cast<std::size_t>(world), bucket_dtype,
                    ReduceOp::kSum, label);
    reduced = in_bucket(send, static_cast<std::size_t>(rank) * block);
  }
  // offload_optimizer: into the host gradient partition, through the copy stream (after the
  // device pieces of a partial offload, below, are queued on this stream).
  std::vector<HostPiece> host_pieces;
  for (const Piece& piece : pieces) {
    if (piece.host) {
      host_pieces.push_back({static_cast<float*>(piece.destination), piece.count,
                             piece.bucket_offset, piece.unit, piece.begin});
      continue;
    }
    if (accumulate)
      ctx.axpy(stream, in_bucket(reduced, piece.bucket_offset), bucket_dtype, piece.destination,
               destination_dtype, piece.count, post);
    else
      ctx.scale(stream, in_bucket(reduced, piece.bucket_offset), bucket_dtype, piece.destination,
                destination_dtype, piece.count, post);
  }
  if (!host_pieces.empty())
    unpack_on_host(reduced, block, std::move(host_pieces), accumulate, post);
  note_comm_work();
  if (!options.overlap_comm) synchronize("reducing a gradient bucket");
}

void Engine::Impl::end_micro_step() {
  if (policy.grad_shard || at_boundary_micro_step()) flush_bucket();
  for (EngineUnit& unit : units) unit.reduced = false;
  reduced_units = 0;
  ++engine.micro_steps_;
  gatherer.end_micro_step();
}

void Engine::Impl::params_from_master() {
  if (!policy.master_weights) return;
  if (policy.offload_params()) {  // offload_param without offload_optimizer: copied out
    const Buffer staging = make_param_device_staging();
    AlignedHostBuffer param_io = make_param_io_buffer();
    for (UnitId u = 0; u < static_cast<UnitId>(units.size()); ++u)
      store_param_shard(u, owned_params(u), staging, param_io);
    if (!planning) {  // the next copies into gathered buffers read the shards after this
      ctx.copy_stream().wait(ctx.compute_stream().record());
      synchronize_compute("copying the updated parameter shard out");  // the staging buffers
    }
    return;
  }
  if (planning) return;
  for (UnitId u = 0; u < static_cast<UnitId>(units.size()); ++u)
    ctx.convert(ctx.compute_stream(), owned_params(u), DType::kFloat32, owned_compute_params(u),
                policy.compute, units[u].owned_count);
}

void Engine::Impl::all_gather_params() {
  if (skip_collectives || world == 1) return;
  const DType dtype = policy.compute;
  const std::size_t bytes = size_of(dtype);
  const auto at = [bytes](void* base, std::size_t index) {
    return static_cast<char*>(base) + index * bytes;
  };
  const std::size_t chunk = allgather_chunk_elements(engine.options_, world);
  void* staging = gather_staging.data();
  const auto blocks = static_cast<std::size_t>(world);
  for (UnitId u = 0; u < static_cast<UnitId>(units.size()); ++u) {
    const EngineUnit& unit = units[u];
    void* base = full_params_of(u);
    void* own = owned_compute_params(u);
    if (unit.shard <= chunk) {  // in place: every rank's shard lands at its own offset
      comm.all_gather(own, base, unit.shard, dtype, "params " + unit.name);
      continue;
    }
    // Chunk [begin, begin + count) of every rank's shard through the staging buffer.
    for (std::size_t begin = 0; begin < unit.shard; begin += chunk) {
      const std::size_t count = std::min(chunk, unit.shard - begin);
      comm.all_gather(at(own, begin), staging, count, dtype, "params " + unit.name);
      for (std::size_t r = 0; r < blocks; ++r)
        ctx.copy(comm.stream(), at(staging, r * count), at(base, r * unit.shard + begin),
                 count * bytes);
    }
  }
  params_ready = comm.stream().record();
  comm_done = params_ready;
  if (!engine.options_.overlap_comm) synchronize("all-gathering updated parameters");
}

}  // namespace zero
