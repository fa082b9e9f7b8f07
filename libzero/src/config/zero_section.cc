// zero_optimization with its offload sub-sections, deprecated aliases and stage-dependent defaults.
#include <string>

#include "auto_fill.h"

namespace zero::config::detail {

namespace {

void read_device(ObjectReader& reader, OffloadDevice& device) {
  std::string name(name_of(device));
  if (!reader.read("device", name)) return;
  if (name == "none") {
    device = OffloadDevice::kNone;
  } else if (name == "cpu") {
    device = OffloadDevice::kCpu;
  } else if (name == "nvme") {
    device = OffloadDevice::kNvme;
  } else {
    reader.error("device", "expected \"none\", \"cpu\" or \"nvme\", got \"" + name + "\"");
  }
}

void read_nvme_path(ObjectReader& reader, std::string& nvme_path) {
  const Json* value = reader.find("nvme_path");
  if (value != nullptr && value->is_null()) return;
  reader.read("nvme_path", nvme_path);
}

void check_nvme_path(ObjectReader& reader, OffloadDevice device, const std::string& nvme_path) {
  if (device == OffloadDevice::kNvme && nvme_path.empty())
    reader.error("nvme_path", "required when device is \"nvme\" (the folder the swap files go to)");
}

void read_offload_param(const Json& section, Diagnostics& diagnostics,
                        OffloadParamConfig& offload) {
  if (section.is_null()) return;
  if (!section.is_object()) {
    diagnostics.errors.push_back("zero_optimization.offload_param: expected an object, got " +
                                 describe(section));
    return;
  }
  ObjectReader reader(section, "zero_optimization.offload_param", diagnostics,
                      Strictness::kPydantic);
  read_device(reader, offload.device);
  read_nvme_path(reader, offload.nvme_path);
  reader.read("buffer_count", offload.buffer_count, 0);
  reader.read("buffer_size", offload.buffer_size, 0);
  reader.read("max_in_cpu", offload.max_in_cpu, 0);
  reader.read("pin_memory", offload.pin_memory);
  reader.finish();
  check_nvme_path(reader, offload.device, offload.nvme_path);
}

void read_offload_optimizer(const Json& section, Diagnostics& diagnostics,
                            OffloadOptimizerConfig& offload) {
  if (section.is_null()) return;
  if (!section.is_object()) {
    diagnostics.errors.push_back("zero_optimization.offload_optimizer: expected an object, got " +
                                 describe(section));
    return;
  }
  ObjectReader reader(section, "zero_optimization.offload_optimizer", diagnostics,
                      Strictness::kPydantic);
  read_device(reader, offload.device);
  read_nvme_path(reader, offload.nvme_path);
  reader.read("buffer_count", offload.buffer_count, 0);
  reader.read("pin_memory", offload.pin_memory);
  reader.read("pipeline_read", offload.pipeline_read);
  reader.read("pipeline_write", offload.pipeline_write);
  reader.read("fast_init", offload.fast_init);
  reader.read("ratio", offload.ratio, 0.0, 1.0);
  reader.ignore_unless_default("super_offload", false);
  reader.ignore_unless_default("convert_grad_on_cpu", true);
  reader.ignore_unless_default("cpuadam_cores_perc", 0.8);
  reader.finish();
  check_nvme_path(reader, offload.device, offload.nvme_path);
}

// A deprecated boolean that turns an offload on with device cpu (cpu_offload, cpu_offload_param).
template <typename Offload>
void read_deprecated_offload(ObjectReader& reader, std::string_view old_key,
                             std::string_view new_key, Offload& offload) {
  bool enabled = false;
  if (!reader.has(old_key)) {
    reader.mark_known(old_key);
    return;
  }
  if (!reader.read(old_key, enabled)) return;
  if (reader.has(new_key)) {
    reader.error(old_key, "deprecated, and cannot be given together with its replacement '" +
                              std::string(new_key) + "'; keep only '" + std::string(new_key) + "'");
    return;
  }
  reader.warn(old_key, "deprecated; use \"" + std::string(new_key) + "\": {\"device\": \"cpu\"}");
  if (enabled) offload.device = OffloadDevice::kCpu;
}

// Keys DeepSpeed knows in zero_optimization that zero does not implement, with their defaults.
void ignore_unimplemented(ObjectReader& reader) {
  reader.ignore_unless_default("use_multi_rank_bucket_allreduce", true);
  reader.ignore_unless_default("elastic_checkpoint", false);
  reader.ignore_unless_default("legacy_stage1", false);
  reader.ignore_unless_default("zero_hpz_partition_size", 1);
  reader.ignore_unless_default("zero_quantized_weights", false);
  reader.ignore_unless_default("zero_quantized_nontrainable_weights", false);
  reader.ignore_unless_default("zero_quantized_gradients", false);
  reader.ignore_unless_default("zeropp_loco_param", nullptr);
  reader.ignore_unless_default("mics_shard_size", -1);
  reader.ignore_unless_default("mics_hierarchical_params_gather", false);
  reader.ignore_unless_default("memory_efficient_linear", true);
  reader.ignore_unless_default("pipeline_loading_checkpoint", false);
  reader.ignore_unless_default("override_module_apply", true);
  reader.ignore_unless_default("log_trace_cache_warnings", false);
  reader.ignore_unless_default("enable_sanity_checks", false);
  reader.ignore_unless_default("save_muon_momentum_buffer_in_memory", false);
  reader.ignore_unless_default("leaf_module", Json::object());
  for (const char* key : {"module_granularity_threshold", "stage3_module_granularity_threshold",
                          "partition_stream_chunk_size", "stage3_partition_stream_chunk_size"})
    reader.ignore_unless_default(key, 0);
  for (const char* key :
       {"use_all_reduce_for_fetch_params", "stage3_use_all_reduce_for_fetch_params",
        "allgather_sequential", "stage3_allgather_sequential"})
    reader.ignore_unless_default(key, false);
}

}  // namespace

void read_zero_optimization(ObjectReader& top, Diagnostics& diagnostics,
                            ZeroOptimizationConfig& zero) {
  top.mark_known("allgather_size");  // read only with the deprecated boolean form
  const Json* section = top.find("zero_optimization");
  if (section == nullptr) return;
  if (section->is_boolean()) {
    top.warn("zero_optimization", "the boolean form is deprecated; use {\"stage\": " +
                                      std::string(section->get<bool>() ? "1" : "0") + "}");
    zero.stage = section->get<bool>() ? 1 : 0;
    if (zero.stage > 0) top.read("allgather_size", zero.allgather_bucket_size, 0);
    return;
  }
  if (!section->is_object()) {
    top.error("zero_optimization",
              "expected an object (or the deprecated true/false), got " + describe(*section));
    return;
  }
  ObjectReader reader(*section, "zero_optimization", diagnostics, Strictness::kPydantic);
  reader.read("stage", zero.stage, 0, 3);
  reader.read("contiguous_gradients", zero.contiguous_gradients);
  reader.read("reduce_scatter", zero.reduce_scatter);
  reader.read("reduce_bucket_size", zero.reduce_bucket_size, 0);
  reader.read("allgather_partitions", zero.allgather_partitions);
  reader.read("allgather_bucket_size", zero.allgather_bucket_size, 0);
  // overlap_comm: absent or null means DeepSpeed's dynamic default, true only for stage 3.
  zero.overlap_comm = zero.stage == 3;
  if (const Json* overlap = reader.find("overlap_comm"); overlap != nullptr && !overlap->is_null())
    reader.read("overlap_comm", zero.overlap_comm);
  reader.read("load_from_fp32_weights", zero.load_from_fp32_weights);
  reader.read("sub_group_size", zero.sub_group_size, 0);
  reader.read_either("stage3_prefetch_bucket_size", "prefetch_bucket_size",
                     zero.prefetch_bucket_size);
  reader.read_either("stage3_param_persistence_threshold", "param_persistence_threshold",
                     zero.param_persistence_threshold);
  reader.read_either("stage3_model_persistence_threshold", "model_persistence_threshold",
                     zero.model_persistence_threshold);
  reader.read_either("stage3_max_live_parameters", "max_live_parameters", zero.max_live_parameters);
  reader.read_either("stage3_max_reuse_distance", "max_reuse_distance", zero.max_reuse_distance);
  reader.read_either("stage3_gather_16bit_weights_on_model_save",
                     "gather_16bit_weights_on_model_save", zero.gather_16bit_weights_on_model_save);
  constexpr std::string_view kOldGather = "stage3_gather_fp16_weights_on_model_save";
  if (reader.has(kOldGather)) {
    if (reader.has("stage3_gather_16bit_weights_on_model_save") ||
        reader.has("gather_16bit_weights_on_model_save")) {
      reader.error(kOldGather,
                   "deprecated, and cannot be given together with its replacement "
                   "'stage3_gather_16bit_weights_on_model_save'; keep only the latter");
      reader.mark_known(kOldGather);
    } else if (reader.read(kOldGather, zero.gather_16bit_weights_on_model_save)) {
      reader.warn(kOldGather, "deprecated; use 'stage3_gather_16bit_weights_on_model_save'");
    }
  } else {
    reader.mark_known(kOldGather);
  }
  reader.read("ignore_unused_parameters", zero.ignore_unused_parameters);
  reader.read("round_robin_gradients", zero.round_robin_gradients);

  if (const Json* offload = reader.find("offload_optimizer"))
    read_offload_optimizer(*offload, diagnostics, zero.offload_optimizer);
  if (const Json* offload = reader.find("offload_param"))
    read_offload_param(*offload, diagnostics, zero.offload_param);
  read_deprecated_offload(reader, "cpu_offload", "offload_optimizer", zero.offload_optimizer);
  read_deprecated_offload(reader, "cpu_offload_param", "offload_param", zero.offload_param);
  if (bool pin = false;
      reader.has("cpu_offload_use_pin_memory") && reader.read("cpu_offload_use_pin_memory", pin)) {
    reader.warn("cpu_offload_use_pin_memory",
                "deprecated and without effect (as in DeepSpeed); set \"pin_memory\" inside "
                "offload_optimizer / offload_param");
  }
  reader.mark_known("cpu_offload_use_pin_memory");
  if (const Json* zenflow = reader.find("zenflow"); zenflow != nullptr && !zenflow->is_null()) {
    if (!zenflow->is_object())
      reader.error("zenflow", "expected an object, got " + describe(*zenflow));
    else
      reader.warn("zenflow",
                  "ZenFlow is not implemented by zero; ignored (training runs as plain "
                  "ZeRO with the offload settings above)");
  }
  ignore_unimplemented(reader);
  reader.finish();

  if (zero.offload_optimizer.ratio < 1.0 && zero.stage != 3)
    reader.error(
        "offload_optimizer.ratio",
        "partial offload (ratio < 1) needs stage 3, the stage is " + std::to_string(zero.stage));
  if (zero.offload_param.device != OffloadDevice::kNone && zero.stage != 3)
    reader.warn("offload_param", "parameter offload applies to stage 3 only; ignored at stage " +
                                     std::to_string(zero.stage));
}

}  // namespace zero::config::detail
