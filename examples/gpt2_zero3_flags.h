// The GPT-2 demo's command line: run_clm-style flags, "--name value" or "--name=value".
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "zero/core/error.h"
#include "zero/core/suggest.h"

namespace demo {

// A usage error: zero::Error with the message only (no source location; the user typed it).
template <typename... Args>
[[noreturn]] void fail_flag(const Args&... parts) {
  std::ostringstream message;
  (message << ... << parts);
  throw zero::Error(message.str());
}

struct DemoFlags {
  std::string corpus = "/usr/share/games/fortunes";  // folder or comma-separated files
  std::string output_dir = "gpt2_zero3_output";
  std::string deepspeed = "configs/ds_zero3_demo.json";
  std::int64_t max_steps = 300;
  std::int64_t block_size = 128;                 // T
  std::int64_t per_device_train_batch_size = 8;  // B per rank and micro-step
  std::int64_t gradient_accumulation_steps = 1;
  double learning_rate = 3e-3;
  double weight_decay = 0.01;
  double max_grad_norm = 1.0;
  std::int64_t warmup_steps = -1;  // -1: a tenth of max_steps
  std::uint64_t seed = 42;
  std::int64_t n_layer = 4;
  std::int64_t n_embd = 192;
  std::int64_t n_head = 4;
  std::string config_overrides;    // GPT2Config "key=value,..." applied after the flags above
  std::int64_t vocab_size = 2048;  // of the BPE tokenizer trained on the corpus
  int validation_split_percentage = 5;
  std::int64_t max_eval_blocks = 0;  // 0: the whole validation split
  std::int64_t logging_steps = 10;
  std::string prompt;  // empty: start from <|endoftext|> (an unconditional sample)
  int num_samples = 2;
  int sample_tokens = 64;
  int top_k = 20;
  double temperature = 0.9;
};

struct FlagSpec {
  std::string_view name;
  std::string_view help;
  std::function<void(const std::string&)> set;
};

inline std::vector<FlagSpec> flag_specs(DemoFlags& flags) {
  auto text = [](std::string& field) { return [&field](const std::string& v) { field = v; }; };
  auto integer = [](auto& field) {
    return [&field](const std::string& v) {
      std::size_t used = 0;
      long long parsed = 0;
      try {
        parsed = std::stoll(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != v.size() || v.empty()) fail_flag("expected an integer, got '", v, "'");
      field = static_cast<std::remove_reference_t<decltype(field)>>(parsed);
    };
  };
  auto real = [](double& field) {
    return [&field](const std::string& v) {
      std::size_t used = 0;
      try {
        field = std::stod(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != v.size() || v.empty()) fail_flag("expected a number, got '", v, "'");
    };
  };
  return {
      {"corpus", "folder of fortune files, or comma-separated files", text(flags.corpus)},
      {"output_dir", "where the tokenizer and the HF checkpoint go", text(flags.output_dir)},
      {"deepspeed", "DeepSpeed JSON config (\"auto\" filled from these flags)",
       text(flags.deepspeed)},
      {"max_steps", "optimizer steps", integer(flags.max_steps)},
      {"block_size", "tokens per training block (T)", integer(flags.block_size)},
      {"per_device_train_batch_size", "blocks per rank and micro-step",
       integer(flags.per_device_train_batch_size)},
      {"gradient_accumulation_steps", "micro-steps per optimizer step",
       integer(flags.gradient_accumulation_steps)},
      {"learning_rate", "peak learning rate", real(flags.learning_rate)},
      {"weight_decay", "AdamW decoupled weight decay", real(flags.weight_decay)},
      {"max_grad_norm", "global gradient-norm clip", real(flags.max_grad_norm)},
      {"warmup_steps", "linear warmup steps (default: max_steps / 10)",
       integer(flags.warmup_steps)},
      {"seed", "initialisation, corpus shuffle and sampling seed", integer(flags.seed)},
      {"n_layer", "transformer blocks (L)", integer(flags.n_layer)},
      {"n_embd", "model width (C)", integer(flags.n_embd)},
      {"n_head", "attention heads (NH)", integer(flags.n_head)},
      {"config_overrides", "GPT-2 config \"key=value,...\" (run_clm)",
       text(flags.config_overrides)},
      {"vocab_size", "BPE vocabulary trained on the corpus", integer(flags.vocab_size)},
      {"validation_split_percentage", "first % of the (shuffled) examples validate",
       integer(flags.validation_split_percentage)},
      {"max_eval_blocks", "validation blocks evaluated (0: all)", integer(flags.max_eval_blocks)},
      {"logging_steps", "print the training loss every this many steps",
       integer(flags.logging_steps)},
      {"prompt", "text the samples continue (default: none, unconditional)", text(flags.prompt)},
      {"num_samples", "samples generated at the end", integer(flags.num_samples)},
      {"sample_tokens", "new tokens per sample", integer(flags.sample_tokens)},
      {"top_k", "top-k sampling (1: greedy)", integer(flags.top_k)},
      {"temperature", "sampling temperature", real(flags.temperature)},
  };
}

// Range checks the parser cannot make on its own (zero::Error naming the flag).
inline void check_flags(const DemoFlags& flags) {
  auto at_least = [](std::string_view name, std::int64_t value, std::int64_t minimum) {
    if (value < minimum) fail_flag("flag --", name, " must be at least ", minimum, ", got ", value);
  };
  at_least("max_steps", flags.max_steps, 1);
  at_least("block_size", flags.block_size, 2);
  at_least("per_device_train_batch_size", flags.per_device_train_batch_size, 1);
  at_least("gradient_accumulation_steps", flags.gradient_accumulation_steps, 1);
  at_least("vocab_size", flags.vocab_size, 257);
  at_least("logging_steps", flags.logging_steps, 1);
  at_least("max_eval_blocks", flags.max_eval_blocks, 0);
  at_least("num_samples", flags.num_samples, 0);
  at_least("sample_tokens", flags.sample_tokens, 1);
  at_least("top_k", flags.top_k, 0);
  if (flags.validation_split_percentage < 1 || flags.validation_split_percentage > 50)
    fail_flag("flag --validation_split_percentage must be in [1, 50], got ",
              flags.validation_split_percentage);
  if (!(flags.temperature > 0.0)) fail_flag("flag --temperature must be positive");
}

inline std::string usage(const char* program) {
  DemoFlags defaults;
  std::ostringstream out;
  out << "usage: mpirun -np 2 " << program << " [--flag value | --flag=value]...\n";
  for (const FlagSpec& spec : flag_specs(defaults))
    out << "  --" << spec.name << "  " << spec.help << "\n";
  return out.str();
}

// Parses argv into flags; throws zero::Error for an unknown flag (naming the nearest known one),
// a missing value or a malformed number. Sets `help` for --help / -h.
inline DemoFlags parse_flags(int argc, char** argv, bool& help) {
  DemoFlags flags;
  const std::vector<FlagSpec> specs = flag_specs(flags);
  std::vector<std::string> names;
  for (const FlagSpec& spec : specs) names.emplace_back(spec.name);
  help = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help = true;
      continue;
    }
    if (!arg.starts_with("--"))
      fail_flag("unexpected argument '", arg, "' (flags are --name value)");
    arg = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (const std::size_t equals = arg.find('='); equals != std::string::npos) {
      value = arg.substr(equals + 1);
      arg = arg.substr(0, equals);
      has_value = true;
    }
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& candidate : specs)
      if (candidate.name == arg) spec = &candidate;
    if (spec == nullptr) {
      const auto nearest = zero::nearest_name(arg, names);
      fail_flag("unknown flag --", arg,
                nearest ? "; did you mean --" + *nearest + "?" : std::string(),
                " (--help lists the flags)");
    }
    if (!has_value) {
      if (i + 1 >= argc) fail_flag("flag --", arg, " needs a value");
      value = argv[++i];
    }
    try {
      spec->set(value);
    } catch (const zero::Error& error) {
      fail_flag("flag --", arg, ": ", error.what());
    }
  }
  check_flags(flags);
  return flags;
}

}  // namespace demo
