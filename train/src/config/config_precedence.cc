// Config precedence (zero/train/config_precedence.h): which side of a flag/config pair wins.
#include "zero/train/config_precedence.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "zero/core/error.h"
#include "zero/train/input_error.h"

namespace zero::train {

namespace {

using nlohmann::json;

// The value at a dotted path ("optimizer.params.lr"; "betas.0" indexes an array), or nullptr.
const json* find_path(const json& root, std::string_view path) {
  const json* node = &root;
  while (!path.empty()) {
    const std::size_t dot = path.find('.');
    const std::string part(path.substr(0, dot));
    if (node->is_object()) {
      const auto found = node->find(part);
      if (found == node->end()) return nullptr;
      node = &*found;
    } else if (node->is_array() && !part.empty() &&
               part.find_first_not_of("0123456789") == std::string::npos) {
      const std::size_t index = std::stoul(part);
      if (index >= node->size()) return nullptr;
      node = &(*node)[index];
    } else {
      return nullptr;
    }
    path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
  }
  return node;
}

// A value written in the config: present, not null, not "auto".
bool written(const json& root, std::string_view path) {
  const json* node = find_path(root, path);
  return node != nullptr && !node->is_null() && !(node->is_string() && *node == "auto");
}

json parse(std::string_view json_text) {
  // Invalid JSON is resolve_config's to report, with its own message.
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  return root.is_discarded() ? json::object() : root;
}

// The scalar flags and the config keys they fill ("auto") or must agree with.
struct Pair {
  const char* flag;
  const char* path;
};
constexpr Pair kPairs[] = {
    {"max_grad_norm", "gradient_clipping"},
    {"learning_rate", "optimizer.params.lr"},
    {"adam_beta1", "optimizer.params.betas.0"},
    {"adam_beta2", "optimizer.params.betas.1"},
    {"adam_epsilon", "optimizer.params.eps"},
    {"weight_decay", "optimizer.params.weight_decay"},
    {"warmup_steps", "scheduler.params.warmup_num_steps"},
    {"fp16", "fp16.enabled"},
    {"bf16", "bf16.enabled"},
    {"bf16", "bfloat16.enabled"},
};

bool config_wins(const TrainingArguments& arguments, const json& root, std::string_view flag) {
  if (arguments.was_given(flag)) return false;
  for (const Pair& pair : kPairs)
    if (pair.flag == flag && written(root, pair.path)) return true;
  return false;
}

// Whether the config writes the batch size that --per_device_train_batch_size /
// --gradient_accumulation_steps would otherwise set.
bool config_sets_micro(const json& root) {
  return written(root, "train_micro_batch_size_per_gpu") || written(root, "train_batch_size");
}
bool config_sets_accumulation(const json& root) {
  return written(root, "gradient_accumulation_steps") ||
         (written(root, "train_batch_size") && written(root, "train_micro_batch_size_per_gpu"));
}

template <typename Value>
std::optional<Value> unless(bool config_wins, Value value) {
  if (config_wins) return std::nullopt;
  return value;
}

std::string number_text(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

}  // namespace

std::string with_batch_from_flags(const std::string& json_text) {
  json root = parse(json_text);
  if (!root.is_object() || root.empty()) return json_text;
  for (const char* key :
       {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"})
    if (root.contains(key)) return json_text;
  root["train_micro_batch_size_per_gpu"] = "auto";
  return root.dump();
}

std::string read_deepspeed_file(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error))
    throw InputError("--deepspeed " + path + ": no such file");
  if (std::filesystem::is_directory(path, error))
    throw InputError("--deepspeed " + path + ": is a directory, not a DeepSpeed config file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("--deepspeed " + path + ": cannot be read (check its permissions)");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

config::TrainerValues trainer_values_by_precedence(const TrainingArguments& arguments,
                                                   std::string_view json_text,
                                                   std::int64_t world_size,
                                                   std::optional<std::int64_t> total_steps,
                                                   std::optional<std::int64_t> hidden_size) {
  const json root = parse(json_text);
  const TrainingArguments& a = arguments;
  config::TrainerValues values = trainer_values(a, world_size, total_steps.value_or(0), 0);
  values.total_steps = total_steps;
  values.hidden_size = hidden_size;
  const bool micro_from_file =
      !a.was_given("per_device_train_batch_size") && config_sets_micro(root);
  const bool accumulation_from_file =
      !a.was_given("gradient_accumulation_steps") && config_sets_accumulation(root);
  values.per_device_train_batch_size = unless(micro_from_file, a.per_device_train_batch_size);
  values.gradient_accumulation_steps =
      unless(accumulation_from_file, a.gradient_accumulation_steps);
  values.max_grad_norm = unless(config_wins(a, root, "max_grad_norm"), a.max_grad_norm);
  values.learning_rate = unless(config_wins(a, root, "learning_rate"), a.learning_rate);
  values.adam_beta1 = unless(config_wins(a, root, "adam_beta1"), a.adam_beta1);
  values.adam_beta2 = unless(config_wins(a, root, "adam_beta2"), a.adam_beta2);
  values.adam_epsilon = unless(config_wins(a, root, "adam_epsilon"), a.adam_epsilon);
  values.weight_decay = unless(config_wins(a, root, "weight_decay"), a.weight_decay);
  if (config_wins(a, root, "warmup_steps")) values.warmup_steps.reset();
  values.fp16 = unless(config_wins(a, root, "fp16"), a.fp16);
  values.bf16 = unless(config_wins(a, root, "bf16"), a.bf16);
  if (!a.was_given("max_steps") && written(root, "scheduler.params.total_num_steps"))
    values.total_steps.reset();
  return values;
}

namespace {

// The lines apply_config_precedence returns: "--flag value (key in file)".
class FromFile {
 public:
  explicit FromFile(std::string file) : file_(std::move(file)) {}
  void took(std::string_view flag, const std::string& value, std::string_view key) {
    lines_.push_back("--" + std::string(flag) + " " + value + " (" + std::string(key) + " in " +
                     file_ + ")");
  }
  std::vector<std::string>& lines() { return lines_; }

 private:
  std::string file_;
  std::vector<std::string> lines_;
};

// The batch flags `values` leaves to the file, as DeepSpeed's batch rule resolves the file's
// batch keys for the world size (the rest of the file is resolved, and its contradictions
// reported, when the engine is set up, under the same rule).
void take_batch(TrainingArguments& arguments, const json& root, const config::TrainerValues& values,
                FromFile& from_file) {
  if (values.per_device_train_batch_size && values.gradient_accumulation_steps) return;
  json subset = json::object();
  for (const char* key :
       {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"})
    if (root.contains(key)) subset[key] = root[key];
  config::DeepSpeedConfig resolved;
  try {
    resolved = config::resolve_config(subset.dump(), values, arguments.deepspeed).config;
  } catch (const std::exception& error) {
    throw InputError("--deepspeed " + arguments.deepspeed + ": " + error.what());
  }
  if (!values.per_device_train_batch_size) {
    arguments.per_device_train_batch_size = resolved.train_micro_batch_size_per_gpu;
    from_file.took(
        "per_device_train_batch_size", std::to_string(resolved.train_micro_batch_size_per_gpu),
        written(root, "train_micro_batch_size_per_gpu") ? "train_micro_batch_size_per_gpu"
                                                        : "train_batch_size");
  }
  if (!values.gradient_accumulation_steps) {
    arguments.gradient_accumulation_steps = resolved.gradient_accumulation_steps;
    from_file.took("gradient_accumulation_steps",
                   std::to_string(resolved.gradient_accumulation_steps),
                   written(root, "gradient_accumulation_steps") ? "gradient_accumulation_steps"
                                                                : "train_batch_size");
  }
}

// The scalar flags not given whose keys the file writes take the file's values.
void take_scalars(TrainingArguments& arguments, const json& root, FromFile& from_file) {
  auto number = [&](const char* flag, const char* path, double& field) {
    const json* node = find_path(root, path);
    if (!config_wins(arguments, root, flag) || node == nullptr || !node->is_number()) return;
    field = node->get<double>();  // (a bad type is resolve_config's to report)
    from_file.took(flag, number_text(field), path);
  };
  number("max_grad_norm", "gradient_clipping", arguments.max_grad_norm);
  number("learning_rate", "optimizer.params.lr", arguments.learning_rate);
  number("adam_beta1", "optimizer.params.betas.0", arguments.adam_beta1);
  number("adam_beta2", "optimizer.params.betas.1", arguments.adam_beta2);
  number("adam_epsilon", "optimizer.params.eps", arguments.adam_epsilon);
  number("weight_decay", "optimizer.params.weight_decay", arguments.weight_decay);
  const json* warmup = find_path(root, "scheduler.params.warmup_num_steps");
  if (config_wins(arguments, root, "warmup_steps") && warmup != nullptr &&
      warmup->is_number_integer()) {
    arguments.warmup_steps = static_cast<double>(warmup->get<std::int64_t>());
    from_file.took("warmup_steps", std::to_string(warmup->get<std::int64_t>()),
                   "scheduler.params.warmup_num_steps");
  }
  auto flag = [&](const char* name, const char* path, bool& field) {
    const json* node = find_path(root, path);
    if (!config_wins(arguments, root, name) || node == nullptr || !node->is_boolean()) return;
    field = node->get<bool>();
    from_file.took(name, field ? "True" : "False", path);
  };
  flag("fp16", "fp16.enabled", arguments.fp16);
  flag("bf16", "bf16.enabled", arguments.bf16);
  flag("bf16", "bfloat16.enabled", arguments.bf16);
}

}  // namespace

DeepSpeedText deepspeed_text_of(const TrainingArguments& arguments, const std::string& json_text) {
  static constexpr std::string_view kDefaultConfig =
      R"({"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
          "gradient_clipping": "auto", "zero_optimization": {"stage": 0},
          "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}})";
  if (!json_text.empty()) return {json_text, "(the options given)", "the DeepSpeed config"};
  if (arguments.deepspeed.empty())
    return {std::string(kDefaultConfig), "(no --deepspeed)", "the default config"};
  return {with_batch_from_flags(read_deepspeed_file(arguments.deepspeed)), arguments.deepspeed,
          "--deepspeed " + arguments.deepspeed};
}

std::vector<std::string> apply_config_precedence(TrainingArguments& arguments,
                                                 std::int64_t world_size) {
  if (arguments.deepspeed.empty()) return {};
  return apply_config_precedence(arguments, deepspeed_text_of(arguments), world_size);
}

std::vector<std::string> apply_config_precedence(TrainingArguments& arguments,
                                                 const DeepSpeedText& deepspeed,
                                                 std::int64_t world_size) {
  if (arguments.deepspeed.empty()) return {};
  const json root = parse(deepspeed.text);
  if (!root.is_object()) return {};  // resolve_config reports it (make_run_config)
  const config::TrainerValues values = trainer_values_by_precedence(
      arguments, deepspeed.text, world_size, std::nullopt, std::nullopt);
  FromFile from_file(arguments.deepspeed);
  take_batch(arguments, root, values, from_file);
  take_scalars(arguments, root, from_file);
  return std::move(from_file.lines());
}

}  // namespace zero::train
