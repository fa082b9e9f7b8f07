// optimizer and scheduler: type names and their keyword-argument params, as DeepSpeed builds them.
#include <algorithm>
#include <array>
#include <cctype>
#include <string>

#include "auto_fill.h"
#include "zero/core/suggest.h"

namespace zero::config::detail {

namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// Optimizers DeepSpeed accepts that zero does not implement (lower case, as DeepSpeed compares).
constexpr std::string_view kOtherOptimizers[] = {
    "adagrad", "onebitadam", "zerooneadam", "onebitlamb", "muadam", "muadamw",
    "musgd",   "lion",       "muon",        "rmsprop",    "adamax", "adadelta"};

constexpr std::array<std::string_view, 4> kOptimizerNames = {"Adam", "AdamW", "SGD", "Lamb"};
constexpr std::array<std::string_view, 5> kSchedulerNames = {
    "WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle", "LRRangeTest"};

// The object at "params" of `section`, or nullptr (absent, null or not an object: reported).
const Json* find_params(ObjectReader& section) {
  const Json* params = section.find("params");
  if (params == nullptr || params->is_null()) return nullptr;
  if (!params->is_object()) {
    section.error("params", "expected an object, got " + describe(*params));
    return nullptr;
  }
  return params;
}

// A pair of betas in [0, 1).
void read_betas(ObjectReader& params, std::array<double, 2>& betas) {
  const Json* value = params.find("betas");
  if (value == nullptr) return;
  if (value->is_string() && value->get_ref<const std::string&>() == "auto") {
    double ignored = 0.0;
    params.read("betas", ignored);  // reports the unfilled "auto" with its flags
    return;
  }
  if (!value->is_array() || value->size() != 2 || !(*value)[0].is_number() ||
      !(*value)[1].is_number()) {
    params.error("betas", "expected two numbers [beta1, beta2], got " + describe(*value));
    return;
  }
  for (std::size_t i = 0; i < 2; ++i) {
    const double beta = (*value)[i].get<double>();
    if (!(beta >= 0.0 && beta < 1.0)) {
      params.error("betas", "expected each beta in [0, 1), got " + describe(*value));
      return;
    }
  }
  betas = {(*value)[0].get<double>(), (*value)[1].get<double>()};
}

void read_optimizer_params(ObjectReader& params, OptimizerConfig& optimizer) {
  params.read("lr", optimizer.lr, 0.0);
  params.read("weight_decay", optimizer.weight_decay, 0.0);
  if (params.has("max_grad_norm")) {
    params.error("max_grad_norm",
                 "not an optimizer parameter in DeepSpeed; use the top-level "
                 "\"gradient_clipping\"");
  }
  params.mark_known("max_grad_norm");
  switch (optimizer.type) {
    case OptimizerType::kAdam:
    case OptimizerType::kAdamW: {
      read_betas(params, optimizer.betas);
      params.read("eps", optimizer.eps, 0.0);
      params.read("bias_correction", optimizer.bias_correction);
      params.read("torch_adam", optimizer.torch_adam);
      bool adam_w_mode = true;
      if (params.read("adam_w_mode", adam_w_mode) && !adam_w_mode &&
          optimizer.type == OptimizerType::kAdamW)
        params.warn("adam_w_mode",
                    "false has no effect with AdamW, whose weight decay is always "
                    "decoupled (as in DeepSpeed); use type \"Adam\" for L2 decay");
      optimizer.adam_w_mode = optimizer.type == OptimizerType::kAdamW || adam_w_mode;
      bool amsgrad = false;
      if (params.read("amsgrad", amsgrad) && amsgrad)
        params.error("amsgrad", "AMSGrad is not supported (DeepSpeed's FusedAdam rejects it too)");
      params.ignore_unless_default("set_grad_none", true);
      params.ignore_unless_default("fp32_optimizer_states", true);
      if (optimizer.torch_adam) {
        // DeepSpeed then builds torch.optim.Adam or AdamW from the remaining params: no
        // bias_correction argument, and AdamW's own weight decay default of 0.01.
        if (params.has("bias_correction"))
          params.error("bias_correction",
                       "not an argument of torch.optim.Adam/AdamW, which "
                       "\"torch_adam\": true selects");
        if (optimizer.adam_w_mode && !params.has("weight_decay")) optimizer.weight_decay = 0.01;
      }
      break;
    }
    case OptimizerType::kLamb: {
      read_betas(params, optimizer.betas);
      params.read("eps", optimizer.eps, 0.0);
      params.read("bias_correction", optimizer.bias_correction);
      params.read("eps_inside_sqrt", optimizer.eps_inside_sqrt);
      params.read("max_coeff", optimizer.max_coeff, 0.0);
      params.read("min_coeff", optimizer.min_coeff, 0.0);
      bool amsgrad = false;
      if (params.read("amsgrad", amsgrad) && amsgrad)
        params.error("amsgrad", "AMSGrad is not supported (DeepSpeed's FusedLamb rejects it too)");
      break;
    }
    case OptimizerType::kSgd: {
      params.read("momentum", optimizer.momentum, 0.0);
      params.read("dampening", optimizer.dampening);
      params.read("nesterov", optimizer.nesterov);
      if (optimizer.nesterov && (optimizer.momentum <= 0.0 || optimizer.dampening != 0.0))
        params.error("nesterov",
                     "Nesterov momentum requires momentum > 0 and dampening 0 (as in "
                     "torch.optim.SGD)");
      break;
    }
    case OptimizerType::kNone: break;
  }
  params.finish();
}

}  // namespace

