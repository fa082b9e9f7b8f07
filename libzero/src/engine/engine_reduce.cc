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
  const EngineOptions& options = engine.options_;
  EngineUnit& unit = units[u];
  std::shared_ptr<Buffer> source = std::move(unit.grad_buffer);
  // Stages 0 and 1 accumulate full gradients locally and reduce once, at the boundary.
  if (options.stage <= 1 && !at_boundary_micro_step()) return;
  const bool blocked = options.stage >= 1;
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
  if (skip_collectives) return;

  const bool blocked = options.stage >= 1;
  const bool accumulate = options.stage >= 2;
  // DeepSpeed's allreduce_bucket: by default divide by gradient_predivide_factor before the sum
  // and multiply by predivide / W after; prescale_gradients divides by W before instead.
  const double predivide = options.gradient_predivide_factor;
  const auto pre = static_cast<float>(options.prescale_gradients ? 1.0 / world : 1.0 / predivide);
  const auto post = static_cast<float>((options.prescale_gradients ? 1.0 : predivide / world) /
                                       options.gradient_accumulation_steps);

  // The model's writes and the compute stream's zeroing of the gradients come first.
  comm_after_compute();
  Stream& stream = comm.stream();
  float* send = bucket.data_as<float>();
  float* recv = receive.data_as<float>();
  const int blocks = blocked ? world : 1;
  struct Piece {
    float* destination;  // owned gradients (blocked) or full gradients (flat)
    std::size_t count;
    std::size_t bucket_offset;  // within a block
  };
  std::vector<Piece> pieces;
  std::size_t offset = 0;
  for (BucketItem& item : items) {
    const EngineUnit& unit = units[item.unit];
    const float* base = item.source ? item.source->data_as<float>() : full_grads_of(item.unit);
    const std::size_t count = item.end - item.begin;
    // Block r of the piece is at source + r·shard.
    for (int r = 0; r < blocks; ++r)
      ctx.scale(stream, base + item.begin + static_cast<std::size_t>(r) * unit.shard,
                DType::kFloat32, send + static_cast<std::size_t>(r) * block + offset,
                DType::kFloat32, count, pre);
    pieces.push_back(
        {blocked ? owned_grads(item.unit) + item.begin : full_grads_of(item.unit) + item.begin,
         count, offset});
    offset += count;
    // Transient gradient buffers are free once packed.
    if (item.source) ctx.release_after(stream, std::move(item.source));
  }
  // Labelled with the units it carries ("grads h.5..h.3"), so a diverging rank is named by unit.
  std::string label = "grads " + units[items.front().unit].name;
  if (items.back().unit != items.front().unit) label += ".." + units[items.back().unit].name;
  const float* reduced = send;
  if (!blocked) {
    comm.all_reduce(send, send, block, DType::kFloat32, ReduceOp::kSum, label);
  } else if (options.reduce_scatter && world > 1) {
    comm.reduce_scatter(send, recv, block, DType::kFloat32, ReduceOp::kSum, label);
    reduced = recv;
  } else {
    comm.all_reduce(send, send, block * static_cast<std::size_t>(world), DType::kFloat32,
                    ReduceOp::kSum, label);
    reduced = send + static_cast<std::size_t>(rank) * block;
  }
  for (const Piece& piece : pieces) {
    if (accumulate)
      ctx.axpy(stream, reduced + piece.bucket_offset, DType::kFloat32, piece.destination,
               DType::kFloat32, piece.count, post);
    else
      ctx.scale(stream, reduced + piece.bucket_offset, DType::kFloat32, piece.destination,
                DType::kFloat32, piece.count, post);
  }
  note_comm_work();
  if (!options.overlap_comm) synchronize("reducing a gradient bucket");
}

void Engine::Impl::end_micro_step() {
  const EngineOptions& options = engine.options_;
  if (options.stage >= 2 || at_boundary_micro_step()) flush_bucket();
  for (EngineUnit& unit : units) unit.reduced = false;
  reduced_units = 0;
  ++engine.micro_steps_;
  if (options.stage != 3) return;
  drop_prefetched();
  if (recording) {
    recording = false;
    trace_valid = !trace.empty();
  } else if (!trace_valid) {
    trace.clear();
    recording = true;
  }
  trace_position = 0;
}

void Engine::Impl::all_gather_params() {
  if (skip_collectives || world == 1) return;
  float* full = full_params.data_as<float>();
  const std::size_t chunk = allgather_chunk_elements(engine.options_, world);
  float* staging = gather_staging.data_as<float>();
  const auto blocks = static_cast<std::size_t>(world);
  for (const EngineUnit& unit : units) {
    float* base = full + unit.full_offset;
    float* own = base + static_cast<std::size_t>(rank) * unit.shard;
    if (unit.shard <= chunk) {  // in place: every rank's shard lands at its own offset
      comm.all_gather(own, base, unit.shard, DType::kFloat32, "params " + unit.name);
      continue;
    }
    // Chunk [begin, begin + count) of every rank's shard through the staging buffer.
    for (std::size_t begin = 0; begin < unit.shard; begin += chunk) {
      const std::size_t count = std::min(chunk, unit.shard - begin);
      comm.all_gather(own + begin, staging, count, DType::kFloat32, "params " + unit.name);
      for (std::size_t r = 0; r < blocks; ++r)
        ctx.copy(comm.stream(), staging + r * count, base + r * unit.shard + begin,
                 count * sizeof(float));
    }
  }
  params_ready = comm.stream().record();
  comm_done = params_ready;
  if (!engine.options_.overlap_comm) synchronize("all-gathering updated parameters");
}

}  // namespace zero
