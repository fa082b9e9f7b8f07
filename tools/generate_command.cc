// `zero generate`: continue a prompt with a Hugging Face checkpoint (GPT-2, Llama, Mistral or
// Qwen2), as transformers' text-generation pipeline does: text in through the folder's tokenizer
// (--prompt) and text out, or token ids in and out (--prompt_ids); greedy, or sampled with
// --do_sample; stopping at the config's eos id(s). The device is chosen as for `zero train`
// (zero/core/launch.h): the checkpoint is read into host memory and, on a GPU, copied there once
// (fp32, or bf16 with --bf16, fp16 with --fp16) for the forward of every new token.
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "zero/core/allocator.h"
#include "zero/core/cpu_context.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"
#include "zero/core/launch.h"
#include "zero/core/logging.h"
#include "zero/core/memory_ledger.h"
#include "zero/gpt2/checkpoint_hf.h"
#include "zero/gpt2/family.h"
#include "zero/gpt2/sampling.h"
#include "zero/text/generated_text.h"
#include "zero/text/tokenizer.h"
#include "zero/train/cli.h"
#include "zero/train/hub_cache.h"

namespace zero::cli {
namespace {

namespace fs = std::filesystem;

// transformers' GenerationConfig defaults: what --top_k and --temperature are when not given.
constexpr int kDefaultTopK = 50;
constexpr float kDefaultTemperature = 1.0f;

std::vector<int> parse_ids(const std::string& text) {
  std::vector<int> ids;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (item.find_first_not_of(" \t") == std::string::npos) continue;
    try {
      std::size_t used = 0;
      ids.push_back(std::stoi(item, &used));
      if (item.find_first_not_of(" \t", used) != std::string::npos)
        throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw UsageError{"--prompt_ids: '" + item +
                       "' is not a token id (expected e.g. \"464,2068,7586\")"};
    }
  }
  return ids;
}

po::options_description generate_options() {
  po::options_description options("Options");
  options.add_options()("help,h", "print this help")(
      "model_name_or_path", po::value<std::string>(),
      "folder with config.json and model.safetensors (or shards), or a Hub id in the local "
      "Hub cache")("model", po::value<std::string>(), "the old name of --model_name_or_path")(
      "tokenizer_name", po::value<std::string>(),
      "tokenizer folder or Hub id (tokenizer.json, or vocab.json + merges.txt); default: the "
      "model's")("cache_dir", po::value<std::string>()->default_value(""),
                 "the Hub cache folder (default: HF_HUB_CACHE, HF_HOME/hub, ...)")(
      "prompt", po::value<std::string>(),
      "prompt text, tokenized with the tokenizer's special tokens (Llama's bos); prints the "
      "prompt and its continuation as text")(
      "prompt_ids", po::value<std::string>(),
      "comma-separated prompt token ids, used as they are; prints the ids")(
      "max_new_tokens", po::value<int>()->default_value(32), "tokens to generate at most")(
      "do_sample", "sample (top-k, temperature) instead of greedy decoding")(
      "top_k", po::value<int>()->default_value(kDefaultTopK),
      "with --do_sample: sample among the k most likely (0: all)")(
      "temperature", po::value<float>()->default_value(kDefaultTemperature),
      "with --do_sample: the logits are divided by it")(
      "seed", po::value<std::uint64_t>()->default_value(0), "sampling seed")(
      "stop_at_eos", "kept for old command lines: generation always stops at the eos id(s)")(
      "bf16", "compute in bf16 (the parameters rounded to bf16 on the device)")(
      "fp16", "compute in fp16 (the parameters rounded to fp16 on the device)")(
      "use_cpu", "choose the CPU even when CUDA devices are visible")("no_cuda",
                                                                      "the old name of --use_cpu");
  return options;
}

// The command line, checked.
struct GenerateArguments {
  std::string model;                     // --model_name_or_path (or --model)
  std::optional<std::string> tokenizer;  // --tokenizer_name; none: the model's folder
  std::string cache_dir;
  std::optional<std::string> prompt;  // --prompt: text in, text out
  std::vector<int> prompt_ids;        // --prompt_ids: ids in, ids out
  int max_new_tokens = 0;
  gpt2::SamplingOptions sampling;
  DType dtype = DType::kFloat32;
  bool use_cpu = false;
};

// --do_sample, --top_k and --temperature as transformers' generate reads them: without
// --do_sample the decoding is greedy and the other two are only warned about when set.
gpt2::SamplingOptions sampling_options(const po::variables_map& variables) {
  const int top_k = variables["top_k"].as<int>();
  const float temperature = variables["temperature"].as<float>();
  if (top_k < 0) throw UsageError{"--top_k is " + std::to_string(top_k) + ", expected >= 0"};
  gpt2::SamplingOptions sampling;
  sampling.seed = variables["seed"].as<std::uint64_t>();
  if (variables.count("do_sample") == 0) {
    if (top_k != kDefaultTopK || temperature != kDefaultTemperature)
      log_warning(
          "zero generate: --top_k and --temperature are only used with --do_sample; "
          "decoding greedily (as transformers' generate with do_sample=False)");
    return sampling;
  }
  if (!(temperature > 0.0f))
    throw UsageError{"--temperature is " + std::to_string(temperature) +
                     ", expected a positive number"};
  sampling.top_k = top_k == 0 ? std::numeric_limits<int>::max() : top_k;
  sampling.temperature = temperature;
  return sampling;
}

GenerateArguments read_arguments(const po::variables_map& variables) {
  GenerateArguments arguments;
  if (variables.count("model_name_or_path") + variables.count("model") != 1)
    throw UsageError{"give the model folder with --model_name_or_path (once)"};
  arguments.model = variables.count("model") ? variables["model"].as<std::string>()
                                             : variables["model_name_or_path"].as<std::string>();
  if (variables.count("tokenizer_name"))
    arguments.tokenizer = variables["tokenizer_name"].as<std::string>();
  arguments.cache_dir = variables["cache_dir"].as<std::string>();
  if (variables.count("prompt") + variables.count("prompt_ids") != 1)
    throw UsageError{"give one of --prompt (text) and --prompt_ids (token ids)"};
  if (variables.count("prompt")) {
    arguments.prompt = variables["prompt"].as<std::string>();
    if (arguments.prompt->empty()) throw UsageError{"--prompt is empty"};
  } else {
    arguments.prompt_ids = parse_ids(variables["prompt_ids"].as<std::string>());
    if (arguments.prompt_ids.empty()) throw UsageError{"--prompt_ids is empty"};
  }
  arguments.max_new_tokens = variables["max_new_tokens"].as<int>();
  if (arguments.max_new_tokens < 1)  // transformers' generate refuses 0 too
    throw UsageError{"--max_new_tokens is " + std::to_string(arguments.max_new_tokens) +
                     ", expected > 0"};
  arguments.sampling = sampling_options(variables);
  if (variables.count("bf16") && variables.count("fp16"))
    throw UsageError{"--bf16 and --fp16 are exclusive"};
  arguments.dtype = variables.count("bf16")   ? DType::kBFloat16
                    : variables.count("fp16") ? DType::kFloat16
                                              : DType::kFloat32;
  arguments.use_cpu = variables.count("use_cpu") + variables.count("no_cuda") > 0;
  return arguments;
}

// A folder as given, else the Hub id's snapshot in the local Hub cache (as zero train resolves
// --model_name_or_path). Throws InputError naming `flag`.
fs::path resolve_folder(const std::string& flag, const std::string& name,
                        const std::string& cache_dir) {
  if (fs::is_directory(name)) return name;
  return train::resolve_hub_folder(flag, name, "main",
                                   train::hub_cache_folder(cache_dir, process_environment()));
}

// What the folders give before any compute: the model's config, its tokenizer where a text prompt
// needs one, and the prompt's ids. Throws zero::Error naming the flag at fault.
struct GenerateInputs {
  fs::path model_folder;
  gpt2::GPT2Config config;
  std::optional<text::Tokenizer> tokenizer;
  std::vector<int> prompt_ids;
};

GenerateInputs read_inputs(const GenerateArguments& arguments) {
  GenerateInputs inputs;
  inputs.model_folder =
      resolve_folder("--model_name_or_path", arguments.model, arguments.cache_dir);
  try {
    inputs.config = gpt2::load_hf_config(inputs.model_folder);
  } catch (const Error& error) {
    ZERO_THROW("--model_name_or_path ", arguments.model, ": ", error.what());
  }
  inputs.prompt_ids = arguments.prompt_ids;
  if (arguments.prompt) {
    const fs::path folder =
        arguments.tokenizer
            ? resolve_folder("--tokenizer_name", *arguments.tokenizer, arguments.cache_dir)
            : inputs.model_folder;
    try {
      inputs.tokenizer = text::Tokenizer::load(folder);
    } catch (const Error& error) {
      if (arguments.tokenizer)
        ZERO_THROW("--tokenizer_name ", *arguments.tokenizer, ": ", error.what());
      ZERO_THROW("--prompt needs a tokenizer, and the model's folder has none it can read (",
                 error.what(), "): give --tokenizer_name, or token ids with --prompt_ids");
    }
    for (const text::TokenId id : text::encode_prompt(*inputs.tokenizer, *arguments.prompt))
      inputs.prompt_ids.push_back(static_cast<int>(id));
  }
  for (const int id : inputs.prompt_ids)
    ZERO_CHECK(id >= 0 && id < inputs.config.vocab_size,
               arguments.prompt ? "--prompt" : "--prompt_ids", ": token id ", id,
               " is outside the model's vocabulary of ", inputs.config.vocab_size, " ids",
               arguments.prompt ? " (is --tokenizer_name the model's tokenizer?)" : "");
  if (arguments.prompt && inputs.prompt_ids.empty())
    ZERO_THROW("--prompt: the tokenizer gives no token for '", *arguments.prompt, "'");
  return inputs;
}

}  // namespace

