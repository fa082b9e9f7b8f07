// zero::train's memory planner: the exact allocation sequence of a training run, per rank, with
// nothing allocated. A plan builds the engine and the model the trainer builds (zero::Engine,
// gpt2::EngineModel) on the planning device context (make_planning_context(): allocators that
// record into a ledger without memory) and a PlanningCommunicator (rank r of a world of N, alone),
// runs the trainer's micro-steps and optimizer steps through them, and reads the ledger's peaks.
// The model computes nothing in a plan (GPT2Compute returns at once on a planning allocator) and
// the engine initialises no values, so a plan costs time proportional to the number of tensors,
// not their size: a 70B plan runs in seconds on a laptop. `zero train --dry_run` and
// `zero estimate` print plans; docs/planner.md describes them.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "zero/core/memory_ledger.h"
#include "zero/core/node_memory.h"
#include "zero/engine/memory_formula.h"
#include "zero/engine/options.h"
#include "zero/gpt2/compute.h"
#include "zero/gpt2/config.h"
#include "zero/train/arguments.h"
#include "zero/train/run_config.h"

namespace zero::train {

// The peaks of one rank's ledger: per (space, category), per space in use (the peak of the sum,
// not the sum of the peaks) and per space reserved (in use plus what the caching allocators keep).
struct MemoryPeaks {
  std::array<std::array<std::int64_t, kNumMemoryCategories>, kNumMemorySpaces> categories{};
  std::array<std::int64_t, kNumMemorySpaces> total{};
  std::array<std::int64_t, kNumMemorySpaces> reserved{};

