// The flag table of `zero train`, `zero estimate` and `zero config` (zero/train/flags.h), and
// what is derived from a row: its type from its field, its default as text, its help per command.
#include "zero/train/flags.h"

#include <charconv>
#include <iterator>
#include <system_error>

namespace zero::train {

namespace {

using enum Command;
using enum FlagType;
using enum Origin;
using T = TrainingArguments;
using E = EstimateArguments;
using C = ConfigArguments;

constexpr HfDefaults both(std::string_view value) { return {value, value}; }
constexpr HfDefaults kNone = both("None");

// clang-format off
const Flag kFlags[] = {
    // run_clm's ModelArguments.
    {.name = "model_name_or_path", .field = &T::model_name_or_path, .commands = kTrain | kEstimate,
     .origin = kModelArguments, .section = Section::kModel, .hf_default = kNone,
     .help = "Hugging Face checkpoint folder (config.json + model.safetensors) to start from, or "
             "a Hub id in the local Hugging Face cache (gpt2, openai-community/gpt2)",
     .estimate_help = "a folder with a Hugging Face config.json of GPT-2, Llama, Mistral or Qwen2 "
                      "(weights are not read)"},
    {.name = "config_name", .field = &T::config_name, .commands = kTrain,
     .origin = kModelArguments, .section = Section::kModel, .hf_default = kNone,
     .help = "config.json (or its folder) to train from scratch (default: GPT-2 124M's shape)"},
    {.name = "config_overrides", .field = &T::config_overrides, .commands = kTrain | kEstimate,
     .origin = kModelArguments, .section = Section::kModel, .hf_default = kNone,
     .help = "from scratch: \"n_embd=10,resid_pdrop=0.2,...\"",
     .estimate_help = "GPT-2 124M's shape changed: \"n_embd=4096,n_layer=32,n_head=32,n_positions=2048\""},
    {.name = "tokenizer_name", .field = &T::tokenizer_name, .commands = kTrain | kEstimate,
     .origin = kModelArguments, .section = Section::kModel, .hf_default = kNone,
     .help = "tokenizer folder (tokenizer.json or vocab.json + merges.txt) or Hub id; default: "
             "the model's",
     .estimate_help = "from scratch: the vocabulary of this tokenizer"},
    {.name = "tokenizer_vocab_size", .type = kInt, .field = &T::tokenizer_vocab_size,
     .commands = kTrain, .section = Section::kModel, .show_default = true,
     .help = "zero: with no tokenizer, learn a byte-level BPE of this size on the train files"},

    // run_clm's DataTrainingArguments.
    {.name = "train_file", .field = &T::train_files, .commands = kTrain,
     .origin = kDataArguments, .section = Section::kData, .hf_default = kNone,
     .help = "text (one example per line), .json/.jsonl (\"text\" field) or .csv (\"text\" column); several comma-separated"},
    {.name = "validation_file", .field = &T::validation_files, .commands = kTrain,
     .origin = kDataArguments, .section = Section::kData, .hf_default = kNone,
     .help = "as --train_file"},
    {.name = "validation_split_percentage", .type = kInt, .field = &T::validation_split_percentage,
     .commands = kTrain, .origin = kDataArguments, .section = Section::kData,
     .hf_default = both("5"), .show_default = true,
     .help = "without --validation_file: the first p% of the train examples validate"},
    {.name = "block_size", .type = kInt, .field = &T::block_size, .commands = kTrain | kEstimate,
     .origin = kDataArguments, .section = Section::kData, .hf_default = kNone,
     .help = "tokens per block (default min(1024, n_positions))",
     .estimate_help = "tokens per sample (default min(1024, n_positions))"},
    {.name = "streaming", .type = kBool, .field = &T::streaming, .commands = kTrain,
     .origin = kDataArguments, .section = Section::kData, .hf_default = both("False"),
     .help = "read the train files as training goes (in order, no shuffle; needs --max_steps)"},
    {.name = "preprocessing_num_workers", .type = kInt, .field = &T::preprocessing_num_workers,
     .commands = kTrain, .origin = kDataArguments, .section = Section::kData,
     .hf_default = kNone, .help = "tokenizer threads"},
    {.name = "max_train_samples", .type = kInt, .field = &T::max_train_samples, .commands = kTrain,
     .origin = kDataArguments, .section = Section::kData, .hf_default = kNone,
     .help = "use the first N train blocks"},
    {.name = "max_eval_samples", .type = kInt, .field = &T::max_eval_samples, .commands = kTrain,
     .origin = kDataArguments, .section = Section::kData, .hf_default = kNone,
     .help = "use the first N validation blocks"},

    // run_classification's DataTrainingArguments (--task text-classification).
    {.name = "task", .field = &T::task, .commands = kTrain, .section = Section::kClassification,
     .show_default = true,
     .help = "causal-lm (run_clm) or text-classification (the family's ...ForSequenceClassification)"},
    {.name = "test_file", .field = &T::test_files, .commands = kTrain,
     .origin = kClassificationArguments, .section = Section::kClassification, .hf_default = kNone,
     .help = "labelled .csv/.json/.jsonl for --do_predict's report"},
    {.name = "text_column_names", .field = &T::text_column_names, .commands = kTrain,
     .origin = kClassificationArguments, .section = Section::kClassification, .hf_default = kNone,
     .show_default = true,
     .help = "text column(s), comma-separated, joined by --text_column_delimiter"},
    {.name = "text_column_delimiter", .field = &T::text_column_delimiter, .commands = kTrain,
     .origin = kClassificationArguments, .section = Section::kClassification,
     .hf_default = both("' '"), .show_default = true, .help = ""},
    {.name = "label_column_name", .field = &T::label_column_name, .commands = kTrain,
     .origin = kClassificationArguments, .section = Section::kClassification, .hf_default = kNone,
     .show_default = true,
     .help = "label column: strings or integers (classes; the sorted label set is id2label), "
             "floats (regression) or, in JSON, lists of classes (multi-label)"},
    {.name = "max_seq_length", .type = kInt, .field = &T::max_seq_length, .commands = kTrain,
     .origin = kClassificationArguments, .section = Section::kClassification,
     .hf_default = both("128"), .show_default = true,
     .help = "tokens per example: longer ones are truncated, shorter ones padded (pad_token_id)"},
    {.name = "do_predict", .type = kBool, .field = &T::do_predict, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kClassification,
     .hf_default = both("False"),
     .help = "the test report on --test_file: per-class precision, recall, F1, confusion matrix"},
    {.name = "max_predict_samples", .type = kInt, .field = &T::max_predict_samples,
     .commands = kTrain, .origin = kClassificationArguments, .section = Section::kClassification,
     .hf_default = kNone, .help = "use the first N test examples"},

    // TrainingArguments.
    {.name = "output_dir", .field = &T::output_dir, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining,
     .hf_default = {kRequired, "None"}, .help = "where checkpoints and results go (required)"},
    {.name = "overwrite_output_dir", .type = kBool, .field = &T::overwrite_output_dir,
     .commands = kTrain, .origin = kTrainingArguments, .section = Section::kTraining,
     .hf_default = {"False", kAbsent}, .help = "write into a non-empty output_dir"},
    {.name = "do_train", .type = kBool, .field = &T::do_train, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = both("False"),
     .help = "train"},
    {.name = "do_eval", .type = kBool, .field = &T::do_eval, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = both("False"),
     .help = "evaluate"},
    {.name = "per_device_train_batch_size", .aliases = {"per_gpu_train_batch_size"}, .type = kInt, .field = &T::per_device_train_batch_size,
     .commands = kTrain | kEstimate | kConfig, .origin = kTrainingArguments,
     .section = Section::kTraining, .hf_default = both("8"), .show_default = true, .help = "",
     .config_help = "fills train_micro_batch_size_per_gpu \"auto\""},
    {.name = "per_device_eval_batch_size", .aliases = {"per_gpu_eval_batch_size"}, .type = kInt, .field = &T::per_device_eval_batch_size,
     .commands = kTrain, .origin = kTrainingArguments, .section = Section::kTraining,
     .hf_default = both("8"), .show_default = true, .help = ""},
    {.name = "gradient_accumulation_steps", .type = kInt, .field = &T::gradient_accumulation_steps,
     .commands = kTrain | kEstimate | kConfig, .origin = kTrainingArguments,
     .section = Section::kTraining, .hf_default = both("1"), .show_default = true, .help = "",
     .config_help = "fills gradient_accumulation_steps \"auto\""},
    {.name = "learning_rate", .type = kFloat, .field = &T::learning_rate,
     .commands = kTrain | kConfig, .origin = kTrainingArguments, .section = Section::kTraining,
     .hf_default = both("5e-05"), .show_default = true, .help = "",
     .config_help = "fills optimizer lr and scheduler warmup_max_lr \"auto\""},
    {.name = "weight_decay", .type = kFloat, .field = &T::weight_decay,
     .commands = kTrain | kConfig, .origin = kTrainingArguments, .section = Section::kTraining,
     .hf_default = both("0.0"), .show_default = true, .help = "",
     .config_help = "fills optimizer weight_decay \"auto\""},
    {.name = "adam_beta1", .type = kFloat, .field = &T::adam_beta1, .commands = kTrain | kConfig,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = both("0.9"),
     .show_default = true, .help = "",
     .config_help = "fills optimizer betas \"auto\" (with --adam_beta2)"},
    {.name = "adam_beta2", .type = kFloat, .field = &T::adam_beta2, .commands = kTrain | kConfig,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = both("0.999"),
     .show_default = true, .help = "",
     .config_help = "fills optimizer betas \"auto\" (with --adam_beta1)"},
    {.name = "adam_epsilon", .type = kFloat, .field = &T::adam_epsilon,
     .commands = kTrain | kConfig, .origin = kTrainingArguments, .section = Section::kTraining,
     .hf_default = both("1e-08"), .show_default = true, .help = "",
     .config_help = "fills optimizer eps \"auto\""},
    {.name = "max_grad_norm", .type = kFloat, .field = &T::max_grad_norm,
     .commands = kTrain | kConfig, .origin = kTrainingArguments, .section = Section::kTraining,
     .hf_default = both("1.0"), .show_default = true, .help = "",
     .config_help = "fills gradient_clipping \"auto\""},
    {.name = "num_train_epochs", .type = kFloat, .field = &T::num_train_epochs,
     .commands = kTrain, .origin = kTrainingArguments, .section = Section::kTraining,
     .hf_default = both("3.0"), .show_default = true, .help = "fractional allowed"},
    {.name = "max_steps", .type = kInt, .field = &T::max_steps, .commands = kTrain | kConfig,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = both("-1"),
     .show_default = true, .help = "> 0 overrides epochs",
     .config_help = "fills scheduler total_num_steps \"auto\""},
    {.name = "lr_scheduler_type", .field = &T::lr_scheduler_type, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = both("'linear'"),
     .show_default = true,
     .help = "linear, cosine, cosine_with_restarts, polynomial, constant, constant_with_warmup, "
             "inverse_sqrt (transformers' defaults; used when the DeepSpeed config has no scheduler)"},
    {.name = "warmup_ratio", .type = kFloat, .field = &T::warmup_ratio, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = {"0.0", kAbsent},
     .show_default = true, .help = "4.46's (5.x takes a fraction as --warmup_steps)"},
    {.name = "warmup_steps", .type = kFloat, .field = &T::warmup_steps, .commands = kTrain | kConfig,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = both("0"),
     .show_default = true,
     .help = "steps of linear warmup; below 1, a fraction of the total steps (5.x's ratio)",
     .config_help = "fills scheduler warmup_num_steps \"auto\""},
    {.name = "logging_steps", .type = kInt, .field = &T::logging_steps, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = both("500"),
     .show_default = true, .help = ""},
    {.name = "eval_strategy", .aliases = {"evaluation_strategy"}, .field = &T::eval_strategy,
     .commands = kTrain, .origin = kTrainingArguments, .section = Section::kTraining,
     .hf_default = both("'no'"), .help = "no, steps or epoch (default no)"},
    {.name = "eval_steps", .type = kInt, .field = &T::eval_steps, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = kNone,
     .help = "default: logging_steps"},
    {.name = "save_strategy", .field = &T::save_strategy, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = both("'steps'"),
     .help = "no, steps or epoch (default steps)"},
    {.name = "save_steps", .type = kInt, .field = &T::save_steps, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = both("500"),
     .show_default = true, .help = ""},
    {.name = "save_total_limit", .type = kInt, .field = &T::save_total_limit, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = kNone,
     .help = "keep the last N checkpoint-* folders"},
    {.name = "resume_from_checkpoint", .field = &T::resume_from_checkpoint, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = kNone,
     .help = "continue from a checkpoint-N folder, an output_dir's latest, or \"latest\" (this output_dir)"},
    {.name = "seed", .type = kInt, .field = &T::seed, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = both("42"),
     .show_default = true, .help = ""},
    {.name = "bf16", .type = kBool, .field = &T::bf16, .commands = kTrain | kEstimate | kConfig,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = both("False"),
     .help = "bf16 compute (fills bf16 \"auto\")",
     .config_help = "fills bf16.enabled \"auto\" with true"},
    {.name = "fp16", .type = kBool, .field = &T::fp16, .commands = kTrain | kEstimate | kConfig,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = both("False"),
     .help = "fp16 compute (fills fp16 \"auto\")",
     .config_help = "fills fp16.enabled \"auto\" with true"},
    {.name = "gradient_checkpointing", .aliases = {"activation_checkpointing"}, .type = kBool,
     .field = &T::gradient_checkpointing, .commands = kTrain | kEstimate,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = {"False", "None"},
     .help = "recompute every block's activations in backward (5.x: --activation_checkpointing); "
             "--recompute_blocks recomputes only the first k"},
    {.name = "deepspeed", .field = &T::deepspeed, .commands = kTrain | kEstimate,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = kNone,
     .help = "DeepSpeed JSON config; \"auto\" filled from these flags",
     .estimate_help = "a DeepSpeed JSON config (else the options below)"},

    // zero's own.
    {.name = "num_samples", .type = kInt, .field = &T::num_samples, .commands = kTrain,
     .show_default = true, .help = "samples printed at the end"},
    {.name = "sample_tokens", .type = kInt, .field = &T::sample_tokens, .commands = kTrain,
     .show_default = true, .help = ""},
    {.name = "prompt", .field = &T::prompt, .commands = kTrain,
     .help = "text the samples continue"},
    {.name = "top_k", .type = kInt, .field = &T::top_k, .commands = kTrain, .show_default = true,
     .help = ""},
    {.name = "temperature", .type = kFloat, .field = &T::temperature, .commands = kTrain,
     .show_default = true, .help = ""},
    {.name = "no_plot", .type = kBool, .field = &TrainCommandArguments::no_plot,
     .commands = kTrain, .help = "skip output_dir/loss.svg"},
    {.name = "bind_cores_to_rank", .type = kBool, .field = &TrainCommandArguments::bind_cores_to_rank,
     .commands = kTrain, .origin = kDeepSpeedLauncher,
     .help = "pin each rank to its share of the node's CPUs by local rank (DeepSpeed's launcher flag)"},
    {.name = "recompute_blocks", .field = &T::recompute_blocks, .commands = kTrain | kEstimate,
     .help = "recompute the activations of the first k blocks only in backward (their activations "
             "live longest; the others are kept): k trades memory for about 1/3 of a block's FLOPs "
             "each. \"auto\": the smallest k whose memory plan fits (this GPU, or this node on the "
             "CPU backend). --gradient_checkpointing recomputes every block",
     .estimate_help = "recompute the first k blocks only; \"auto\": the smallest k that fits "
                      "--gpu_memory and --cpu_memory (printed)"},
    {.name = "dry_run", .type = kBool, .field = &T::dry_run, .commands = kTrain,
     .help = "print this run's memory plan per rank (docs/planner.md) and exit; allocates no model "
             "memory, reads no data"},
    {.name = "ignore_memory_plan", .type = kBool, .field = &T::ignore_memory_plan,
     .commands = kTrain,
     .help = "run even when the memory plan says a phase (load, train, evaluation, checkpoint, "
             "final save) does not fit this node's memory; without it such a run is refused "
             "before anything is allocated"},
    {.name = "world_size", .type = kInt, .field = &T::world_size, .commands = kTrain | kConfig,
     .help = "--dry_run: plan this many ranks (default: the launch's world size)",
     .config_help = "data-parallel ranks the batch sizes are resolved for (default 1)"},

    // `zero estimate`'s own.
    {.name = "params", .field = &E::params, .commands = kEstimate,
     .help = "instead of a model: total parameters (e.g. 7e9); activations are then not planned"},
    {.name = "largest_layer_params", .field = &E::largest_layer_params, .commands = kEstimate,
     .help = "with --params: the largest layer's parameters (the engine's largest unit)"},
    {.name = "num_gpus_per_node", .type = kInt, .field = &E::num_gpus_per_node,
     .commands = kEstimate, .show_default = true, .help = ""},
    {.name = "num_nodes", .type = kInt, .field = &E::num_nodes, .commands = kEstimate,
     .show_default = true, .help = ""},
    {.name = "gpu_memory", .field = &E::gpu_memory, .commands = kEstimate, .show_default = true,
     .help = "per GPU: GiB, or with a unit (GiB, GB, MiB, MB, TiB, TB)"},
    {.name = "cpu_memory", .field = &E::cpu_memory, .commands = kEstimate, .show_default = true,
     .help = "per node, as --gpu_memory; 0: the table's host column is not checked and the "
             "whole run's phases are checked against this node (MemTotal or its memory cgroup's "
             "limit)"},
    {.name = "nvme_memory", .field = &E::nvme_memory, .commands = kEstimate, .show_default = true,
     .help = "per node, as --gpu_memory: the disk the NVMe swap (offload nvme) must fit in; "
             "auto: the free space under the config's nvme_path where it exists (else not "
             "checked); 0: not checked"},
    {.name = "zero_stage", .type = kInt, .field = &E::zero_stage, .commands = kEstimate,
     .help = "without --deepspeed: the ZeRO stage (default 0)"},
    {.name = "offload_optimizer", .field = &E::offload_optimizer, .commands = kEstimate,
     .show_default = true, .help = "without --deepspeed: none, cpu or nvme"},
    {.name = "offload_param", .field = &E::offload_param, .commands = kEstimate,
     .show_default = true, .help = "without --deepspeed: none, cpu or nvme (stage 3)"},
    {.name = "cuda_context_mib", .type = kFloat, .field = &E::cuda_context_mib,
     .commands = kEstimate, .show_default = true,
     .help = "GPU allowance: the CUDA context (docs/planner.md)"},
    {.name = "cublas_workspace_mib", .type = kFloat, .field = &E::cublas_workspace_mib,
     .commands = kEstimate, .show_default = true, .help = "GPU allowance: cuBLAS workspace"},
    {.name = "cudnn_workspace_mib", .type = kFloat, .field = &E::cudnn_workspace_mib,
     .commands = kEstimate, .show_default = true, .help = "GPU allowance: cuDNN workspace"},
    {.name = "nccl_mib", .type = kFloat, .field = &E::nccl_mib, .commands = kEstimate,
     .show_default = true, .help = "GPU allowance: NCCL buffers"},
    {.name = "deepspeed_compat", .type = kBool, .field = &E::deepspeed_compat,
     .commands = kEstimate,
     .help = "also print DeepSpeed 0.19's estimate_zero2/3_model_states_mem_needs_all_cold tables"},
    {.name = "additional_buffer_factor", .type = kFloat, .field = &E::additional_buffer_factor,
     .commands = kEstimate, .show_default = true,
     .help = "--deepspeed_compat: DeepSpeed's factor on CPU memory"},
    {.name = "json", .type = kBool, .field = &E::json, .commands = kEstimate,
     .help = "print one JSON object instead of tables"},

    // `zero config`'s own.
    {.name = "file", .field = &C::file, .commands = kConfig,
     .help = "the DeepSpeed JSON config (positional)"},
    {.name = "total_steps", .type = kInt, .field = &C::total_steps, .commands = kConfig,
     .help = "the same as --max_steps"},
    {.name = "hidden_size", .type = kInt, .field = &C::hidden_size, .commands = kConfig,
     .help = "the model's; fills bucket sizes and stage-3 thresholds \"auto\""},
    {.name = "no_defaults", .type = kBool, .field = &C::no_defaults, .commands = kConfig,
     .help = "fill \"auto\" only from the flags given, not from Hugging Face's defaults for the others"},
};
// clang-format on

// Python's repr of a float: the shortest text that reads back, with ".0" on whole numbers.
std::string float_repr(double value) {
  char text[32];
  const auto end = std::to_chars(text, text + sizeof(text), value).ptr;
  std::string repr(text, end);
  if (repr.find_first_of(".en") == std::string::npos) repr += ".0";
  return repr;
}

template <typename Value>
std::string repr(const Value& value) {
  if constexpr (std::is_same_v<Value, bool>) {
    return value ? "True" : "False";
  } else if constexpr (std::is_same_v<Value, double>) {
    return float_repr(value);
  } else if constexpr (std::is_same_v<Value, std::string>) {
    return "'" + value + "'";
  } else if constexpr (std::is_same_v<Value, std::vector<std::string>>) {
    std::string text = "[";
    for (const std::string& item : value) text += (text.size() > 1 ? ", '" : "'") + item + "'";
    return text + "]";
  } else if constexpr (std::is_same_v<Value, IntervalStrategy>) {
    return "'" + std::string(name_of(value)) + "'";
  } else {
    return std::to_string(value);
  }
}

}  // namespace

std::string_view name_of(Command command) {
  switch (command) {
    case Command::kTrain: return "train";
    case Command::kEstimate: return "estimate";
    case Command::kConfig: return "config";
  }
  return "?";
}

std::string_view name_of(FlagType type) {
  switch (type) {
    case kBool: return "bool";
    case kInt: return "int";
    case kFloat: return "float";
    case kString: return "str";
    case kBoolOrString: return "str or bool";
  }
  return "?";
}

std::string_view name_of(Disposition disposition) {
  switch (disposition) {
    case Disposition::kImplemented: return "implemented";
    case Disposition::kAcceptedWithoutEffect: return "accepted without effect";
    case Disposition::kRefused: return "refused";
  }
  return "?";
}

std::string_view name_of(Origin origin) {
  switch (origin) {
    case kTrainingArguments: return "TrainingArguments";
    case kModelArguments: return "run_clm ModelArguments";
    case kDataArguments: return "run_clm DataTrainingArguments";
    case kClassificationArguments: return "run_classification DataTrainingArguments";
    case kDeepSpeedLauncher: return "DeepSpeed launcher";
    case kZero: return "zero";
  }
  return "?";
}

std::string_view title_of(Section section) {
  switch (section) {
    case Section::kModel: return "Model (run_clm ModelArguments)";
    case Section::kData: return "Data (run_clm DataTrainingArguments)";
    case Section::kClassification:
      return "Text classification (--task text-classification; run_classification.py's flags)";
    case Section::kTraining: return "Training (TrainingArguments)";
    case Section::kOwn: return "zero's own";
  }
  return "?";
}

std::span<const Flag> flag_table() {
  static const std::vector<Flag> table = [] {
    std::vector<Flag> rows(std::begin(kFlags), std::end(kFlags));
    const std::span<const Flag> more = detail::hugging_face_flags();
    rows.insert(rows.end(), more.begin(), more.end());
    return rows;
  }();
  return table;
}

const Flag* find_flag(std::string_view name) {
  for (const Flag& flag : flag_table()) {
    if (flag.name == name) return &flag;
    for (std::string_view alias : flag.aliases)
      if (!alias.empty() && alias == name) return &flag;
  }
  return nullptr;
}

bool accepts_value(const Flag& flag, std::string_view value) {
  if (flag.accepts.empty()) return flag.disposition != Disposition::kRefused;
  std::string_view rest = flag.accepts;
  while (true) {
    const std::size_t bar = rest.find('|');
    const std::string_view accepted = rest.substr(0, bar);
    if (accepted == value) return true;
    if (flag.type == kFloat || flag.type == kInt) {
      double a = 0, b = 0;
      const auto [a_end, a_error] = std::from_chars(accepted.begin(), accepted.end(), a);
      const auto [b_end, b_error] = std::from_chars(value.begin(), value.end(), b);
      if (a_error == std::errc() && b_error == std::errc() && a_end == accepted.end() &&
          b_end == value.end() && a == b)
        return true;
    }
    if (bar == std::string_view::npos) return false;
    rest.remove_prefix(bar + 1);
  }
}

std::string_view help_in(const Flag& flag, Command command) {
  if (command == Command::kEstimate && !flag.estimate_help.empty()) return flag.estimate_help;
  if (command == Command::kConfig && !flag.config_help.empty()) return flag.config_help;
  return flag.help;
}

std::string default_text(const Flag& flag) {
  const FlagValues defaults;
  return std::visit(
      [&defaults](auto member) -> std::string {
        using Member = decltype(member);
        if constexpr (std::is_same_v<Member, std::monostate>) {
          return "None";
        } else {
          using Owner = typename MemberOf<Member>::owner;
          return repr(defaults.of<Owner>().*member);
        }
      },
      flag.field);
}

FlagType type_of(const FlagField& field) {
  return std::visit(
      [](auto member) -> FlagType {
        using Member = decltype(member);
        if constexpr (std::is_same_v<Member, std::monostate>) {
          return kString;
        } else {
          using Value = typename MemberOf<Member>::value;
          if constexpr (std::is_same_v<Value, bool>) return kBool;
          if constexpr (std::is_integral_v<Value> && !std::is_same_v<Value, bool>) return kInt;
          if constexpr (std::is_floating_point_v<Value>) return kFloat;
          return kString;
        }
      },
      field);
}

}  // namespace zero::train
