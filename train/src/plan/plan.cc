// The memory planner (zero/train/plan.h): the trainer's engine and model on the planning device
// context and a peer-free communicator, one rank of a world at a time.
#include "zero/train/plan.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string_view>
#include <vector>

#include "config/console.h"
#include "config/engine_setup.h"
#include "config/input_checks.h"
#include "prepare/model_config.h"
#include "prepare/prepare.h"
#include "zero/comm/host_collectives.h"
#include "zero/comm/planning_communicator.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"
#include "zero/engine/engine.h"
#include "zero/factory/engine_factory.h"
#include "zero/gpt2/engine_model.h"
#include "zero/gpt2/engine_save.h"
#include "zero/gpt2/family.h"
#include "zero/gpt2/hf_weights.h"
#include "zero/gpt2/model.h"
#include "zero/gpt2/units.h"
#include "zero/optim/optimizers.h"
#include "zero/text/tokenizer.h"

namespace zero::train {

namespace fs = std::filesystem;

namespace {

using detail::as_input_error;
using detail::input_error;

// The engine here keeps every state on the device (offload is the offload issue's, not merged in
// this build): a plan of an offloading config would put its state in the wrong space, so it is
// refused. Once the engine offloads, this check goes and the planner plans offload as it runs.
double gib(std::int64_t bytes) { return static_cast<double>(bytes) / 1073741824.0; }

std::string bytes_cell(std::int64_t bytes) {
  char text[64];
  std::snprintf(text, sizeof(text), "%16lld  %9.3f GiB", static_cast<long long>(bytes), gib(bytes));
  return text;
}

bool same_bytes(const RankPlan& a, const RankPlan& b) {
  return a.peaks.categories == b.peaks.categories && a.peaks.total == b.peaks.total &&
         a.peaks.reserved == b.peaks.reserved;
}

// The phases a dry run plans: the flags' (plan_phases; the run's length is --max_steps, else
// unknown), and training when neither --do_train nor --do_eval is given (what a dry run is for).
PhaseSchedule dry_run_phases(const TrainingArguments& arguments,
                             std::vector<std::string>& warnings) {
  if (arguments.do_train || arguments.do_eval)
    return plan_phases(arguments, arguments.max_steps, 0);
  TrainingArguments training = arguments;
  training.do_train = true;
  warnings.push_back("neither --do_train nor --do_eval: planned as --do_train");
  return plan_phases(training, arguments.max_steps, 0);
}

}  // namespace

MemoryPeaks MemoryPeaks::of(const MemoryLedger& ledger) {
  MemoryPeaks peaks;
  for (std::size_t s = 0; s < kNumMemorySpaces; ++s) {
    const auto space = static_cast<MemorySpace>(s);
    peaks.total[s] = ledger.space_total(space).peak_bytes;
    peaks.reserved[s] = ledger.space_reserved(space).peak_bytes;
    for (std::size_t c = 0; c < kNumMemoryCategories; ++c)
      peaks.categories[s][c] = ledger.entry(space, static_cast<MemoryCategory>(c)).peak_bytes;
  }
  return peaks;
}

PlannedRun planned_from_flags(const TrainingArguments& arguments) {
  if (!detail::checked_task(arguments).planned())
    input_error("--dry_run plans --task causal-lm only; --task ", arguments.task,
                " is not planned yet");
  PlannedRun planned;
  // The model's config, as prepare() finds it, without reading weights or data.
  gpt2::GPT2Config scratch;
  const bool from_scratch = arguments.model_name_or_path.empty() && arguments.config_name.empty();
  if (from_scratch && !arguments.tokenizer_name.empty()) {
    // From scratch, sized to the tokenizer (prepare()'s rule).
    const text::Tokenizer tokenizer = as_input_error("tokenizer " + arguments.tokenizer_name, [&] {
      return text::Tokenizer::load(arguments.tokenizer_name);
    });
    scratch.vocab_size = static_cast<std::int64_t>(tokenizer.vocab_size());
  } else if (from_scratch && !arguments.train_files.empty()) {
    // A tokenizer would be learned on the train files: at most --tokenizer_vocab_size tokens.
    scratch.vocab_size = arguments.tokenizer_vocab_size;
    planned.warnings.push_back(
        "vocabulary planned at --tokenizer_vocab_size " +
        std::to_string(arguments.tokenizer_vocab_size) +
        " (the tokenizer learned on the train files holds at most that many)");
  }
  const gpt2::GPT2Config config = detail::model_config_from_flags(arguments, scratch);
  planned.seq_len = arguments.block_size > 0 ? arguments.block_size
                                             : std::min<std::int64_t>(1024, config.n_positions);
  if (planned.seq_len > config.n_positions)
    input_error("--block_size ", planned.seq_len, " is larger than the model's ",
                gpt2::key_name(config.family, gpt2::ConfigField::kPositions), " ",
                config.n_positions);
  as_input_error("--block_size", [&] { config.check_sequence_length(planned.seq_len); });
  planned.model = config;
  planned.pretrained = !arguments.model_name_or_path.empty();
  planned.device_is_host = trainer_device_is_host(arguments);
  planned.phases = dry_run_phases(arguments, planned.warnings);
  return planned;
}

PlannedRun planned_from_counts(const TrainingArguments& arguments, std::int64_t total_params,
                               std::int64_t largest_layer_params) {
  if (total_params < 1) input_error("--params must be at least 1, got ", total_params);
  if (largest_layer_params < 1 || largest_layer_params > total_params)
    input_error("--largest_layer_params must be in [1, --params ", total_params, "], got ",
                largest_layer_params);
  PlannedRun planned;
  planned.total_params = total_params;
  planned.largest_layer_params = largest_layer_params;
  planned.device_is_host = trainer_device_is_host(arguments);
  planned.phases = dry_run_phases(arguments, planned.warnings);
  return planned;
}

PlanSetup plan_setup(const RunConfig& run, const PlannedRun& planned) {
  const TrainingArguments& arguments = run.arguments;
  PlanSetup setup;
  setup.model = planned.model;
  setup.total_params = planned.total_params;
  setup.largest_layer_params = planned.largest_layer_params;
  setup.batch_size = arguments.per_device_train_batch_size;
  setup.device_is_host = planned.device_is_host;
  setup.seq_len = planned.seq_len;
  setup.gradient_checkpointing =  // parameter counts have no activations to recompute
      planned.model && arguments.gradient_checkpointing;
  if (planned.model && !arguments.gradient_checkpointing && arguments.recompute_blocks != "auto")
    setup.recompute_blocks = recompute_blocks_of(arguments, planned.model->n_layer);
  setup.pretrained = planned.pretrained;
  setup.generates_samples = arguments.num_samples > 0;
  setup.final_save_dtype = final_model_dtype(run);
  setup.seed = arguments.seed;
  setup.engine = run.engine.options;
  setup.warnings = planned.warnings;
  for (const std::string& warning : run.deepspeed.warnings) setup.warnings.push_back(warning);
  for (const std::string& warning : run.engine.warnings) setup.warnings.push_back(warning);
  setup.phases = planned.phases;
  return setup;
}

PlanSetup plan_setup(const RunConfig& run) {
  return plan_setup(run, planned_from_flags(run.arguments));
}

PlanSetup plan_setup(const TrainingArguments& arguments, int world_size,
                     const std::string& deepspeed_json) {
  return plan_setup(make_run_config(arguments, world_size, deepspeed_json));
}

std::int64_t deepspeed_largest_layer_params(const gpt2::GPT2Config& config) {
  return gpt2::largest_module_parameters(config);
}

namespace {

// Closes phases: each phase's peaks are the ledger's since the previous phase ended (max'ed over
// the phase's visits), the run's peaks the largest over all phases.
class PhaseRecorder {
 public:
  PhaseRecorder(MemoryLedger& ledger, RankPlan& plan) : ledger_(ledger), plan_(plan) {
    ledger_.reset_peaks();
  }
  void end(Phase phase, std::int64_t outside_host_bytes = 0) {
    const MemoryPeaks peaks = MemoryPeaks::of(ledger_);
    RankPlan::PhasePeak visit{
        .runs = true, .reserved = peaks.reserved, .outside_host_bytes = outside_host_bytes};
    plan_.visits.emplace_back(phase, visit);
    RankPlan::PhasePeak& peak = plan_.phases[static_cast<std::size_t>(phase)];
    peak.runs = true;
    for (std::size_t s = 0; s < kNumMemorySpaces; ++s)
      peak.reserved[s] = std::max(peak.reserved[s], peaks.reserved[s]);
    peak.outside_host_bytes = std::max(peak.outside_host_bytes, outside_host_bytes);
    MemoryPeaks& run = plan_.peaks;
    for (std::size_t s = 0; s < kNumMemorySpaces; ++s) {
      run.total[s] = std::max(run.total[s], peaks.total[s]);
      run.reserved[s] = std::max(run.reserved[s], peaks.reserved[s]);
      for (std::size_t c = 0; c < kNumMemoryCategories; ++c)
        run.categories[s][c] = std::max(run.categories[s][c], peaks.categories[s][c]);
    }
    ledger_.reset_peaks();
  }

