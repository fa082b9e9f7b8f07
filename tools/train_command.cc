// `zero train`: Hugging Face run_clm's command line on zero::train (train/), under mpirun or alone.
#include <algorithm>
#include <cctype>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "commands.h"
#include "zero/comm/communicator.h"
#include "zero/core/error.h"
#include "zero/core/launch.h"
#include "zero/core/logging.h"
#include "zero/train/arguments.h"
#include "zero/train/trainer.h"

namespace zero::cli {

namespace {

// The boolean flags: "--name" alone, "--name True|False" (as run_clm command lines write them) or
// "--name=True|False".
constexpr const char* kBooleanFlags[] = {
    "do_train", "do_eval", "do_predict", "overwrite_output_dir",   "streaming",
    "bf16",     "fp16",    "no_plot",    "gradient_checkpointing", "bind_cores_to_rank",
    "dry_run",
};

bool is_boolean_flag(std::string_view word) {
  if (!word.starts_with("--")) return false;
  word.remove_prefix(2);
  return std::find(std::begin(kBooleanFlags), std::end(kBooleanFlags), word) !=
         std::end(kBooleanFlags);
}

bool is_boolean_word(std::string word) {
  std::transform(word.begin(), word.end(), word.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return word == "true" || word == "false" || word == "1" || word == "0" || word == "yes" ||
         word == "no";
}

bool parse_boolean(const std::string& flag, std::string word) {
  std::transform(word.begin(), word.end(), word.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (word == "true" || word == "1" || word == "yes") return true;
  if (word == "false" || word == "0" || word == "no") return false;
  throw UsageError{"--" + flag + ": expected True or False, got '" + word + "'"};
}

}  // namespace

int run_train_command(std::span<char* const> args) {
  train::TrainingArguments a;  // Hugging Face's defaults
  std::string train_file, validation_file, test_file, eval_strategy = "no", save_strategy = "steps";
  po::options_description model("Model (run_clm ModelArguments)");
  // clang-format off
  model.add_options()
      ("model_name_or_path", po::value(&a.model_name_or_path),
       "Hugging Face checkpoint folder (config.json + model.safetensors) to start from")
      ("config_name", po::value(&a.config_name),
       "config.json (or its folder) to train from scratch (default: GPT-2 124M's shape)")
      ("config_overrides", po::value(&a.config_overrides),
       "from scratch: \"n_embd=10,resid_pdrop=0.2,...\"")
      ("tokenizer_name", po::value(&a.tokenizer_name),
       "tokenizer folder (tokenizer.json or vocab.json + merges.txt); default: the model's")
      ("tokenizer_vocab_size", po::value(&a.tokenizer_vocab_size)->default_value(a.tokenizer_vocab_size),
       "zero: with no tokenizer, learn a byte-level BPE of this size on the train files");
  po::options_description data("Data (run_clm DataTrainingArguments)");
  data.add_options()
      ("train_file", po::value(&train_file),
       "text (one example per line), .json/.jsonl (\"text\" field) or .csv (\"text\" column); several comma-separated")
      ("validation_file", po::value(&validation_file), "as --train_file")
      ("validation_split_percentage", po::value(&a.validation_split_percentage)->default_value(a.validation_split_percentage),
       "without --validation_file: the first p% of the train examples validate")
      ("block_size", po::value(&a.block_size), "tokens per block (default min(1024, n_positions))")
      ("streaming", po::value<std::string>()->implicit_value("True"),
       "read the train files as training goes (in order, no shuffle; needs --max_steps)")
      ("preprocessing_num_workers", po::value(&a.preprocessing_num_workers), "tokenizer threads")
      ("max_train_samples", po::value(&a.max_train_samples), "use the first N train blocks")
      ("max_eval_samples", po::value(&a.max_eval_samples), "use the first N validation blocks");
  po::options_description classification(
      "Text classification (--task text-classification; run_classification.py's flags)");
  classification.add_options()
      ("task", po::value(&a.task)->default_value(a.task),
       "causal-lm (run_clm) or text-classification (GPT2ForSequenceClassification)")
      ("test_file", po::value(&test_file), "labelled .csv/.json/.jsonl for --do_predict's report")
      ("text_column_names", po::value(&a.text_column_names)->default_value(a.text_column_names),
       "text column(s), comma-separated, joined by --text_column_delimiter")
      ("text_column_delimiter", po::value(&a.text_column_delimiter)->default_value(a.text_column_delimiter), "")
      ("label_column_name", po::value(&a.label_column_name)->default_value(a.label_column_name),
       "label column: strings or integers; the sorted label set is id2label")
      ("max_seq_length", po::value(&a.max_seq_length)->default_value(a.max_seq_length),
       "tokens per example: longer ones are truncated, shorter ones padded (pad_token_id)")
      ("do_predict", po::value<std::string>()->implicit_value("True"),
       "the test report on --test_file: per-class precision, recall, F1, confusion matrix")
      ("max_predict_samples", po::value(&a.max_predict_samples), "use the first N test examples");
  po::options_description training("Training (TrainingArguments)");
  training.add_options()
      ("output_dir", po::value(&a.output_dir), "where checkpoints and results go (required)")
      ("overwrite_output_dir", po::value<std::string>()->implicit_value("True"),
       "write into a non-empty output_dir")
      ("do_train", po::value<std::string>()->implicit_value("True"), "train")
      ("do_eval", po::value<std::string>()->implicit_value("True"), "evaluate")
      ("per_device_train_batch_size", po::value(&a.per_device_train_batch_size)->default_value(a.per_device_train_batch_size), "")
      ("per_device_eval_batch_size", po::value(&a.per_device_eval_batch_size)->default_value(a.per_device_eval_batch_size), "")
      ("gradient_accumulation_steps", po::value(&a.gradient_accumulation_steps)->default_value(a.gradient_accumulation_steps), "")
      ("learning_rate", po::value(&a.learning_rate)->default_value(a.learning_rate), "")
      ("weight_decay", po::value(&a.weight_decay)->default_value(a.weight_decay), "")
      ("adam_beta1", po::value(&a.adam_beta1)->default_value(a.adam_beta1), "")
      ("adam_beta2", po::value(&a.adam_beta2)->default_value(a.adam_beta2), "")
      ("adam_epsilon", po::value(&a.adam_epsilon)->default_value(a.adam_epsilon), "")
      ("max_grad_norm", po::value(&a.max_grad_norm)->default_value(a.max_grad_norm), "")
      ("num_train_epochs", po::value(&a.num_train_epochs)->default_value(a.num_train_epochs),
       "fractional allowed")
      ("max_steps", po::value(&a.max_steps)->default_value(a.max_steps), "> 0 overrides epochs")
      ("lr_scheduler_type", po::value(&a.lr_scheduler_type)->default_value(a.lr_scheduler_type),
       "linear, cosine, cosine_with_restarts, polynomial, constant, constant_with_warmup, "
       "inverse_sqrt (transformers' defaults; used when the DeepSpeed config has no scheduler)")
      ("warmup_ratio", po::value(&a.warmup_ratio)->default_value(a.warmup_ratio), "")
      ("warmup_steps", po::value(&a.warmup_steps)->default_value(a.warmup_steps), "")
      ("logging_steps", po::value(&a.logging_steps)->default_value(a.logging_steps), "")
      ("eval_strategy", po::value(&eval_strategy), "no, steps or epoch (default no)")
      ("evaluation_strategy", po::value(&eval_strategy), "the old name of --eval_strategy")
      ("eval_steps", po::value(&a.eval_steps), "default: logging_steps")
      ("save_strategy", po::value(&save_strategy), "no, steps or epoch (default steps)")
      ("save_steps", po::value(&a.save_steps)->default_value(a.save_steps), "")
      ("save_total_limit", po::value(&a.save_total_limit), "keep the last N checkpoint-* folders")
      ("resume_from_checkpoint", po::value(&a.resume_from_checkpoint),
       "continue from a checkpoint-N folder, an output_dir's latest, or \"latest\" (this output_dir)")
      ("seed", po::value(&a.seed)->default_value(a.seed), "")
      ("bf16", po::value<std::string>()->implicit_value("True"), "bf16 compute (fills bf16 \"auto\")")
      ("fp16", po::value<std::string>()->implicit_value("True"), "fp16 compute (fills fp16 \"auto\")")
      ("gradient_checkpointing", po::value<std::string>()->implicit_value("True"),
       "recompute each block's activations in backward")
      ("deepspeed", po::value(&a.deepspeed), "DeepSpeed JSON config; \"auto\" filled from these flags");
  po::options_description extra("zero's own");
  extra.add_options()
      ("help,h", "print this help")
      ("num_samples", po::value(&a.num_samples)->default_value(0), "samples printed at the end")
      ("sample_tokens", po::value(&a.sample_tokens)->default_value(a.sample_tokens), "")
      ("prompt", po::value(&a.prompt), "text the samples continue")
      ("top_k", po::value(&a.top_k)->default_value(a.top_k), "")
      ("temperature", po::value(&a.temperature)->default_value(a.temperature), "")
      ("no_plot", po::value<std::string>()->implicit_value("True"), "skip output_dir/loss.svg")
      ("bind_cores_to_rank", po::value<std::string>()->implicit_value("True"),
       "pin each rank to its share of the node's CPUs by local rank (DeepSpeed's launcher flag)")
      ("dry_run", po::value<std::string>()->implicit_value("True"),
       "print this run's memory plan per rank (docs/planner.md) and exit; allocates no model "
       "memory, reads no data")
      ("world_size", po::value(&a.world_size),
       "--dry_run: plan this many ranks (default: the launch's world size)");
  // clang-format on
  po::options_description options;
  options.add(model).add(data).add(classification).add(training).add(extra);

  // "--flag True" becomes "--flag=True" for the boolean flags.
  std::vector<std::string> words;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string word = args[i];
    if (is_boolean_flag(word) && i + 1 < args.size() && is_boolean_word(args[i + 1]))
      word += "=" + std::string(args[++i]);
    words.push_back(word);
  }
  std::vector<char*> pointers;
  for (std::string& word : words) pointers.push_back(word.data());
  const auto variables = parse(pointers, options);
  if (variables.count("help")) {
    if (detect_launch().rank == 0)
      std::cout << usage("train",
                         "Trains and evaluates GPT-2 as Hugging Face run_clm.py does (or, with "
                         "--task text-classification,\nrun_classification.py with "
                         "GPT2ForSequenceClassification), with the engine set up from "
                         "--deepspeed.\nRun it under mpirun for several "
                         "ranks. Writes output_dir/{config.json, model.safetensors, tokenizer "
                         "files,\ncheckpoint-N/, metrics.jsonl, trainer_state.json, "
                         "*_results.json, loss.svg}.",
                         options);
    return 0;
  }
  std::string bound_cpus;
  auto flag = [&](const char* name) {
    return variables.count(name) ? parse_boolean(name, variables[name].as<std::string>()) : false;
  };
  a.do_train = flag("do_train");
  a.do_eval = flag("do_eval");
  a.do_predict = flag("do_predict");
  a.overwrite_output_dir = flag("overwrite_output_dir");
  a.streaming = flag("streaming");
  a.bf16 = flag("bf16");
  a.fp16 = flag("fp16");
  a.gradient_checkpointing = flag("gradient_checkpointing");
  a.plot = !flag("no_plot");
  a.dry_run = flag("dry_run");
  if (!train_file.empty()) a.train_files = {train_file};
  if (!validation_file.empty()) a.validation_files = {validation_file};
  if (!test_file.empty()) a.test_files = {test_file};
  try {
    a.eval_strategy = train::interval_strategy_from_name(eval_strategy);
    a.save_strategy = train::interval_strategy_from_name(save_strategy);
  } catch (const Error& error) {
    throw UsageError{std::string("--eval_strategy/--save_strategy: ") + error.what()};
  }
  // HF: eval_steps given with the strategy left at "no" is still "no"; steps without eval_steps
  // use logging_steps.

  if (flag("bind_cores_to_rank")) {
    // Before any thread starts (the communicator's streams, OpenMP): they inherit the binding.
    const LaunchInfo launch = detect_launch();
    const std::vector<int> cpus = bind_cores_to_rank(launch.local_rank, launch.local_world_size);
    std::ostringstream text;
    for (std::size_t i = 0; i < cpus.size(); ++i) text << (i ? "," : "") << cpus[i];
    bound_cpus = text.str();
  }
  // The model runs on the CPU (its device path is issue 21's), so the trainer's collectives take
  // host buffers: never NCCL, whatever GPUs are visible.
  std::unique_ptr<Communicator> communicator = make_communicator(DeviceKind::kCpu);
  set_log_rank(communicator->rank(), communicator->world_size());
  if (!bound_cpus.empty()) log_info("bound to CPUs ", bound_cpus, " (--bind_cores_to_rank)");
  try {
    train::train(a, *communicator);
  } catch (const train::InputError& error) {
    if (communicator->rank() == 0) std::cerr << "zero train: error: " << error.what() << "\n";
    return 2;
  }
  return 0;
}

}  // namespace zero::cli
