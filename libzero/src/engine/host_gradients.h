// HostGradients: offload_optimizer's fp32 gradient partition on the host side. Each reduced
// block is copied device->host on the copy stream into a receive buffer and unpacked there by a
// host task (scaled, or accumulated across micro-steps) into the host partition
// (StateStorage::host_grad_shard), or, with nvme (policy.swap_grads()), into one of two
// sub-group windows of the swapped partition (in policy.grad_swap_dtype: fp32, or with one
// micro-step and 16-bit gradients the reduced values with their post factor, widened where used);
// its squared norms for the step, and its zeroing.
//
// The swapped partition (ZeRO-Infinity): one swap region per host sub-group (the storage's
// grad_region), as DeepSpeed's partition_grads writes a sub-group's reduced fp32 gradients to its
// gradient file and the optimizer reads them back with the master and state. Reduced blocks are
// accumulated into the current window; a block of another sub-group writes that window out (the
// write runs behind, the other window takes the block) and reads the sub-group in, or zeroes it
// when its region holds nothing of this step yet. Unlike DeepSpeed, micro-steps accumulate into
// the regions rather than into a device copy, so the device holds no gradient partition either.
// The windows are touched by the copy stream's host tasks during micro-steps and by the host
// thread once the copy stream has drained (squares, zero): never both at once.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "grad_reduce.h"
#include "host_optimizer.h"
#include "state_storage.h"
#include "swap_io.h"
#include "zero/comm/communicator.h"
#include "zero/core/device_context.h"
#include "zero/core/swap_store.h"
#include "zero/engine/state_policy.h"

namespace zero {

// What the partition reads. References outlive it (the engine's members).
struct HostGradientsSetup {
  DeviceContext& context;
  // Its stream: the copies of reduced blocks follow the reductions, and the next flush (which
  // overwrites the bucket) follows the copies.
  Communicator& communicator;
  // host_step, swap_grads, model_grads (the reduced blocks' dtype), staging_space.
  const StatePolicy& policy;
  // The units' owned offsets, the sub-groups, the host partition and the gradient regions.
  const StateStorage& storage;
  // The step's swap slots: each window is allocated at least as large as the slot it precedes,
  // so the host allocator's cached block serves both.
  const HostOptimizer& host_optimizer;
};

// Host thread only, except the unpacking tasks it submits to the copy stream. In a plan the
// buffers are allocated and nothing is copied, unpacked or swapped.
class HostGradients {
 public:
  explicit HostGradients(HostGradientsSetup setup);

  // After the storage is allocated: the receive buffer (`receive_elements` reduced elements, the
  // largest block a flush hands to the host) and, swapped, each unit's sub-group.
  void allocate(std::size_t receive_elements);
  // After a collective on the communication stream: copies the reduced block (`count` elements
  // of policy.model_grads at `reduced`) to the host and unpacks each piece there, `post` ×
  // (added to, when `accumulate`) its destination: the piece's `destination` in the host
  // partition, or its unit's place in its sub-group's window when swapped. The reducer's
  // unpack_on_host.
  void unpack(const void* reduced, std::size_t count, std::vector<HostGradPiece> pieces,
              bool accumulate, float post);
  // Host units' squared norms into `partial` (per unit; device units untouched), once the copy
  // stream has drained. Swapped: the windows keep the last two sub-groups the backward reached,
  // in memory (the current one is not written out, the other one's write is waited for), for
  // the step to take (take_windows); every other sub-group's region holds its gradients. In a
  // plan: no values (the squares stay zero).
  void squares(std::vector<SquaresResult>& partial);
  // Swapped, after squares(): hands over each window that holds a sub-group's gradients and that
  // `adopt(group, buffer size_bytes)` accepts (ascending groups; the gradients at the buffer's
  // aligned start), so the step uses them from memory instead of writing and reading them back;
  // writes the others out (those not written yet) and frees them. Outside a step (before
  // squares(), after zero()) and in a plan (whose squares() frees the windows, none holding
  // gradients): does nothing.
  std::vector<GradientWindow> take_windows(
      const std::function<bool(std::size_t group, std::size_t size_bytes)>& adopt);
  // take_windows() adopting none: every region then holds the step's gradients.
  void spill_windows();
  // The next step's gradients start from zero, on the copy stream after the queued unpacking:
  // the host partition zeroed, or the windows dropped and the regions marked empty (windows
  // squares() kept are freed here: e.g. a step skipped for an overflow).
  void zero();
  // Swapped: whether sub-group g's region holds this step's gradients (else the step reads zeros).
  bool held(std::size_t g) const { return !holds_.empty() && holds_[g] != 0; }
  // Swapped in 16-bit (policy.grad_swap_dtype): the post factor sub-group g's stored values are
  // widened with (widen_gradients), once its region or window holds this step's gradients.
  float stored_scale(std::size_t g) const { return posts_.empty() ? 1.0f : posts_[g]; }
  // Swapped: the windows live from the first reduction of a step (the reducer's before_flush) to
  // squares(), where the step takes them as its slots or frees them. `micro_steps_per_step`
  // (gradient accumulation) places the first block so that the backward ends in the windows the
  // step can take.
  void allocate_windows(std::size_t micro_steps_per_step = 1);
  void release_windows();

 private:
  // The window holding sub-group g's gradients (copy stream's host tasks), written out and read
  // in as described above.
  // Its values in policy.grad_swap_dtype: fp32, or the 16-bit values as reduced (posts_[g]).
  char* window(std::size_t g);
  // Each unit of sub-group g's squared norm over its fp32 gradients, from `window` (the step's
  // global norm takes these per-unit parts in unit order, as without swapping).
  void window_squares(std::size_t g, const void* window);
  // After the backward (host thread, copy stream drained): waits for the windows' writes in
  // flight and takes the current window's squares; it stays unwritten (settled_, unwritten_).
  void settle_windows();
  // Drops the windows' contents and the regions' (copy stream's host task).
  void reset_swap();

  HostGradientsSetup setup_;
  bool planning_ = false;
  Buffer receive_;  // the reduced block copied to the host (policy.staging_space)
  // Swapped partition.
  std::vector<char> holds_;   // per sub-group: its region holds this step's gradients
  std::vector<float> posts_;  // per sub-group: the post factor of its stored values
  // Stored 16-bit: one unit's fp32 values (window_squares), allocated with the windows.
  Buffer widened_;
  std::size_t largest_unit_ = 0;  // the largest host unit's owned elements
  AlignedHostBuffer windows_[2];
  int window_group_[2] = {-1, -1};
  SwapTicket window_write_[2];
  int current_ = 0;
  // After squares(), until take_windows() or zero(): no task uses the windows, and window
  // `unwritten_` (-1: none) holds gradients its region lacks.
  bool settled_ = false;
  int unwritten_ = -1;
  // Per unit: the squared norm of its gradients when its sub-group was last written out (the
  // flush before the step writes every window out, so these are the step's).
  std::vector<SquaresResult> squares_;
};

}  // namespace zero
