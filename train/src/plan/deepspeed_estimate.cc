// DeepSpeed 0.19's model-state estimators, as deepspeed/runtime/zero/stage_1_and_2.py
// (estimate_zero2_model_states_mem_needs{,_all_cold}) and stage3.py
// (estimate_zero3_model_states_mem_needs{,_all_cold}) compute and print them: the same
// arithmetic in the same order in doubles (Python's floats), truncated by int() where DeepSpeed
// truncates, printed with the same format specifications. Checked against DeepSpeed's own
// functions (tests/train/plan_test.cc).
#include <cstdio>
#include <sstream>

#include "zero/core/error.h"
#include "zero/train/plan.h"

namespace zero::train {
namespace {

// f'{OffloadDeviceEnum.cpu:4}': DeepSpeed formats a str-mixin Enum member, which the Python of
// this project's environment (3.11, where Enum.__format__ uses str()) prints as the member's
// qualified name; Pythons before 3.11 print "cpu " instead.
constexpr const char* kCpuDevice = "OffloadDeviceEnum.cpu";

std::int64_t truncate(double value) { return static_cast<std::int64_t>(value); }  // Python int()

void check_hardware(int gpus_per_node, int nodes) {
  ZERO_CHECK(gpus_per_node >= 1, "--num_gpus_per_node must be at least 1, got ", gpus_per_node);
  ZERO_CHECK(nodes >= 1, "--num_nodes must be at least 1, got ", nodes);
}

std::string header(double total_params, int gpus_per_node, int nodes) {
  std::ostringstream out;
  out << "Estimated memory needed for params, optim states and gradients for a:\n"
      << "HW: Setup with " << nodes << " " << (nodes > 1 ? "nodes" : "node") << ", "
      << gpus_per_node << " " << (gpus_per_node > 1 ? "GPUs" : "GPU") << " per node.\n"
      << "SW: Model with " << truncate(total_params / 1e6) << "M total params";
  return out.str();
}

std::string rows_text(const std::vector<DeepSpeedEstimateRow>& rows) {
  std::string text = "  per CPU  |  per GPU |   Options\n";
  for (const DeepSpeedEstimateRow& row : rows) {
    char line[256];
    std::snprintf(line, sizeof(line), " %7.2fGB | %6.2fGB | %s\n",
                  static_cast<double>(row.cpu_bytes) / 1073741824.0,
                  static_cast<double>(row.gpu_bytes) / 1073741824.0, row.options.c_str());
    text += line;
  }
  return text;
}

}  // namespace

std::vector<DeepSpeedEstimateRow> deepspeed_zero2_rows(double total_params, int gpus_per_node,
                                                       int nodes, double additional_buffer_factor) {
  check_hardware(gpus_per_node, nodes);
  const double P = total_params, f = additional_buffer_factor;
  const int total_gpus = nodes * gpus_per_node;
  std::vector<DeepSpeedEstimateRow> rows;
  for (const bool cpu_offload : {true, false}) {
    double cpu_mem = 0.0, gpu_mem = 0.0;
    if (cpu_offload) {
      gpu_mem = 2 * P;
      cpu_mem = P * std::max(4 * total_gpus, 16) * f;
    } else {
      gpu_mem = 2 * P + static_cast<double>(truncate(18 * P / total_gpus));
      cpu_mem = P * 4 * gpus_per_node * f;
    }
    rows.push_back({truncate(cpu_mem), truncate(gpu_mem),
                    std::string("offload_optimizer=") + (cpu_offload ? kCpuDevice : "none")});
  }
  return rows;
}

std::vector<DeepSpeedEstimateRow> deepspeed_zero3_rows(double total_params,
                                                       double largest_layer_params,
                                                       int gpus_per_node, int nodes,
                                                       double additional_buffer_factor) {
  check_hardware(gpus_per_node, nodes);
  const double P = total_params, L = largest_layer_params, f = additional_buffer_factor;
  const int total_gpus = nodes * gpus_per_node;
  const double gpus_factor = 1.0 / nodes;
  const double largest_layer_memory = 4 * L;
  std::vector<DeepSpeedEstimateRow> rows;
  for (const bool cpu_offload : {true, false})
    for (const bool cpu_offload_params : {true, false}) {
      if (!cpu_offload && cpu_offload_params) continue;
      for (const bool zero_init : {true, false}) {
        double cpu_mem = 0.0, gpu_mem = 0.0;
        if (cpu_offload) {
          const double states = cpu_offload_params ? 18 : 16;
          gpu_mem = cpu_offload_params
                        ? largest_layer_memory
                        : largest_layer_memory + static_cast<double>(truncate(2 * P / total_gpus));
          cpu_mem = zero_init ? P * states * gpus_factor * f
                              : P * std::max(4.0 * gpus_per_node, states * gpus_factor) * f;
        } else {
          gpu_mem = largest_layer_memory + static_cast<double>(truncate(18 * P / total_gpus));
          cpu_mem = zero_init ? L * 4 * gpus_per_node * f : P * 4 * gpus_per_node * f;
        }
        std::string options = std::string("offload_param=") +
                              (cpu_offload_params ? kCpuDevice : "none") +
                              ", offload_optimizer=" + (cpu_offload ? kCpuDevice : "none") +
                              ", zero_init=" + (zero_init ? "1" : "0");
        rows.push_back({truncate(cpu_mem), truncate(gpu_mem), std::move(options)});
      }
    }
  return rows;
}

std::string deepspeed_zero2_text(double total_params, int gpus_per_node, int nodes,
                                 double additional_buffer_factor) {
  return header(total_params, gpus_per_node, nodes) + ".\n" +
         rows_text(
             deepspeed_zero2_rows(total_params, gpus_per_node, nodes, additional_buffer_factor));
}

std::string deepspeed_zero3_text(double total_params, double largest_layer_params,
                                 int gpus_per_node, int nodes, double additional_buffer_factor) {
  std::ostringstream out;
  out << header(total_params, gpus_per_node, nodes) << ", " << truncate(largest_layer_params / 1e6)
      << "M largest layer params.\n";
  return out.str() +
         rows_text(deepspeed_zero3_rows(total_params, largest_layer_params, gpus_per_node, nodes,
                                        additional_buffer_factor));
}

}  // namespace zero::train