int run_generate(std::span<char* const> args) {
  const po::options_description options = generate_options();
  for (char* const word : args)
    if (std::string(word) == "--help" || std::string(word) == "-h") {
      std::cout << usage("generate",
                         "Continues a prompt (text, or token ids) with a GPT-2 checkpoint, as "
                         "transformers' text-generation pipeline does.",
                         options);
      return 0;
    }
  const GenerateArguments arguments = read_arguments(parse(args, options));
  stop_if_parse_only();
  GenerateInputs inputs;
  try {
    inputs = read_inputs(arguments);
  } catch (const Error& error) {
    std::cerr << "zero generate: error: " << error.what() << "\n";
    return 2;
  }
  const DeviceChoice device = choose_device(arguments.use_cpu);
  log_info("zero generate: device ", device.describe(), ", ", name_of(arguments.dtype));
  const std::unique_ptr<DeviceContext> context = make_device_context(device.device);
  HostAllocator allocator(context->ledger());
  const gpt2::GPT2Model model = gpt2::load_hf_model(inputs.model_folder, allocator);
  const std::vector<int> stop = gpt2::eos_token_ids(model.config());
  const std::vector<int> tokens =
      gpt2::generate(model, *context, inputs.prompt_ids, arguments.max_new_tokens,
                     arguments.sampling, stop, arguments.dtype);
  if (!arguments.prompt) {
    for (std::size_t i = 0; i < tokens.size(); ++i) std::cout << (i ? "," : "") << tokens[i];
    std::cout << "\n";
    return 0;
  }
  const std::vector<text::TokenId> prompt_ids(inputs.prompt_ids.begin(), inputs.prompt_ids.end());
  const std::vector<text::TokenId> sequence(tokens.begin(), tokens.end());
  std::cout << text::generated_text(*inputs.tokenizer, *arguments.prompt, prompt_ids, sequence)
            << "\n";
  return 0;
}

}  // namespace zero::cli
