// "auto" resolution from trainer flags, after Hugging Face's HfTrainerDeepSpeedConfig table.
#include "auto_fill.h"

#include <array>
#include <optional>
#include <utility>

namespace zero::config::detail {

namespace {

bool is_auto(const Json& value) {
  return value.is_string() && value.get_ref<const std::string&>() == "auto";
}

// The value at a dotted `path` of `root`, or nullptr when any step is missing.
Json* find_path(Json& root, std::string_view path) {
  Json* node = &root;
  while (!path.empty()) {
    const auto dot = path.find('.');
    const std::string_view part = path.substr(0, dot);
    if (!node->is_object()) return nullptr;
    const auto it = node->find(part);
    if (it == node->end()) return nullptr;
    node = &*it;
    path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
  }
  return node;
}

// Whether a concrete config value agrees with a trainer value. Values of another JSON type are
// left to the typed reader, which reports them; they are not mismatches.
bool agrees(const Json& config_value, const Json& trainer_value) {
  if (config_value.is_number() && trainer_value.is_number())
    return config_value.get<double>() == trainer_value.get<double>();
  if (config_value.is_boolean() && trainer_value.is_boolean())
    return config_value.get<bool>() == trainer_value.get<bool>();
  return true;
}

std::optional<std::int64_t> concrete_integer(const Json* value) {
  if (value == nullptr || !value->is_number_integer()) return std::nullopt;
  if (value->is_number_unsigned() &&
      value->get<std::uint64_t>() > static_cast<std::uint64_t>(kInt64Max))
    return std::nullopt;
  return value->get<std::int64_t>();
}

class Filler {
 public:
  Filler(Json& root, Diagnostics& diagnostics) : root_(root), diagnostics_(diagnostics) {}

  // Replaces "auto" at `path` with `value`; with `must_match`, a concrete config value that
  // differs from it is a mismatch naming `flag`.
  void fill(std::string_view path, const Json& value, const std::string& flag, bool must_match) {
    Json* node = find_path(root_, path);
    if (node == nullptr) return;
    if (is_auto(*node)) {
      *node = value;
      return;
    }
    if (must_match && !agrees(*node, value)) mismatch(path, *node, flag + " " + describe(value));
  }

  void mismatch(std::string_view path, const Json& config_value, const std::string& trainer_text) {
    diagnostics_.errors.push_back(
        std::string(path) + ": " + describe(config_value) + " in the config contradicts " +
        trainer_text +
        " given on the command line; drop the flag to take the config's value, or set the key to "
        "\"auto\" to take the flag's");
  }

  Json& root() { return root_; }

