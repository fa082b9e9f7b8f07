// `zero estimate` as a library call: the memory plan of rank 0 of a run on given hardware (the
// planner, plan.h), whether it fits, the largest micro-batch that fits and the configurations that
// fit ranked fastest first. The CLI prints it as tables or as JSON; the Python module
// (`zero.estimate`, bindings/) returns the JSON as a dict.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zero/core/node_memory.h"
#include "zero/train/arguments.h"
#include "zero/train/command_arguments.h"
#include "zero/train/plan.h"

namespace zero::train {

// What `zero estimate` found.
struct Estimate {
  bool by_counts = false;  // --params: bare parameter counts, no activations
  Hardware hardware;
  PlanSetup setup;
  std::int64_t total_params = 0;
  std::int64_t largest = 0;
  RankPlan plan;  // rank 0's
  std::vector<Candidate> ranked;
  std::int64_t max_batch = 0;
  // The fewest first blocks to recompute for the GPU and host table to fit (Fit::fits;
  // smallest_recompute_blocks): 0 when none is needed, -1 when even every block does not fit or
  // with --params. --recompute_blocks auto plans the run with it (every block when -1).
  int fewest_recompute_blocks = -1;
  Fit fit;
  // The whole run's phases against the planned node, of --cpu_memory: GPU ranks' resident host
  // bytes (the device's memory is the GPU's), and what makes it fit when it does not. Without
  // --cpu_memory the node's memory is unknown: node_checked is false and node_fit holds only the
  // largest phase (this machine's memory is not the planned node's; `zero train` checks its own).
  NodeMemory node;
  bool node_checked = false;
  NodeFit node_fit;
  FitProposal proposal;
  // Where hardware.nvme_memory came from: "--nvme_memory", "free under PATH" (--nvme_memory auto
  // and the config's nvme_path exists here), or empty: not checked.
  std::string nvme_source;

  // The one answer to "does it fit": each GPU, the node's host bytes and every phase on the
  // node, against the budgets fits_budget() names.
  bool fits() const { return fit.fits() && (!node_checked || node_fit.fits); }
  // "80.00 GiB per GPU (--gpu_memory); node memory not checked (--cpu_memory not given)", or with
  // the node's memory; then the node's NVMe budget where it is checked.
  std::string fits_budget() const;
  // The node's verdict: NodeFit::message(), or why it was not checked and the largest phase.
  std::string node_message() const;
};

// The ranking `rank_configurations` applies, in words (printed above the table and in the JSON).
extern const char* const kRankingRule;

// Plans the run `a` and `e` describe (`a` as parsed from estimate's flags, with given_flags set):
// Hub ids resolved from the local Hugging Face cache and the config precedence rule applied as
// `zero train` applies them (each adds a line to `notes`, which the CLI prints on stderr).
// Throws cli::UsageError for contradictory or malformed estimate flags and InputError for a model
// or config the planner cannot read.
Estimate estimate_run(TrainingArguments& a, const EstimateArguments& e,
                      std::vector<std::string>& notes);

// `zero estimate --json`'s object, indented by 2 (with e.deepspeed_compat, DeepSpeed 0.19's
// estimator rows too).
std::string estimate_json(const Estimate& estimate, const EstimateArguments& e);

// A rank's plan as JSON: its memory spaces (per category peak, peak in use, peak reserved), the
// ZeRO formula's model-state bytes, parameters and collectives (`zero.plan` in Python).
std::string rank_plan_json(const RankPlan& plan);

}  // namespace zero::train