  std::int64_t peak(MemorySpace space, MemoryCategory category) const {
    return categories[static_cast<std::size_t>(space)][static_cast<std::size_t>(category)];
  }
  std::int64_t total_peak(MemorySpace space) const {
    return total[static_cast<std::size_t>(space)];
  }
  std::int64_t reserved_peak(MemorySpace space) const {
    return reserved[static_cast<std::size_t>(space)];
  }
  static MemoryPeaks of(const MemoryLedger& ledger);
};

// What a GPU rank holds that zero does not allocate itself, added to the planned device bytes.
// The defaults and where they come from (docs/planner.md):
//   cuda_context     512 MiB: a CUDA 12 context with lazy module loading, as nvidia-smi shows an
//                    idle process on A100/H100 (users measure 300-600 MiB; measure yours)
//   cublas_workspace  32 MiB: cuBLAS's recommended workspace on Hopper (cublasSetWorkspace; 4 MiB
//                    before Hopper), one handle on the compute stream
//   cudnn_workspace    0: zero calls no cuDNN kernel
//   nccl             256 MiB: NCCL_BUFFSIZE 4 MiB x 2 (send, receive) x 32 channels (NCCL's most
//                    on NVLink); NVLS (NVSwitch systems) can add about 1 GiB more
struct GpuAllowance {
  std::int64_t cuda_context = 512ll << 20;
  std::int64_t cublas_workspace = 32ll << 20;
  std::int64_t cudnn_workspace = 0;
  std::int64_t nccl = 256ll << 20;
  std::int64_t total() const { return cuda_context + cublas_workspace + cudnn_workspace + nccl; }
};

// On a GPU rank, the host memory CUDA's libraries page in as their kernels first run (the driver's
// module images, cuBLASLt, cuDNN, NCCL), after the baseline was read: measured 310 MiB above the
// plan at the train phase and 334 MiB at the final save of GPT-2 124M on an H100
// (benchmarks/RESULTS.md, run 1916). Planned as an allowance on every phase of a GPU rank.
inline constexpr std::int64_t kGpuHostLibrariesBytes = 384ll << 20;

// The phases of a run, in the order the trainer enters them; each has its own peak.
enum class Phase : std::uint8_t { kLoad, kTrain, kEvaluation, kCheckpoint, kFinalSave };
inline constexpr std::size_t kNumPhases = 5;
std::string_view name_of(Phase phase);  // "load", "train", "evaluation", "checkpoint", "final save"

// Which phases a run enters and in what order they overlap the training steps (plan_phases()).
struct PhaseSchedule {
  bool train = true;
  bool evaluate = false;                 // --do_eval
  bool checkpoint = false;               // some step saves checkpoint-N
  bool step_after_checkpoint = false;    // a training step follows a checkpoint
  bool checkpoint_at_last_step = false;  // the final evaluation and save follow a checkpoint
  bool resume = false;                   // the load phase reads a checkpoint's shards
};
// The schedule of `arguments` over `total_steps` optimizer steps of `steps_per_epoch` each; a
// count <= 0 is unknown (it needs the data): the run is then planned long enough to save a
// checkpoint, train after it and save one at its last step.
PhaseSchedule plan_phases(const TrainingArguments& arguments, std::int64_t total_steps,
                          std::int64_t steps_per_epoch);

// What a plan runs: the model, one rank's micro-batch and the engine's options for a world size.
struct PlanSetup {
  // GPT-2 by its config; or, when unset, `total_params` parameters in units of at most
  // `largest_layer_params` (DeepSpeed's estimator inputs), driven through the engine's unit
  // protocol with no activations (they depend on an architecture the counts do not give).
  std::optional<gpt2::GPT2Config> model;
  std::int64_t total_params = 0;
  std::int64_t largest_layer_params = 0;
  std::int64_t batch_size = 1;  // per rank, per micro-step
  bool device_is_host = true;   // trainer_device_is_host(): the CPU backend
  std::int64_t seq_len = 1;
  bool gradient_checkpointing = false;  // every block recomputed
  // Without gradient_checkpointing: the first k blocks recomputed (gpt2::ComputeOptions::
  // recompute_blocks); --recompute_blocks "auto" plans 0 until resolve_recompute_blocks.
  int recompute_blocks = 0;
  bool pretrained = false;         // weights loaded from --model_name_or_path (load_host_bytes)
  bool generates_samples = false;  // --num_samples > 0: the whole model on rank 0 after saving
  DType final_save_dtype = DType::kFloat32;  // final_model_dtype (run_config.h)
  std::uint64_t seed = 42;
  EngineOptions engine;  // resolved for the world size the setup was made for
  std::vector<std::string> warnings;
  // Optimizer steps planned (each of engine.gradient_accumulation_steps micro-steps). Two: the
  // first step and a steady one, so anything the first step leaves allocated is seen.
  int steps = 2;
  PhaseSchedule phases;
};

// What a plan runs besides the run's configuration: the model (GPT-2 by its config, or parameter
// counts), its sequence length, the device it runs on and the phases.
struct PlannedRun {
  std::optional<gpt2::GPT2Config> model;  // unset: total_params in units of largest_layer_params
  std::int64_t total_params = 0;
  std::int64_t largest_layer_params = 0;
  std::int64_t seq_len = 1;
  bool pretrained = false;
  bool device_is_host = true;
  PhaseSchedule phases;
  std::vector<std::string> warnings;
};

// The run `arguments` describe, reading no data (the dry run's, `zero estimate`'s and
// --auto_find_batch_size's): the model's config (--model_name_or_path's config.json, no weights;
// --config_name; or GPT-2 124M's shape; from scratch the vocabulary is --tokenizer_name's size,
// else --tokenizer_vocab_size when a tokenizer would be learned on --train_file (the most it can
// hold), else GPT-2's 50257; then --config_overrides), run_clm's block size, the device
// (trainer_device_is_host) and the phases of the flags (the length: --max_steps, else unknown;
// training when neither --do_train nor --do_eval is given). Throws InputError. Only --task
// causal-lm is planned.
PlannedRun planned_from_flags(const TrainingArguments& arguments);

// `total_params` parameters in units of at most `largest_layer_params` (no model config), on the
// device and with the phases of planned_from_flags. Throws InputError for counts out of range.
PlannedRun planned_from_counts(const TrainingArguments& arguments, std::int64_t total_params,
                               std::int64_t largest_layer_params);

// The one way a PlanSetup is made: `planned` at run's micro-batch, with its flags (gradient
// checkpointing, samples, seed) and engine options (RunConfig::engine: resolved for
// run.world_size, the scheduler's lengths planned as 1, which changes no allocation).
PlanSetup plan_setup(const RunConfig& run, const PlannedRun& planned);
// plan_setup(run, planned_from_flags(run.arguments)): the plan of `run` before any data is read.
PlanSetup plan_setup(const RunConfig& run);
// The same from arguments for `world_size` ranks (make_run_config(arguments, world_size,
// deepspeed_json): the config precedence rule applied, --deepspeed or `deepspeed_json` resolved).
PlanSetup plan_setup(const TrainingArguments& arguments, int world_size,
                     const std::string& deepspeed_json = {});

// DeepSpeed's largest layer of GPT-2 (estimate_zero3_model_states_mem_needs_all_live): the most
// parameters one module holds directly, max(wte V x C, wpe n_positions x C, mlp.c_fc 4C^2 + 4C).
std::int64_t deepspeed_largest_layer_params(const gpt2::GPT2Config& config);

struct RankPlan {
  int rank = 0;
  int world_size = 1;
  MemoryPeaks peaks;
  ModelStateBytes model_states;  // the ZeRO formula for this run (memory_formula.h)
  // The same states by the memory space each lives in (offload moves them off the device; with
  // offload_optimizer the step reads an fp32 gradient partition on the host, as DeepSpeed's).
  ModelStateBytesBySpace placed_states;
  std::int64_t parameters = 0;         // Ψ: the model's parameters (tied embeddings once)
  std::int64_t padded_parameters = 0;  // Σ over units of the padded flat size
  std::uint64_t collectives = 0;       // collectives the rank issues in the planned steps
  // Host bytes the trainer allocates outside the engine's ledger (prepare.h, trainer.cc): the
  // whole fp32 GPT-2 (gpt2::GPT2Model: parameters and gradients) that load_pretrained builds on
  // every rank for --model_name_or_path; on rank 0 the final save, streamed one unit at a time
  // from the engine (gpt2/engine_save.h: the writer's buffers, gpt2::hf_save_buffer_bytes), plus
  // the whole model when --num_samples generates samples from it.
  std::int64_t load_host_bytes = 0;
  std::int64_t save_host_bytes = 0;
  // GPT-2: what its activations and workspace hold, by part (GPT2Compute::plan: unpadded bytes;
  // the ledger's allocations pad each tensor to 16 elements).
  std::optional<gpt2::ActivationPlan> activation_parts;
  // Each phase's peak: the ledger's reserved bytes per space while in it (its peaks reset at each
  // phase's start, so a phase also holds what the previous one left allocated, as the run does)
  // and the host bytes outside the ledger it adds (the whole model loading builds, the checkpoint
  // and final save writers' buffers). `peaks` above is the largest over the phases.
  struct PhasePeak {
    bool runs = false;
    std::array<std::int64_t, kNumMemorySpaces> reserved{};
    std::int64_t outside_host_bytes = 0;
    std::int64_t in(MemorySpace space) const { return reserved[static_cast<std::size_t>(space)]; }
  };
  std::array<PhasePeak, kNumPhases> phases{};
  const PhasePeak& phase(Phase p) const { return phases[static_cast<std::size_t>(p)]; }
  // Every visit of a phase in the run's order, each with its own peak (phases[] holds the
  // largest per phase): the node check names the first visit that does not fit.
  std::vector<std::pair<Phase, PhasePeak>> visits;
  // What the process holds outside the ledger before the engine allocates (libraries, MPI,
  // thread stacks, the tokenizer, the data): VmRSS measured (baseline_source says where and
  // when); 0 until set by measure_baseline() or the caller.
  std::int64_t baseline_bytes = 0;
  std::string baseline_source;
};

// The resident bytes a phase plans for the process of this rank: host + host_pinned (+ device
// when the device's memory is host memory, the CPU backend's), the bytes outside the ledger and
// the baseline.
std::int64_t planned_resident_bytes(const RankPlan& plan, Phase phase, bool device_is_host);
std::int64_t planned_resident_bytes(const RankPlan& plan, const RankPlan::PhasePeak& peak,
                                    bool device_is_host);
// The phase with the largest planned resident bytes among those the run enters.
Phase largest_phase(const RankPlan& plan, bool device_is_host);

// This process's VmRSS now, as a plan's baseline (`where` says when it was read).
void measure_baseline(RankPlan& plan, const std::string& where);

// Plans rank `rank` of `world_size` (setup made for that world size). Throws zero::Error for
// what the engine refuses, and for offload until the engine offloads (docs/planner.md).
RankPlan plan_rank(const PlanSetup& setup, int world_size, int rank);

// One rank's plan as a table: rows by space and category (peak bytes, exact and in GiB), each
// space's peak in use and reserved, the ZeRO model-state formula beside the planned states, and,
// with `allowance`, the GPU rank's total with it.
std::string format_plan(const RankPlan& plan, const GpuAllowance* allowance);

// `zero train --dry_run`: plans every rank of run.world_size (ranks of one run hold the same bytes
// by construction, padded shards being equal; every rank is planned anyway up to 64, then ranks
// 0 and N-1), prints the plan of rank 0 and the ranks that differ from it (on stdout, or into
// `print_line`: RunOptions::print_line), and returns the plans.
std::vector<RankPlan> dry_run(const RunConfig& run, bool print,
                              const std::function<void(std::string_view)>& print_line = {});

// The phases' resident peaks, one line each, with the baseline on its own line.
std::string format_phases(const RankPlan& plan, bool device_is_host);

// ---- whether a run fits the node it runs on ----

// Whether the device zero::train picks for these arguments (choose_device, zero/core/launch.h)
// keeps its "device" memory in host memory: the CPU backend's. On a CUDA device the device bytes
// are GPU memory, not part of the process's resident peak or of the node's memory.
bool trainer_device_is_host(const TrainingArguments& arguments);

// A plan against the node's memory: every phase's resident bytes times the ranks on the node,
// visit by visit in the run's order.
struct NodeFit {
  bool fits = true;
  Phase phase = Phase::kTrain;  // the first phase that does not fit, else the largest
  int ranks_per_node = 1;
  std::int64_t rank_bytes = 0;    // that phase's planned resident bytes for one rank
  std::int64_t needed_bytes = 0;  // ranks_per_node x rank_bytes
  std::int64_t node_bytes = 0;
  std::string node;  // NodeMemory::describe()
  // "does not fit: checkpoint needs 1.234 GiB (2 ranks x 0.617 GiB), the node has 1.000 GiB
  // (the memory cgroup's limit, ...)", or "fits: ..." naming the largest phase.
  std::string message() const;
};
NodeFit node_fit(const RankPlan& plan, int ranks_per_node, const NodeMemory& node,
                 bool device_is_host);

// Settings that make a run fit, found by planning it again with each in turn (smaller
// sub_group_size, stage3_max_live_parameters, prefetch and bucket sizes; then offload to host
// memory, then to NVMe), the cheapest that fits first. `found` false: none of them fits, and
// `settings` and `fit` are the closest (the smallest largest phase), saying what still does not.
struct FitProposal {
  bool found = false;
  std::vector<std::string> settings;  // "zero_optimization.sub_group_size 1e+07", ...
  NodeFit fit;                        // the plan with them
};
FitProposal propose_fit(const PlanSetup& setup, int world_size, int ranks_per_node,
                        const NodeMemory& node, bool device_is_host, std::int64_t baseline_bytes);

// NVMe swap bytes a node's ranks write under each nvme_path (offload_param's parameter shards
// under its path, the rest under offload_optimizer's; one entry when both are the same folder).
struct NvmeNeed {
  std::string path;
  std::int64_t bytes = 0;
};
std::vector<NvmeNeed> nvme_needs(const RankPlan& plan, const EngineOptions& options,
                                 int ranks_per_node);
// statvfs(path) against each need, before anything is allocated: throws zero::Error naming the
// path, the bytes needed and the bytes free. A path that does not exist is left to the swap
// store's own check (which names it).
void check_nvme_free_space(const std::vector<NvmeNeed>& needs);
// The bytes free for this user under `path` (statvfs); nullopt where it does not exist; throws
// zero::Error naming the path for another failure.
std::optional<std::int64_t> free_bytes_under(const std::string& path);

// `zero train --dry_run`'s and `zero estimate`'s check of rank 0's `plan` against this node
// (`ranks_per_node` ranks here; <= 0: the launcher's local world size, else `world_size`): the
// baseline measured in this process (libraries; no data or peers), the phases, "fits" or "does
// not fit: PHASE needs X, the node has Y" with the settings that make it fit, and each
// nvme_path's bytes against its free space. Lines of text; throws nothing for a run that does
// not fit.
std::string check_against_this_node(const PlanSetup& setup, RankPlan& plan, int world_size,
                                    int ranks_per_node = 0);

// ---- zero estimate ----

struct Hardware {
  int gpus_per_node = 1;
  int nodes = 1;
  std::int64_t gpu_memory = 80ll << 30;  // per GPU
  std::int64_t cpu_memory = 0;           // per node; 0: not checked
  std::int64_t nvme_memory = 0;          // per node: the disk the nvme_paths share; 0: not checked
  GpuAllowance allowance;
  int world_size() const { return gpus_per_node * nodes; }
};

// Whether a plan fits: the GPU rank's device bytes reserved at peak plus the allowance against
// gpu_memory, the node's host bytes (gpus_per_node ranks' host + host_pinned reserved peaks, plus
// the larger of every rank's load_host_bytes and rank 0's save_host_bytes, counted as if at once)
// against cpu_memory, the node's NVMe swap (gpus_per_node ranks' reserved nvme peaks) against
// nvme_memory.
struct Fit {
  std::int64_t gpu_bytes = 0;
  std::int64_t node_host_bytes = 0;
  std::int64_t node_nvme_bytes = 0;
  bool gpu_fits = false;
  bool host_fits = false;
  bool nvme_fits = false;
  bool fits() const { return gpu_fits && host_fits && nvme_fits; }
};
Fit fit_of(const RankPlan& plan, const Hardware& hardware);

// One configuration (stage x offload x checkpointing) of the setup, at its micro-batch and at the
// largest micro-batch that fits (0: none fits; -1: the plan has no activations to scale).
struct Candidate {
  int stage = 0;
  // none, cpu or nvme: the optimizer's and (stage 3) the parameters' device; a partial offload
  // (ratio < 1): "cpu:R" with the parameters on the device, "cpu:R,pn" with them on NVMe.
  std::string offload = "none";
  double ratio = 1.0;               // offload_optimizer.ratio
  std::int64_t sub_group_size = 0;  // a partial offload's (0: the setup's)
  bool gradient_checkpointing = false;
  RankPlan plan;
  Fit fit;
  std::int64_t max_batch_size = 0;
};

// The largest per-rank micro-batch (at most `limit`) whose plan fits, by doubling then
// bisection; 0 when even 1 does not fit, -1 for a setup without activations.
std::int64_t largest_fitting_batch(PlanSetup setup, const Hardware& hardware,
                                   std::int64_t limit = 1 << 16);

// Every stage x checkpointing configuration of `setup` (offload modes join when the engine
// offloads), planned on rank 0 of the hardware's world, the fitting ones first, ranked fastest
// first by the rule in docs/planner.md: no offload before host before NVMe offload, no
// recomputation before gradient checkpointing, then the communication volume per step (stages 0-2:
// 2Ψ, stage 3: 3Ψ), then the lower stage.
// With a partial offload (stage 3, offload_optimizer cpu at a ratio, the parameters on the device
// or on NVMe) for each checkpointing: the smallest ratio whose GPU fits (bisection; sub-groups
// of at most the largest layer, so the split moves a unit at a time), when one does.
std::vector<Candidate> rank_configurations(const PlanSetup& setup, const Hardware& hardware);

// The fewest first blocks to recompute (0..L, the model's blocks) whose plan of `setup` (rank 0
// of `world`) `fits` (given the count and its plan), by bisection (the plan shrinks as k grows); -1
// when even every block does not fit or the setup has no model. gradient_checkpointing and
// recompute_blocks of `setup` are ignored.
int smallest_recompute_blocks(PlanSetup setup, int world,
                              const std::function<bool(int blocks, const RankPlan& plan)>& fits);

// ", gradient checkpointing", ", the first k of L blocks recomputed" or "": the recompute of
// `setup`, for a plan's header line.
std::string recompute_text(const PlanSetup& setup);

// ---- DeepSpeed 0.19's estimators (deepspeed/runtime/zero/stage_1_and_2.py, stage3.py) ----

struct DeepSpeedEstimateRow {
  std::int64_t cpu_bytes = 0;  // per CPU (node)
  std::int64_t gpu_bytes = 0;  // per GPU
  std::string options;         // as DeepSpeed prints them
};
// estimate_zero2_model_states_mem_needs for cpu_offload True, False (the rows' order).
std::vector<DeepSpeedEstimateRow> deepspeed_zero2_rows(double total_params, int gpus_per_node,
                                                       int nodes,
                                                       double additional_buffer_factor = 1.5);
// estimate_zero3_model_states_mem_needs for DeepSpeed's six (offload, zero_init) rows.
std::vector<DeepSpeedEstimateRow> deepspeed_zero3_rows(double total_params,
                                                       double largest_layer_params,
                                                       int gpus_per_node, int nodes,
                                                       double additional_buffer_factor = 1.5);
// The text estimate_zero2/3_model_states_mem_needs_all_cold print, line for line.
std::string deepspeed_zero2_text(double total_params, int gpus_per_node, int nodes,
                                 double additional_buffer_factor = 1.5);
std::string deepspeed_zero3_text(double total_params, double largest_layer_params,
                                 int gpus_per_node, int nodes,
                                 double additional_buffer_factor = 1.5);

}  // namespace zero::train
