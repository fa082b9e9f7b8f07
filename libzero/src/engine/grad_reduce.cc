// GradReducer: gradient buckets reduced on the communication stream.
//
// Stage 0 packs flat (all-reduce). Stages 1-3 pack rank-blocked: the bucket holds W blocks, block
// r the pieces of every queued unit that rank r owns, so one reduce-scatter hands each rank its
// shard of every unit in the bucket. Packing (with the pre-scale), the collective and unpacking
// (with the post-scale, into the owned gradients) are device operations in order on the
// communication stream, after an event of the compute stream (the gradients are written and
// zeroed there), so one bucket buffer serves every flush without host waits.
#include "grad_reduce.h"

#include <algorithm>
#include <utility>

#include "waits.h"
#include "zero/core/error.h"

namespace zero {

GradReducer::GradReducer(GradReduceSetup setup)
    : setup_(std::move(setup)),
      rank_(setup_.communicator.rank()),
      world_(setup_.communicator.world_size()) {}

void GradReducer::set_units(std::vector<UnitShape> units) {
  ZERO_CHECK(units_.empty(), "the reducer's units are set once");
  for (UnitShape& shape : units) units_.push_back({std::move(shape), false});
}

void GradReducer::allocate(const BucketSize& size) {
  Allocator& allocator = setup_.context.allocator(MemorySpace::kDevice);
  const std::size_t grad_bytes = size_of(setup_.policy.model_grads);
  capacity_ = size.bucket_elements;
  bucket_ = allocator.allocate(size.bucket_elements * grad_bytes, MemoryCategory::kCommBuffers);
  receive_ = allocator.allocate(size.receive_elements * grad_bytes, MemoryCategory::kCommBuffers);
}

bool GradReducer::reduced(UnitId u) const {
  ZERO_CHECK(u >= 0 && u < static_cast<UnitId>(units_.size()), "reduced: no unit #", u);
  return units_[static_cast<std::size_t>(u)].reduced;
}

bool GradReducer::reduce(UnitId u, std::shared_ptr<Buffer> source, bool at_boundary) {
  ZERO_CHECK(u >= 0 && u < static_cast<UnitId>(units_.size()), "reduce: no unit #", u);
  Unit& unit = units_[static_cast<std::size_t>(u)];
  ZERO_CHECK(!unit.reduced, "reduce('", unit.shape.name, "') called twice in one micro-step");
  unit.reduced = true;
  enqueue(u, std::move(source), at_boundary);
  return ++reduced_units_ == static_cast<int>(units_.size());
}

void GradReducer::enqueue(UnitId u, std::shared_ptr<Buffer> source, bool at_boundary) {
  const StatePolicy& policy = setup_.policy;
  // Stages 0 and 1 accumulate full gradients locally and reduce once, at the boundary.
  if (policy.full_grads && !at_boundary) return;
  const UnitShape& unit = units_[static_cast<std::size_t>(u)].shape;
  const bool blocked = policy.partitioned;
  const std::size_t total = blocked ? unit.shard : unit.elements;
  const std::size_t capacity = blocked ? capacity_ / static_cast<std::size_t>(world_) : capacity_;
  std::size_t begin = 0;
  while (begin < total) {
    if (pending_elements_ == capacity) flush();
    const std::size_t take = std::min(capacity - pending_elements_, total - begin);
    pending_.push_back({u, begin, begin + take, source});
    pending_elements_ += take;
    begin += take;
  }
}

void GradReducer::end_micro_step(bool at_boundary) {
  if (setup_.policy.grad_shard || at_boundary) flush();
  for (Unit& unit : units_) unit.reduced = false;
  reduced_units_ = 0;
}

// Labelled with the units it carries ("grads h.5..h.3"), so a diverging rank is named by unit.
std::string GradReducer::label(const std::vector<Item>& items) const {
  const auto name = [this](UnitId u) { return units_[static_cast<std::size_t>(u)].shape.name; };
  std::string label = "grads " + name(items.front().unit);
  if (items.back().unit != items.front().unit) label += ".." + name(items.back().unit);
  return label;
}

void GradReducer::flush() {
  if (pending_.empty()) return;
  const EngineOptions& options = setup_.options;
  const StatePolicy& policy = setup_.policy;
  DeviceContext& ctx = setup_.context;
  Communicator& comm = setup_.communicator;
  std::vector<Item> items = std::move(pending_);
  pending_.clear();
  const std::size_t block = pending_elements_;
  pending_elements_ = 0;
  setup_.host.before_flush();  // swapped gradients: windows from here on
  if (setup_.skip_collectives) return;

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
  const auto pre = static_cast<float>(options.prescale_gradients ? 1.0 / world_ : 1.0 / predivide);
  const auto post = static_cast<float>((options.prescale_gradients ? 1.0 : predivide / world_) /
                                       options.gradient_accumulation_steps);

  // The model's writes and the compute stream's zeroing of the gradients come first.
  Stream& stream = comm.stream();
  stream.wait(ctx.compute_stream().record());
  if (world_ == 1 && pre == 1.0f && !policy.host_step) {
    unpack_alone(items, post);
    return;
  }
  void* send = bucket_.data();
  void* recv = receive_.data();
  const int blocks = blocked ? world_ : 1;
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
  for (Item& item : items) {
    const std::size_t shard = units_[static_cast<std::size_t>(item.unit)].shape.shard;
    // The source: a transient buffer (stages 2-3) or the full gradients, both bucket_dtype.
    void* base = item.source ? item.source->data() : setup_.storage.full_grads(item.unit);
    const std::size_t count = item.end - item.begin;
    // Block r of the piece is at source + r·shard.
    for (int r = 0; r < blocks; ++r)
      ctx.scale(stream, in_bucket(base, item.begin + static_cast<std::size_t>(r) * shard),
                bucket_dtype, in_bucket(send, static_cast<std::size_t>(r) * block + offset),
                bucket_dtype, count, pre);
    // Null for a swapped gradient partition: the host task finds the sub-group's window.
    void* owned =
        blocked ? setup_.storage.owned_grads(item.unit) : setup_.storage.full_grads(item.unit);
    pieces.push_back({owned ? in_destination(owned, item.begin) : nullptr, count, offset,
                      policy.host_step && !setup_.storage.on_device(item.unit), item.unit,
                      item.begin});
    offset += count;
    // Transient gradient buffers are free once packed.
    if (item.source) ctx.release_after(stream, std::move(item.source));
  }
  const std::string name = label(items);
  void* reduced = send;
  if (!blocked) {
    comm.all_reduce(send, send, block, bucket_dtype, ReduceOp::kSum, name);
  } else if (options.reduce_scatter && world_ > 1) {
    comm.reduce_scatter(send, recv, block, bucket_dtype, ReduceOp::kSum, name);
    reduced = recv;
  } else {
    comm.all_reduce(send, send, block * static_cast<std::size_t>(world_), bucket_dtype,
                    ReduceOp::kSum, name);
    reduced = in_bucket(send, static_cast<std::size_t>(rank_) * block);
  }
  // offload_optimizer: into the host gradient partition, through the copy stream (after the
  // device pieces of a partial offload, below, are queued on this stream).
  std::vector<HostGradPiece> host_pieces;
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
    setup_.host.unpack(reduced, block, std::move(host_pieces), accumulate, post);
  setup_.comm_done = stream.record();
  if (!options.overlap_comm) synchronize_naming(comm, options.stage, "reducing a gradient bucket");
}

// World 1 without a pre-scale: the collective is the identity and packing multiplies by 1 (the
// bucket holds the source's dtype), so the packed path's result is each piece's source × post,
// written (or added) into its destination. One pass from the source does that, with no bucket
// and no collective; none at all where source and destination are one buffer and post is 1
// (stage 0's full gradients). Bitwise the packed path's for every value (x · 1 = x; a NaN stays
// the same quiet NaN: arithmetic makes no signalling ones).
void GradReducer::unpack_alone(std::vector<Item>& items, float post) {
  const StatePolicy& policy = setup_.policy;
  DeviceContext& ctx = setup_.context;
  Stream& stream = setup_.communicator.stream();
  const bool accumulate = !policy.full_grads;
  const DType source_dtype = policy.model_grads;
  const DType destination_dtype =
      policy.partitioned ? policy.owned_grads_dtype() : policy.accumulate;
  for (Item& item : items) {
    void* base = item.source ? item.source->data() : setup_.storage.full_grads(item.unit);
    void* owned = policy.partitioned ? setup_.storage.owned_grads(item.unit)
                                     : setup_.storage.full_grads(item.unit);
    void* source = static_cast<char*>(base) + item.begin * size_of(source_dtype);
    void* destination = static_cast<char*>(owned) + item.begin * size_of(destination_dtype);
    const std::size_t count = item.end - item.begin;
    if (accumulate)
      ctx.axpy(stream, source, source_dtype, destination, destination_dtype, count, post);
    else if (source != destination || source_dtype != destination_dtype || post != 1.0f)
      ctx.scale(stream, source, source_dtype, destination, destination_dtype, count, post);
    if (item.source) ctx.release_after(stream, std::move(item.source));
  }
  setup_.comm_done = stream.record();
  if (!setup_.options.overlap_comm)
    synchronize_naming(setup_.communicator, setup_.options.stage, "reducing a gradient bucket");
}

}  // namespace zero