 private:
  Json& root_;
  Diagnostics& diagnostics_;
};

void fill_batch(Filler& filler, const TrainerValues& trainer, std::int64_t world_size) {
  Json& root = filler.root();
  if (trainer.per_device_train_batch_size)
    filler.fill("train_micro_batch_size_per_gpu", *trainer.per_device_train_batch_size,
                "--per_device_train_batch_size", true);
  if (trainer.gradient_accumulation_steps)
    filler.fill("gradient_accumulation_steps", *trainer.gradient_accumulation_steps,
                "--gradient_accumulation_steps", true);

  // train_batch_size = world_size × micro × accumulation, from the flags or the (filled) config.
  const Json* micro_node = find_path(root, "train_micro_batch_size_per_gpu");
  const Json* accumulation_node = find_path(root, "gradient_accumulation_steps");
  std::optional<std::int64_t> micro = trainer.per_device_train_batch_size;
  if (!micro) micro = concrete_integer(micro_node);
  std::optional<std::int64_t> accumulation = trainer.gradient_accumulation_steps;
  if (!accumulation) accumulation = concrete_integer(accumulation_node);
  Json* train_node = find_path(root, "train_batch_size");
  if (train_node == nullptr || !micro || *micro < 1) return;
  if (is_auto(*train_node)) {
    // With no accumulation anywhere, DeepSpeed's rule would set it to 1; an unfilled "auto" or
    // a bad value leaves train_batch_size unfilled (that key reports its own error).
    const bool absent = accumulation_node == nullptr || accumulation_node->is_null();
    const std::int64_t steps = accumulation.value_or(absent ? 1 : 0);
    std::int64_t product = 0;
    if (steps >= 1 && !__builtin_mul_overflow(*micro, steps, &product) &&
        !__builtin_mul_overflow(product, world_size, &product))
      *train_node = product;
    return;
  }
  if (!trainer.per_device_train_batch_size || !accumulation || !train_node->is_number()) return;
  std::int64_t product = 0;
  if (__builtin_mul_overflow(*micro, *accumulation, &product) ||
      __builtin_mul_overflow(product, world_size, &product))
    return;
  if (train_node->get<double>() != static_cast<double>(product))
    filler.mismatch("train_batch_size", *train_node,
                    "--per_device_train_batch_size " + std::to_string(*micro) +
                        " × gradient_accumulation_steps " + std::to_string(*accumulation) +
                        " × world_size " + std::to_string(world_size) + " = " +
                        std::to_string(product));
}

}  // namespace

void fill_auto(Json& root, const TrainerValues& trainer, std::int64_t world_size,
               Diagnostics& diagnostics) {
  Filler filler(root, diagnostics);
  fill_batch(filler, trainer, world_size);
  if (trainer.max_grad_norm)
    filler.fill("gradient_clipping", *trainer.max_grad_norm, "--max_grad_norm", true);

  if (trainer.learning_rate)
    filler.fill("optimizer.params.lr", *trainer.learning_rate, "--learning_rate", true);
  if (trainer.adam_beta1 && trainer.adam_beta2) {
    filler.fill("optimizer.params.betas", Json::array({*trainer.adam_beta1, *trainer.adam_beta2}),
                "--adam_beta1/--adam_beta2", false);
  }
  if (Json* betas = find_path(root, "optimizer.params.betas");
      betas != nullptr && betas->is_array() && betas->size() == 2) {
    const std::array<std::pair<const std::optional<double>*, const char*>, 2> flags = {
        std::pair{&trainer.adam_beta1, "--adam_beta1"},
        std::pair{&trainer.adam_beta2, "--adam_beta2"}};
    for (std::size_t i = 0; i < 2; ++i) {
      if (*flags[i].first && !agrees((*betas)[i], **flags[i].first))
        filler.mismatch("optimizer.params.betas[" + std::to_string(i) + "]", (*betas)[i],
                        std::string(flags[i].second) + " " + describe(**flags[i].first));
    }
  }
  if (trainer.adam_epsilon)
    filler.fill("optimizer.params.eps", *trainer.adam_epsilon, "--adam_epsilon", true);
  if (trainer.weight_decay)
    filler.fill("optimizer.params.weight_decay", *trainer.weight_decay, "--weight_decay", true);

  filler.fill("scheduler.params.warmup_min_lr", 0, "", false);  // not a trainer flag: always 0
  if (trainer.learning_rate)
    filler.fill("scheduler.params.warmup_max_lr", *trainer.learning_rate, "--learning_rate", true);
  if (trainer.warmup_steps)
    filler.fill("scheduler.params.warmup_num_steps", *trainer.warmup_steps, "--warmup_steps", true);
  if (trainer.total_steps)
    filler.fill("scheduler.params.total_num_steps", *trainer.total_steps, "--max_steps", true);

  if (trainer.fp16) filler.fill("fp16.enabled", *trainer.fp16, "--fp16", true);
  if (trainer.bf16) {
    filler.fill("bf16.enabled", *trainer.bf16, "--bf16", true);
    filler.fill("bfloat16.enabled", *trainer.bf16, "--bf16", true);
  }
  // One precision flag set to true settles the other's "auto" to false, as Hugging Face does.
  if (trainer.bf16.value_or(false) && !trainer.fp16) filler.fill("fp16.enabled", false, "", false);
  if (trainer.fp16.value_or(false) && !trainer.bf16) {
    filler.fill("bf16.enabled", false, "", false);
    filler.fill("bfloat16.enabled", false, "", false);
  }

  if (trainer.hidden_size && *trainer.hidden_size >= 1 && *trainer.hidden_size <= (1 << 30)) {
    const std::int64_t hidden = *trainer.hidden_size;
    filler.fill("zero_optimization.reduce_bucket_size", hidden * hidden, "", false);
    const Json* stage = find_path(root, "zero_optimization.stage");
    if (stage != nullptr && stage->is_number() && stage->get<double>() == 3.0) {
      // As Hugging Face computes it: int(0.9 * hidden * hidden), in double arithmetic.
      const auto prefetch = static_cast<std::int64_t>(0.9 * static_cast<double>(hidden) *
                                                      static_cast<double>(hidden));
      for (const char* path : {"zero_optimization.stage3_prefetch_bucket_size",
                               "zero_optimization.prefetch_bucket_size"})
        filler.fill(path, prefetch, "", false);
      for (const char* path : {"zero_optimization.stage3_param_persistence_threshold",
                               "zero_optimization.param_persistence_threshold"})
        filler.fill(path, 10 * hidden, "", false);
    }
  }
}

std::string auto_hint(std::string_view path) {
  static const std::array<std::pair<std::string_view, std::string_view>, 19> kHints = {{
      {"train_batch_size",
       "; pass --per_device_train_batch_size (it becomes world_size × per_device_train_batch_size "
       "× gradient_accumulation_steps)"},
      {"train_micro_batch_size_per_gpu", "; pass --per_device_train_batch_size"},
      {"gradient_accumulation_steps", "; pass --gradient_accumulation_steps"},
      {"gradient_clipping", "; pass --max_grad_norm"},
      {"optimizer.params.lr", "; pass --learning_rate"},
      {"optimizer.params.betas", "; pass --adam_beta1 and --adam_beta2"},
      {"optimizer.params.eps", "; pass --adam_epsilon"},
      {"optimizer.params.weight_decay", "; pass --weight_decay"},
      {"scheduler.params.warmup_max_lr", "; pass --learning_rate"},
      {"scheduler.params.warmup_num_steps", "; pass --warmup_steps"},
      {"scheduler.params.total_num_steps", "; pass --max_steps"},
      {"fp16.enabled", " (pass --fp16 to enable it)"},
      {"bf16.enabled", " (pass --bf16 to enable it)"},
      {"bfloat16.enabled", " (pass --bf16 to enable it)"},
      {"zero_optimization.reduce_bucket_size", " (pass --hidden_size to use hidden_size²)"},
      {"zero_optimization.stage3_prefetch_bucket_size",
       " (pass --hidden_size to use 0.9 × hidden_size² at stage 3)"},
      {"zero_optimization.prefetch_bucket_size",
       " (pass --hidden_size to use 0.9 × hidden_size² at stage 3)"},
      {"zero_optimization.stage3_param_persistence_threshold",
       " (pass --hidden_size to use 10 × hidden_size at stage 3)"},
      {"zero_optimization.param_persistence_threshold",
       " (pass --hidden_size to use 10 × hidden_size at stage 3)"},
  }};
  for (const auto& [key, hint] : kHints)
    if (key == path) return std::string(hint);
  return "";
}

}  // namespace zero::config::detail
