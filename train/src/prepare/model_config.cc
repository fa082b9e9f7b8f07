// The model's config from the flags (model_config.h).
#include "prepare/model_config.h"

#include <filesystem>

#include "config/input_checks.h"
#include "zero/gpt2/checkpoint_hf.h"

namespace zero::train::detail {

namespace fs = std::filesystem;

gpt2::GPT2Config model_config_from_flags(const TrainingArguments& arguments,
                                         const gpt2::GPT2Config& scratch) {
  gpt2::GPT2Config config = scratch;
  const bool pretrained = !arguments.model_name_or_path.empty();
  if (pretrained) {
    const fs::path folder = arguments.model_name_or_path;
    if (!fs::is_regular_file(folder / "config.json"))
      input_error("--model_name_or_path ", folder.string(),
                  ": no config.json there (a Hugging Face checkpoint folder: config.json and "
                  "model.safetensors)");
    config = as_input_error("--model_name_or_path " + folder.string(),
                            [&] { return gpt2::load_hf_config(folder); });
    if (!arguments.config_overrides.empty())
      input_error("--config_overrides can't be used with --model_name_or_path (as run_clm)");
  } else if (!arguments.config_name.empty()) {
    fs::path path = arguments.config_name;
    if (fs::is_directory(path)) path /= "config.json";
    config = as_input_error("--config_name " + arguments.config_name,
                            [&] { return gpt2::GPT2Config::load(path); });
  }
  if (!pretrained && !arguments.config_overrides.empty())
    as_input_error("--config_overrides",
                   [&] { config.apply_overrides(arguments.config_overrides); });
  as_input_error("model config", [&] { config.validate(); });
  return config;
}

}  // namespace zero::train::detail
