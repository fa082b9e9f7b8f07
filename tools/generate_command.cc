// `zero generate`: continue a prompt of token ids with a Hugging Face GPT-2 checkpoint (greedy or
// top-k). Token ids in and out until the tokenizer is wired in. The device is chosen as for `zero
// train` (zero/core/launch.h): the checkpoint is read into host memory and, on a GPU, copied there
// once (fp32, or bf16 with --bf16, fp16 with --fp16) for the forward of every new token.
#include <iostream>
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
#include "zero/train/cli.h"

namespace zero::cli {
namespace {

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

}  // namespace

int run_generate(std::span<char* const> args) {
  po::options_description options("Options");
  options.add_options()("help,h", "print this help")(
      "model", po::value<std::string>()->required(),
      "folder with config.json and model.safetensors (or shards)")(
      "prompt_ids", po::value<std::string>()->required(), "comma-separated prompt token ids")(
      "max_new_tokens", po::value<int>()->default_value(32), "tokens to generate")(
      "top_k", po::value<int>()->default_value(0),
      "0 or 1: greedy; k > 1: sample among the k most likely")(
      "temperature", po::value<float>()->default_value(1.0f), "softmax temperature for top-k")(
      "seed", po::value<std::uint64_t>()->default_value(0), "sampling seed")(
      "stop_at_eos", "stop at the config's eos_token_id")(
      "bf16", "compute in bf16 (the parameters rounded to bf16 on the device)")(
      "fp16", "compute in fp16 (the parameters rounded to fp16 on the device)")(
      "use_cpu", "choose the CPU even when CUDA devices are visible")("no_cuda",
                                                                      "the old name of --use_cpu");
  for (char* const word : args)
    if (std::string(word) == "--help" || std::string(word) == "-h") {
      std::cout << usage("generate", "Continues a prompt of token ids with a GPT-2 checkpoint.",
                         options);
      return 0;
    }
  const auto variables = parse(args, options);
  const std::vector<int> prompt = parse_ids(variables["prompt_ids"].as<std::string>());
  if (prompt.empty()) throw UsageError{"--prompt_ids is empty"};
  const int max_new_tokens = variables["max_new_tokens"].as<int>();
  if (max_new_tokens < 0)
    throw UsageError{"--max_new_tokens is " + std::to_string(max_new_tokens) + ", expected >= 0"};
  if (variables.count("bf16") && variables.count("fp16"))
    throw UsageError{"--bf16 and --fp16 are exclusive"};
  stop_if_parse_only();
  const DType dtype = variables.count("bf16")   ? DType::kBFloat16
                      : variables.count("fp16") ? DType::kFloat16
                                                : DType::kFloat32;
  const DeviceChoice device =
      choose_device(variables.count("use_cpu") + variables.count("no_cuda") > 0);
  log_info("zero generate: device ", device.describe(), ", ", name_of(dtype));
  const std::string folder = variables["model"].as<std::string>();
  try {  // the Llama family is read, not generated from, in this version: an input error
    gpt2::check_family_computes(gpt2::load_hf_config(folder), "generation");
  } catch (const Error& error) {
    std::cerr << "zero generate: error: --model " << folder << ": " << error.what() << "\n";
    return 2;
  }
  const std::unique_ptr<DeviceContext> context = make_device_context(device.device);
  HostAllocator allocator(context->ledger());
  const gpt2::GPT2Model model = gpt2::load_hf_model(folder, allocator);
  gpt2::SamplingOptions sampling;
  sampling.top_k = variables["top_k"].as<int>();
  sampling.temperature = variables["temperature"].as<float>();
  sampling.seed = variables["seed"].as<std::uint64_t>();
  const int stop =
      variables.count("stop_at_eos") ? static_cast<int>(model.config().eos_token_id) : -1;
  const std::vector<int> tokens =
      gpt2::generate(model, *context, prompt, max_new_tokens, sampling, stop, dtype);
  for (std::size_t i = 0; i < tokens.size(); ++i) std::cout << (i ? "," : "") << tokens[i];
  std::cout << "\n";
  return 0;
}

}  // namespace zero::cli