 private:
  MemoryLedger& ledger_;
  RankPlan& plan_;
};

// The trainer's host values at a log, the largest it exchanges between steps (every rank's memory
// peak, Trainer::log_step), through all_gather_host as the trainer sends them: the device bytes
// it stages are in the plan.
void gather_log_values(Communicator& communicator, DeviceContext& context) {
  const float peak = 0.0f;
  std::vector<float> peaks(static_cast<std::size_t>(communicator.world_size()));
  all_gather_host(communicator, context, {&peak, 1}, peaks, "memory peaks");
}

// The phases after loading, in the trainer's order (trainer.cc): training steps, an evaluation,
// checkpoints (the engine's shard states read, a step after one), the final evaluation and save.
// `steps(n)` runs n optimizer steps, `evaluate()` one evaluation micro-batch, `gather_all(dtype)`
// gathers every unit in turn as a save in `dtype` does (checkpoints: fp32; the final save:
// setup.final_save_dtype).
template <typename Steps, typename Evaluate, typename GatherAll>
void plan_phases_after_load(const PlanSetup& setup, Engine& engine, Communicator& communicator,
                            PhaseRecorder& recorder, std::int64_t checkpoint_outside,
                            std::int64_t save_outside, Steps steps, Evaluate evaluate,
                            GatherAll gather_all) {
  const PhaseSchedule& phases = setup.phases;
  if (phases.train) {
    steps(setup.steps);
    gather_log_values(communicator, engine.context());
    recorder.end(Phase::kTrain);
  }
  if (phases.evaluate && phases.train) {
    evaluate();
    recorder.end(Phase::kEvaluation);
  }
  // A checkpoint writes checkpoint-N/'s model files as the final save writes its own (each unit's
  // fp32 master gathered in turn, the writer's buffers outside the ledger) and streams the shard
  // files from where the states live (CheckpointSave over Engine::visit_shard_states: with NVMe
  // offload one sub-group in host memory at a time).
  const auto save_checkpoint = [&engine, &gather_all] {
    engine.visit_shard_states([](const ShardState&) {});
    gather_all(DType::kFloat32);
  };
  // The trainer saves inside its step loop and is back in the train phase after each save, with
  // what the save reserved still reserved (the allocators' pools): recorded as train.
  if (phases.checkpoint) {
    save_checkpoint();
    recorder.end(Phase::kCheckpoint, checkpoint_outside);
    recorder.end(Phase::kTrain);
    if (phases.step_after_checkpoint) {
      steps(1);
      recorder.end(Phase::kTrain);
      if (phases.checkpoint_at_last_step) {
        save_checkpoint();
        recorder.end(Phase::kCheckpoint, checkpoint_outside);
        recorder.end(Phase::kTrain);
      }
    }
  }
  if (phases.evaluate) {
    evaluate();
    recorder.end(Phase::kEvaluation);
  }
  if (phases.train) {
    gather_all(setup.final_save_dtype);
    recorder.end(Phase::kFinalSave, save_outside);
  }
}

void plan_gpt2(const PlanSetup& setup, Engine& engine, Communicator& communicator, int rank,
               RankPlan& plan, PhaseRecorder& recorder) {
  const gpt2::GPT2Config& config = *setup.model;
  ZERO_CHECK(setup.batch_size >= 1 && setup.seq_len >= 1,
             "a plan needs a positive micro-batch, got B=", setup.batch_size, " T=", setup.seq_len);
  // A planning context runs no kernels: the layout is that of the device the run will run on.
  const DeviceKind device = setup.device_is_host ? DeviceKind::kCpu : DeviceKind::kCuda;
  gpt2::EngineModel model(engine, config, setup.batch_size, setup.seq_len, setup.seed,
                          engine.allocator(),
                          {.activation_checkpointing = setup.gradient_checkpointing,
                           .recompute_blocks = setup.recompute_blocks,
                           .device = device});
  plan.parameters = config.num_parameters();
  // The whole model load_pretrained builds outside the engine's ledger on every rank, recorded
  // in a ledger of its own.
  auto whole_model_bytes = [&config] {
    MemoryLedger ledger;
    PlanningAllocator allocator(ledger, MemorySpace::kHost);
    const gpt2::GPT2Model whole(config, allocator);
    return ledger.space_total(MemorySpace::kHost).peak_bytes;
  };
  // A pretrained model streams into the rank's partitions (gpt2/hf_weights.h): one mapped chunk
  // of the file at a time outside the engine's ledger.
  if (setup.pretrained)
    plan.load_host_bytes = static_cast<std::int64_t>(gpt2::hf_load_buffer_bytes());
  // The final save streams one unit at a time (gpt2/engine_save.h): outside the engine's ledger
  // only the writer's buffers and a header (the gathered unit is the engine's). Samples
  // (--num_samples) need the whole model on rank 0 after it.
  const auto writer = static_cast<std::int64_t>(
      gpt2::hf_save_buffer_bytes(config, {.dtype = setup.final_save_dtype}));
  if (rank == 0)
    plan.save_host_bytes = writer + (setup.generates_samples ? whole_model_bytes() : 0);
  // A resume reads the checkpoint's shards, a pretrained model its tensors, straight into the
  // engine's states (Engine::fill_shard_states: with NVMe offload one sub-group's slot at a time).
  if (setup.phases.resume || setup.pretrained) {
    engine.fill_shard_states([](ShardState&) {}, Engine::ShardFill::kSomeElements);
    engine.refresh_params();
  }
  recorder.end(Phase::kLoad, plan.load_host_bytes);
  // The tokens are never read in a plan; only their count is checked.
  const std::vector<int> tokens(static_cast<std::size_t>(setup.batch_size * setup.seq_len), 0);
  int step = 0;
  auto steps = [&](int count) {
    for (int end = step + count; step < end; ++step)
      for (int micro = 0; micro < setup.engine.gradient_accumulation_steps; ++micro) {
        model.train_micro_step(tokens, tokens,
                               {.seed = setup.seed,
                                .step = static_cast<std::uint64_t>(step),
                                .sample_offset = rank * setup.batch_size,
                                .training = true});
        engine.step();
      }
  };
  plan_phases_after_load(
      setup, engine, communicator, recorder, writer, plan.save_host_bytes, steps,
      [&] { model.eval_loss(tokens, tokens); },
      [&](DType saved) { gpt2::gather_saved_units(engine, model.units(), saved); });
  plan.activation_parts =
      gpt2::GPT2Compute::plan(config, setup.batch_size, setup.seq_len,
                              {.activation_checkpointing = setup.gradient_checkpointing,
                               .recompute_blocks = setup.recompute_blocks,
                               .param_dtype = engine.param_dtype(),
                               .device = device});
}

// Units of the largest layer's size, the remainder last: the engine's unit protocol (engine.h)
// with no model between the calls.
void plan_counts(const PlanSetup& setup, Engine& engine, Communicator& communicator, RankPlan& plan,
                 PhaseRecorder& recorder) {
  ZERO_CHECK(setup.total_params >= 1 && setup.largest_layer_params >= 1,
             "a plan from parameter counts needs --params and --largest_layer_params >= 1");
  ZERO_CHECK(setup.largest_layer_params <= setup.total_params, "--largest_layer_params ",
             setup.largest_layer_params, " exceeds --params ", setup.total_params);
  std::vector<UnitId> units;
  for (std::int64_t done = 0; done < setup.total_params;) {
    const std::int64_t count = std::min(setup.largest_layer_params, setup.total_params - done);
    units.push_back(engine.register_unit("layer." + std::to_string(units.size()),
                                         {{"weight", {count}}},
                                         [](const TensorSlot&, std::span<float>) {}));
    done += count;
  }
  engine.initialize();
  recorder.end(Phase::kLoad);
  auto steps = [&](int count) {
    for (int step = 0; step < count; ++step)
      for (int micro = 0; micro < setup.engine.gradient_accumulation_steps; ++micro) {
        for (UnitId unit : units) engine.gather(unit).release();
        for (auto it = units.rbegin(); it != units.rend(); ++it) {
          GatheredUnit params = engine.gather(*it);
          engine.grads(*it);
          params.release();
          engine.reduce_grads(*it);
        }
        engine.step();
      }
  };
  auto gather_all = [&](DType /*saved*/) {  // units without a model: their parameters
    for (UnitId unit : units) engine.gather(unit).release();
  };
  PlanSetup without_evaluation = setup;  // no activations to evaluate with
  without_evaluation.phases.evaluate = false;
  plan_phases_after_load(
      without_evaluation, engine, communicator, recorder, 0, 0, steps, [] {}, gather_all);
  plan.parameters = setup.total_params;
}

}  // namespace

RankPlan plan_rank(const PlanSetup& setup, int world_size, int rank) {
  RankPlan plan;
  plan.rank = rank;
  plan.world_size = world_size;
  const std::unique_ptr<DeviceContext> context = make_planning_context();
  // The communication stream in program order too: a plan does not depend on thread timing.
  PlanningCommunicator communicator(rank, world_size, {}, context->make_stream("communication"));
  std::vector<std::size_t> sizes;
  {
    // The trainer's engine (train()): the config's options, optimizer and schedule, on the
    // planning context (nvme regions are recorded, no store is made).
    const std::unique_ptr<Engine> engine_owner =
        make_engine(setup.engine, communicator, {.context = context.get()});
    Engine& engine = *engine_owner;
    PhaseRecorder recorder(context->ledger(), plan);
    if (setup.model) {
      plan_gpt2(setup, engine, communicator, rank, plan, recorder);
    } else {
      plan_counts(setup, engine, communicator, plan, recorder);
    }
    for (UnitId unit = 0; unit < static_cast<UnitId>(engine.num_units()); ++unit) {
      sizes.push_back(engine.layout(unit).num_elements());
      plan.padded_parameters +=
          static_cast<std::int64_t>(engine.layout(unit).padded_num_elements());
    }
    communicator.synchronize();
    plan.collectives = communicator.sequence();
  }
  const StatePolicy policy = state_policy(setup.engine);
  const int states_per_element =
      optim::make_optimizer(setup.engine.optimizer)->states_per_element();
  plan.model_states =
      model_state_bytes(setup.engine.stage, sizes, world_size, setup.engine.alignment_elements,
                        policy.compute, states_per_element, policy.accumulate);
  plan.placed_states = model_state_bytes(setup.engine, sizes, world_size, states_per_element);
  return plan;
}

std::string format_plan(const RankPlan& plan, const GpuAllowance* allowance) {
  std::ostringstream out;
  out << "rank " << plan.rank << " of " << plan.world_size << ": peak bytes by memory space and "
      << "category (planned, nothing allocated)\n";
  char line[256];
  std::snprintf(line, sizeof(line), "  %-12s %-16s %16s  %13s\n", "space", "category", "bytes", "");
  out << line;
  for (std::size_t s = 0; s < kNumMemorySpaces; ++s) {
    const auto space = static_cast<MemorySpace>(s);
    if (plan.peaks.reserved_peak(space) == 0) continue;
    for (std::size_t c = 0; c < kNumMemoryCategories; ++c) {
      const auto category = static_cast<MemoryCategory>(c);
      if (plan.peaks.peak(space, category) == 0) continue;
      std::snprintf(line, sizeof(line), "  %-12s %-16s %s\n", std::string(name_of(space)).c_str(),
                    std::string(name_of(category)).c_str(),
                    bytes_cell(plan.peaks.peak(space, category)).c_str());
      out << line;
    }
    std::snprintf(line, sizeof(line), "  %-12s %-16s %s\n", std::string(name_of(space)).c_str(),
                  "peak in use", bytes_cell(plan.peaks.total_peak(space)).c_str());
    out << line;
    std::snprintf(line, sizeof(line), "  %-12s %-16s %s\n", std::string(name_of(space)).c_str(),
                  "peak reserved", bytes_cell(plan.peaks.reserved_peak(space)).c_str());
    out << line;
  }
  if (plan.activation_parts) {  // GPT-2's activations by part
    const gpt2::ActivationPlan& parts = *plan.activation_parts;
    const std::size_t units = parts.kept_bytes.size();
    const auto recomputed = static_cast<std::size_t>(parts.recomputed_blocks);
    std::size_t blocks = 0;
    for (std::size_t u = 1; u + 1 < units; ++u) blocks += parts.kept_bytes[u];
    // A recomputed block (the first ones) keeps its output; a kept one its internals too.
    auto block_bytes = [&](std::size_t block) {
      return gib(static_cast<std::int64_t>(block + 2 < units ? parts.kept_bytes[block + 1] : 0));
    };
    std::snprintf(line, sizeof(line),
                  "  activations by part: embeddings %.3f GiB, blocks %.3f GiB (%zu recomputed x "
                  "%.3f GiB, %zu kept x %.3f GiB), head (ln_f, logits, losses) %.3f GiB, "
                  "recompute set %.3f GiB; workspace %.3f GiB\n",
                  gib(static_cast<std::int64_t>(parts.kept_bytes.front())),
                  gib(static_cast<std::int64_t>(blocks)), recomputed,
                  recomputed > 0 ? block_bytes(0) : 0.0, units - 2 - recomputed,
                  block_bytes(units - 3), gib(static_cast<std::int64_t>(parts.kept_bytes.back())),
                  gib(static_cast<std::int64_t>(parts.recompute_bytes)),
                  gib(static_cast<std::int64_t>(parts.workspace_bytes)));
    out << line;
  }
  // The model states against the ZeRO formula, and its coefficient of Ψ/N.
  const ModelStateBytes& states = plan.model_states;
  const double per_rank = static_cast<double>(plan.padded_parameters) / plan.world_size;
  std::snprintf(line, sizeof(line),
                "  model states (ZeRO formula, memory_formula.h): %lld bytes = %.4f x Psi/N "
                "(Psi = %lld padded, %lld parameters; N = %d)\n",
                static_cast<long long>(states.total()),
                static_cast<double>(states.total()) / per_rank,
                static_cast<long long>(plan.padded_parameters),
                static_cast<long long>(plan.parameters), plan.world_size);
  out << line;
  std::snprintf(line, sizeof(line),
                "    params %lld, param_shard %lld, grads %lld, grad_shard %lld, master_params "
                "%lld, optimizer_state %lld\n",
                static_cast<long long>(states.params), static_cast<long long>(states.param_shard),
                static_cast<long long>(states.grads), static_cast<long long>(states.grad_shard),
                static_cast<long long>(states.master_params),
                static_cast<long long>(states.optimizer_state));
  out << line;
  // Where they are placed (differs from the formula's total with offload_optimizer: its fp32
  // gradient partition on the host).
  const ModelStateBytes placed = plan.placed_states.total();
  if (placed.total() != states.total() ||
      plan.placed_states.in(MemorySpace::kDevice).total() != states.total()) {
    std::snprintf(line, sizeof(line),
                  "    placed: %lld bytes = %.4f x Psi/N: device %lld, host_pinned %lld, host "
                  "%lld, nvme %lld\n",
                  static_cast<long long>(placed.total()),
                  static_cast<double>(placed.total()) / per_rank,
                  static_cast<long long>(plan.placed_states.in(MemorySpace::kDevice).total()),
                  static_cast<long long>(plan.placed_states.in(MemorySpace::kHostPinned).total()),
                  static_cast<long long>(plan.placed_states.in(MemorySpace::kHost).total()),
                  static_cast<long long>(plan.placed_states.in(MemorySpace::kNvme).total()));
    out << line;
  }
  if (allowance != nullptr) {
    const std::int64_t device = plan.peaks.reserved_peak(MemorySpace::kDevice);
    std::snprintf(line, sizeof(line),
                  "  GPU rank: device peak reserved %.3f GiB + allowance %.3f GiB (CUDA context "
                  "%.0f MiB, cuBLAS %.0f MiB, cuDNN %.0f MiB, NCCL %.0f MiB) = %.3f GiB\n",
                  gib(device), gib(allowance->total()),
                  static_cast<double>(allowance->cuda_context) / 1048576.0,
                  static_cast<double>(allowance->cublas_workspace) / 1048576.0,
                  static_cast<double>(allowance->cudnn_workspace) / 1048576.0,
                  static_cast<double>(allowance->nccl) / 1048576.0,
                  gib(device + allowance->total()));
    out << line;
  }
  const std::int64_t host = plan.peaks.reserved_peak(MemorySpace::kHost) +
                            plan.peaks.reserved_peak(MemorySpace::kHostPinned);
  if (plan.load_host_bytes > 0 || plan.save_host_bytes > 0) {
    std::snprintf(line, sizeof(line),
                  "  host outside the engine: loading --model_name_or_path %.3f GiB, the final "
                  "save %.3f GiB (one unit at a time: the writer's buffers; with --num_samples "
                  "the whole fp32 model)\n",
                  gib(plan.load_host_bytes), gib(plan.save_host_bytes));
    out << line;
  }
  std::snprintf(line, sizeof(line),
                "  host per rank: host + host_pinned peak reserved %.3f GiB; nvme %.3f GiB\n",
                gib(host), gib(plan.peaks.reserved_peak(MemorySpace::kNvme)));
  out << line;
  return out.str();
}

std::vector<RankPlan> dry_run(const RunConfig& run, bool print,
                              const std::function<void(std::string_view)>& print_line) {
  const auto start = std::chrono::steady_clock::now();
  const int world_size = run.world_size;
  const PlanSetup setup = plan_setup(run);
  std::vector<int> ranks;
  if (world_size <= 64) {
    for (int rank = 0; rank < world_size; ++rank) ranks.push_back(rank);
  } else {
    ranks = {0, world_size - 1};
  }
  std::vector<RankPlan> plans;
  for (int rank : ranks)
    plans.push_back(as_input_error("plan", [&] { return plan_rank(setup, world_size, rank); }));
  if (!print) return plans;
  const detail::Console console(true, print_line);
  const gpt2::GPT2Config& config = *setup.model;
  const StatePolicy policy = state_policy(setup.engine);
  console.say(
      "dry run: %s %lld layers, width %lld, %s heads, vocabulary %lld: %lld "
      "parameters; micro-batch %lld x %lld tokens, %d accumulation step(s)%s\n",
      std::string(gpt2::name_of(config.family)).c_str(), static_cast<long long>(config.n_layer),
      static_cast<long long>(config.n_embd), gpt2::heads_text(config).c_str(),
      static_cast<long long>(config.vocab_size), static_cast<long long>(config.num_parameters()),
      static_cast<long long>(setup.batch_size), static_cast<long long>(setup.seq_len),
      setup.engine.gradient_accumulation_steps, recompute_text(setup).c_str());
  console.say("engine: ZeRO stage %d, %d rank(s), %s parameters, %s gradient accumulation, %s\n",
              setup.engine.stage, world_size, std::string(name_of(policy.compute)).c_str(),
              std::string(name_of(policy.accumulate)).c_str(),
              std::string(config::name_of(setup.engine.optimizer.type)).c_str());
  for (const std::string& warning : setup.warnings) console.say("config: %s\n", warning.c_str());
  const GpuAllowance allowance;
  console.say("%s", format_plan(plans.front(), &allowance).c_str());
  std::vector<int> same;
  for (std::size_t i = 1; i < plans.size(); ++i) {
    if (same_bytes(plans[i], plans.front())) {
      same.push_back(plans[i].rank);
    } else {
      console.say("%s", format_plan(plans[i], &allowance).c_str());
    }
  }
  if (!same.empty())
    console.say("ranks %d..%d: the same bytes as rank 0 (%zu planned%s)\n", ranks[1], ranks.back(),
                same.size(),
                world_size > 64 ? "; above 64 ranks, ranks 0 and N-1 are planned" : "");
  RankPlan first = plans.front();
  console.say("memory plan of the whole run (rank 0):\n%s",
              check_against_this_node(setup, first, world_size).c_str());
  console.say("planned %zu rank(s) in %.2f s, %llu collectives per rank; nothing allocated\n",
              plans.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
              static_cast<unsigned long long>(plans.front().collectives));
  return plans;
}

}  // namespace zero::train
