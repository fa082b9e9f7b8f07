// The offload modes the engine offload tests run (engine_offload_test, engine_offload_state_test):
// DeepSpeed's offload_optimizer / offload_param settings as EngineOptions.
#pragma once

#include <cstdint>
#include <string>

#include "zero/engine/options.h"

namespace zero::testing {

// kParamsCpu / kParamsNvme: offload_param alone (the step stays on the device).
// kCpuRatioParamsCpu / kCpuRatioParamsNvme: the partial offload with offload_param (the 16B
// placement of benchmarks/big_models.sh: the first sub-groups step on the device, every
// parameter shard rests off it).
enum class Mode {
  kNone,
  kCpu,
  kCpuParams,
  kNvme,
  kNvmeParams,
  kCpuRatio,
  kParamsCpu,
  kParamsNvme,
  kCpuRatioParamsCpu,
  kCpuRatioParamsNvme
};

inline std::string name_of(Mode mode) {
  switch (mode) {
    case Mode::kNone: return "none";
    case Mode::kCpu: return "optimizer cpu";
    case Mode::kCpuParams: return "optimizer + params cpu";
    case Mode::kNvme: return "optimizer nvme";
    case Mode::kNvmeParams: return "optimizer + params nvme";
    case Mode::kCpuRatio: return "optimizer cpu, ratio 0.5";
    case Mode::kParamsCpu: return "params cpu";
    case Mode::kParamsNvme: return "params nvme";
    case Mode::kCpuRatioParamsCpu: return "optimizer cpu, ratio 0.5, params cpu";
    case Mode::kCpuRatioParamsNvme: return "optimizer cpu, ratio 0.5, params nvme";
  }
  return "?";
}

// `sub_group_size` in elements; `max_in_cpu` keeps the first unit's shard cached with nvme
// parameters (the others are swapped).
inline void apply_offload(EngineOptions& options, Mode mode, std::int64_t sub_group_size,
                          std::int64_t max_in_cpu) {
  using config::OffloadDevice;
  options.sub_group_size = sub_group_size;
  switch (mode) {
    case Mode::kNone: return;
    case Mode::kParamsCpu:
      options.offload_param.device = OffloadDevice::kCpu;
      options.offload_param.pin_memory = true;
      return;
    case Mode::kParamsNvme:
      options.offload_param.device = OffloadDevice::kNvme;
      options.offload_param.nvme_path = "/offload-test/params";
      options.offload_param.max_in_cpu = max_in_cpu;
      return;
    case Mode::kCpuRatio:  // the first half of the sub-groups stay on the device (stage 3)
      options.offload_optimizer.device = OffloadDevice::kCpu;
      options.offload_optimizer.ratio = 0.5;
      return;
    case Mode::kCpuRatioParamsCpu:
      apply_offload(options, Mode::kCpuRatio, sub_group_size, max_in_cpu);
      apply_offload(options, Mode::kParamsCpu, sub_group_size, max_in_cpu);
      options.offload_optimizer.pin_memory = true;
      return;
    case Mode::kCpuRatioParamsNvme:
      apply_offload(options, Mode::kCpuRatio, sub_group_size, max_in_cpu);
      apply_offload(options, Mode::kParamsNvme, sub_group_size, max_in_cpu);
      options.offload_param.pin_memory = true;
      return;
    case Mode::kCpu:
    case Mode::kCpuParams:
      options.offload_optimizer.device = OffloadDevice::kCpu;
      options.offload_optimizer.pin_memory = true;
      if (mode == Mode::kCpuParams) options.offload_param.device = OffloadDevice::kCpu;
      return;
    case Mode::kNvme:
    case Mode::kNvmeParams:
      options.offload_optimizer.device = OffloadDevice::kNvme;
      options.offload_optimizer.nvme_path = "/offload-test/optimizer";
      options.offload_optimizer.pipeline_read = true;
      options.offload_optimizer.pipeline_write = true;
      if (mode == Mode::kNvmeParams) {
        options.offload_param.device = OffloadDevice::kNvme;
        options.offload_param.nvme_path = "/offload-test/params";
        options.offload_param.pin_memory = true;
        options.offload_param.max_in_cpu = max_in_cpu;
      }
      return;
  }
}

// The partial offload (offload_optimizer.ratio 0.5), with or without offload_param.
inline bool uses_ratio(Mode mode) {
  return mode == Mode::kCpuRatio || mode == Mode::kCpuRatioParamsCpu ||
         mode == Mode::kCpuRatioParamsNvme;
}
inline bool uses_params(Mode mode) {
  return mode == Mode::kCpuParams || mode == Mode::kNvmeParams || mode == Mode::kParamsCpu ||
         mode == Mode::kParamsNvme || mode == Mode::kCpuRatioParamsCpu ||
         mode == Mode::kCpuRatioParamsNvme;
}
inline bool params_only(Mode mode) { return mode == Mode::kParamsCpu || mode == Mode::kParamsNvme; }
// Modes that run at stage 3 only: parameter offload and the partial offload (DeepSpeed's rule).
inline bool stage3_only(Mode mode) { return uses_params(mode) || uses_ratio(mode); }
inline constexpr Mode kModes[] = {
    Mode::kCpu,        Mode::kCpuParams,         Mode::kNvme,
    Mode::kNvmeParams, Mode::kCpuRatio,          Mode::kParamsCpu,
    Mode::kParamsNvme, Mode::kCpuRatioParamsCpu, Mode::kCpuRatioParamsNvme};

}  // namespace zero::testing