void read_optimizer(ObjectReader& top, Diagnostics& diagnostics, OptimizerConfig& optimizer) {
  const Json* section = top.find("optimizer");
  if (section == nullptr || section->is_null()) return;
  if (!section->is_object()) {
    top.error("optimizer",
              "expected an object {\"type\": ..., \"params\": {...}}, got " + describe(*section));
    return;
  }
  ObjectReader reader(*section, "optimizer", diagnostics, Strictness::kLenient);
  std::string name;
  reader.ignore_unless_default("legacy_fusion", false);
  if (!reader.has("type")) {
    reader.mark_known("type");
    reader.mark_known("params");
    reader.error("type", "missing; expected one of Adam, AdamW, SGD, Lamb");
    reader.finish();
    return;
  }
  if (!reader.read("type", name)) {
    reader.mark_known("params");
    reader.finish();
    return;
  }
  // DeepSpeed compares its own optimizer names case-insensitively.
  const std::string key = lower(name);
  if (key == "adam") {
    optimizer.type = OptimizerType::kAdam;
  } else if (key == "adamw") {
    optimizer.type = OptimizerType::kAdamW;
  } else if (key == "lamb") {
    optimizer.type = OptimizerType::kLamb;
  } else if (key == "sgd") {
    optimizer.type = OptimizerType::kSgd;
  } else {
    const bool known = std::find(std::begin(kOtherOptimizers), std::end(kOtherOptimizers), key) !=
                       std::end(kOtherOptimizers);
    std::string message = "\"" + name + "\" is " +
                          (known ? std::string("a DeepSpeed optimizer that zero does not implement")
                                 : std::string("not an optimizer zero knows")) +
                          "; expected one of Adam, AdamW, SGD, Lamb";
    if (!known)
      if (auto nearest = nearest_name(name, std::span<const std::string_view>(kOptimizerNames)))
        message += "; did you mean '" + *nearest + "'?";
    reader.error("type", message);
    reader.mark_known("params");
    reader.finish();
    return;
  }
  if (const Json* params = find_params(reader)) {
    ObjectReader params_reader(*params, "optimizer.params", diagnostics, Strictness::kKwargs);
    read_optimizer_params(params_reader, optimizer);
  } else {
    optimizer.adam_w_mode =
        optimizer.type == OptimizerType::kAdam || optimizer.type == OptimizerType::kAdamW;
  }
  if (optimizer.type == OptimizerType::kSgd || optimizer.type == OptimizerType::kLamb)
    optimizer.adam_w_mode = false;
  reader.finish();
}

