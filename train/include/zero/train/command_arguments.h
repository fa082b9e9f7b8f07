// The values of the flags that are not TrainingArguments fields: each command's own. The member
// initialisers are those flags' defaults, as TrainingArguments' are for the Hugging Face ones.
#pragma once

#include <cstdint>
#include <string>

#include "zero/train/plan.h"

namespace zero::train {

// `zero train`'s own flags that act in the command, not in train().
struct TrainCommandArguments {
  bool no_plot = false;             // becomes TrainingArguments::plot = false
  bool bind_cores_to_rank = false;  // pins the rank's CPUs before any thread starts
};

// `zero estimate`'s own flags: the hardware, the ZeRO setup without a config, and the output.
struct EstimateArguments {
  std::string params;                // total parameters as text ("7e9"); empty: a GPT-2 model
  std::string largest_layer_params;  // with params: the engine's largest unit
  int num_gpus_per_node = 1;
  int num_nodes = 1;
  std::string gpu_memory = "80GiB";  // per GPU, a size ("80", "80GiB", "85.9GB", ...)
  std::string cpu_memory = "0";      // per node; 0: not checked
  // Per node, the disk the nvme_paths share; "auto": the free space under the config's nvme_path
  // (offload_param's, else offload_optimizer's) when it exists, else not checked; 0: not checked.
  std::string nvme_memory = "auto";
  int zero_stage = -1;  // -1: not given (stage 0 without --deepspeed)
  std::string offload_optimizer = "none";
  std::string offload_param = "none";
  double cuda_context_mib = static_cast<double>(GpuAllowance{}.cuda_context >> 20);
  double cublas_workspace_mib = static_cast<double>(GpuAllowance{}.cublas_workspace >> 20);
  double cudnn_workspace_mib = static_cast<double>(GpuAllowance{}.cudnn_workspace >> 20);
  double nccl_mib = static_cast<double>(GpuAllowance{}.nccl >> 20);
  bool deepspeed_compat = false;  // also DeepSpeed 0.19's estimator tables
  double additional_buffer_factor = 1.5;
  bool json = false;  // one JSON object instead of tables
};

// `zero config`'s own flags.
struct ConfigArguments {
  std::string file;               // the DeepSpeed JSON config (positional)
  std::int64_t total_steps = -1;  // the same as --max_steps (-1: not given)
  std::int64_t hidden_size = -1;  // the model's (-1: not given)
  bool no_defaults = false;       // fill "auto" only from the flags given
};

}  // namespace zero::train