void read_scheduler(ObjectReader& top, Diagnostics& diagnostics, const OptimizerConfig& optimizer,
                    SchedulerConfig& scheduler) {
  const Json* section = top.find("scheduler");
  if (section == nullptr || section->is_null()) return;
  if (!section->is_object()) {
    top.error("scheduler",
              "expected an object {\"type\": ..., \"params\": {...}}, got " + describe(*section));
    return;
  }
  ObjectReader reader(*section, "scheduler", diagnostics, Strictness::kLenient);
  reader.mark_known("params");
  std::string name;
  if (!reader.has("type")) {
    reader.mark_known("type");
    reader.error("type",
                 "missing; expected one of WarmupLR, WarmupDecayLR, WarmupCosineLR, "
                 "OneCycle, LRRangeTest");
    reader.finish();
    return;
  }
  if (!reader.read("type", name)) {
    reader.finish();
    return;
  }
  const auto found = std::find(kSchedulerNames.begin(), kSchedulerNames.end(), name);
  if (found == kSchedulerNames.end()) {
    std::string message = "\"" + name +
                          "\" is not a scheduler zero implements; expected one of "
                          "WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest";
    if (auto nearest = nearest_name(name, std::span<const std::string_view>(kSchedulerNames)))
      message += "; did you mean '" + *nearest + "'?";
    reader.error("type", message);
    reader.finish();
    return;
  }
  constexpr SchedulerType kTypes[] = {SchedulerType::kWarmupLR, SchedulerType::kWarmupDecayLR,
                                      SchedulerType::kWarmupCosineLR, SchedulerType::kOneCycle,
                                      SchedulerType::kLRRangeTest};
  scheduler.type = kTypes[found - kSchedulerNames.begin()];
  static const Json kEmpty = Json::object();
  const Json* params_value = find_params(reader);
  ObjectReader params(params_value ? *params_value : kEmpty, "scheduler.params", diagnostics,
                      Strictness::kKwargs);
  params.ignore_unless_default("last_batch_iteration", -1);
  auto read_warmup_type = [&] {
    std::string type = "log";
    if (!params.read("warmup_type", type)) return;
    if (type == "linear") {
      scheduler.warmup_type = WarmupType::kLinear;
    } else if (type != "log") {
      params.warn("warmup_type", "\"" + type +
                                     "\" is neither \"log\" nor \"linear\"; \"log\" is "
                                     "used (as DeepSpeed does)");
    }
  };
  auto require = [&](std::string_view key) {
    if (!params.has(key)) params.error(key, "required by " + name + " but missing");
  };
  switch (scheduler.type) {
    case SchedulerType::kWarmupLR:
    case SchedulerType::kWarmupDecayLR:
      params.read("warmup_min_lr", scheduler.warmup_min_lr, 0.0);
      // DeepSpeed's WarmupLR defaults warmup_max_lr to the optimizer's lr (None); WarmupDecayLR's
      // default is 0.001 (SchedulerConfig's).
      if (scheduler.type == SchedulerType::kWarmupLR && !params.has("warmup_max_lr"))
        scheduler.warmup_max_lr = optimizer.lr;
      params.read("warmup_max_lr", scheduler.warmup_max_lr, 0.0);
      params.read("warmup_num_steps", scheduler.warmup_num_steps, 0);
      read_warmup_type();
      if (scheduler.type == SchedulerType::kWarmupDecayLR) {
        require("total_num_steps");
        params.read("total_num_steps", scheduler.total_num_steps, 0);
      }
      break;
    case SchedulerType::kWarmupCosineLR:
      require("total_num_steps");
      params.read("total_num_steps", scheduler.total_num_steps, 0);
      params.read("warmup_min_ratio", scheduler.warmup_min_ratio, 0.0);
      params.read("warmup_num_steps", scheduler.warmup_num_steps, 1);
      params.read("cos_min_ratio", scheduler.cos_min_ratio, 0.0);
      read_warmup_type();
      break;
    case SchedulerType::kOneCycle: {
      require("cycle_min_lr");
      require("cycle_max_lr");
      params.read("cycle_min_lr", scheduler.cycle_min_lr, 0.0);
      params.read("cycle_max_lr", scheduler.cycle_max_lr, 0.0);
      params.read("decay_lr_rate", scheduler.decay_lr_rate, 0.0);
      params.read("cycle_first_step_size", scheduler.cycle_first_step_size, 1);
      scheduler.cycle_second_step_size = scheduler.cycle_first_step_size;
      if (const Json* value = params.find("cycle_second_step_size"); value && !value->is_null())
        params.read("cycle_second_step_size", scheduler.cycle_second_step_size, 1);
      params.read("cycle_first_stair_count", scheduler.cycle_first_stair_count, 0);
      scheduler.cycle_second_stair_count = scheduler.cycle_first_stair_count;
      if (const Json* value = params.find("cycle_second_stair_count"); value && !value->is_null())
        params.read("cycle_second_stair_count", scheduler.cycle_second_stair_count, 0);
      params.read("decay_step_size", scheduler.decay_step_size, 0);
      params.read("cycle_momentum", scheduler.cycle_momentum);
      params.read("cycle_min_mom", scheduler.cycle_min_mom, 0.0);
      params.read("cycle_max_mom", scheduler.cycle_max_mom, 0.0);
      params.read("decay_mom_rate", scheduler.decay_mom_rate, 0.0);
      break;
    }
    case SchedulerType::kLRRangeTest:
      params.read("lr_range_test_min_lr", scheduler.lr_range_test_min_lr, 0.0);
      params.read("lr_range_test_step_size", scheduler.lr_range_test_step_size, 1);
      params.read("lr_range_test_step_rate", scheduler.lr_range_test_step_rate, 0.0);
      params.read("lr_range_test_staircase", scheduler.lr_range_test_staircase);
      break;
    case SchedulerType::kNone: break;
  }
  params.finish();
  reader.finish();
}

}  // namespace zero::config::detail
