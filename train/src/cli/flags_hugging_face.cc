// The flag table's rows for the rest of Hugging Face's command line (issue 23): every
// TrainingArguments field of transformers 4.46 and 5.x not in flags.cc, and the rest of
// run_clm.py's and run_classification.py's arguments. Each says what zero does with it: the few
// that change a run land in a field; the others are accepted without effect (a note at start saying
// why) or refused with the reason and the alternative.
//
// The 4.46 names and defaults are transformers 4.46.3's, the 5.x column transformers 5.24.0's
// (tests/golden/training_arguments_defaults.py checks them against the installed versions:
// flags_golden_test, through ZERO_PYTHON and ZERO_PYTHON_TF5; flags_golden_tf5_file_test checks
// the 5.x column in CI against tests/golden/data/transformers5_training_arguments.json, recorded
// by tests/golden/record_torch2_goldens.py). 5.x removed per_gpu_*,
// evaluation_strategy, fp16_backend, fp16_opt_level, half_precision_backend, no_cuda,
// overwrite_output_dir, logging_dir, save_safetensors, include_tokens_per_second, warmup_ratio
// (warmup_steps takes a fraction), group_by_length (train_sampling_strategy), past_index and the
// TPU, IPEX, apex and push_to_hub_* fields; added activation_checkpointing
// (gradient_checkpointing's new name, an alias here), dataloader_in_order, train_sampling_strategy,
// enable_jit_checkpoint, use_cache, the trackio fields and more; report_to "none",
// average_tokens_across_devices True and include_num_input_tokens_seen "no" (a string: all,
// non_padding or no) by default.
#include "zero/train/flags.h"

namespace zero::train::detail {

namespace {

using enum Command;
using enum FlagType;
using enum Origin;
using enum Disposition;
using T = TrainingArguments;

constexpr HfDefaults both(std::string_view value) { return {value, value}; }
constexpr HfDefaults only_4_46(std::string_view value) { return {value, kAbsent}; }
constexpr HfDefaults only_5(std::string_view value) { return {kAbsent, value}; }
constexpr HfDefaults kNone = both("None");

// Reasons shared by several rows.
constexpr std::string_view kTorchOnly =
    "a PyTorch option; zero's kernels are its own C++ and have no counterpart";
constexpr std::string_view kHubOnly =
    "zero uploads nothing (--push_to_hub is refused), so no Hub option applies";
constexpr std::string_view kNoUpload =
    "zero uploads nothing (it has no network access): upload output_dir yourself with "
    "`huggingface-cli upload REPO OUTPUT_DIR`";
constexpr std::string_view kNoFsdp =
    "zero shards with ZeRO, not FSDP: use --deepspeed with a config whose zero_optimization.stage "
    "is 3";
constexpr std::string_view kNoFullEval =
    "not implemented: zero's kernels keep activations and arithmetic in fp32 (no all-16-bit "
    "evaluation); evaluation runs on the training's compute copy, whose weights are 16-bit with "
    "--bf16 or --fp16";
constexpr std::string_view kNoDataLoader =
    "zero tokenizes the data in memory before training; it has no data loader workers";
constexpr std::string_view kNoSplitNames =
    "zero takes the train, validation and test splits of --dataset_name as load_dataset names "
    "them (a folder's by file name, datasets' cache by its dataset_info.json): name the files so, "
    "or give --train_file / --validation_file / --test_file";

// A row zero accepts without effect: `reason` is noted at start when it is given.
constexpr Flag inert(std::string_view name, FlagType type, HfDefaults hf, std::string_view reason,
                     Origin origin = kTrainingArguments) {
  const Section section = origin == kModelArguments            ? Section::kModel
                          : origin == kDataArguments           ? Section::kData
                          : origin == kClassificationArguments ? Section::kClassification
                                                               : Section::kTraining;
  return {.name = name,
          .type = type,
          .commands = kTrain,
          .origin = origin,
          .section = section,
          .hf_default = hf,
          .disposition = kAcceptedWithoutEffect,
          .reason = reason};
}

// A row zero refuses with `reason`, except for the values in `accepts` (what zero does anyway).
constexpr Flag refused(std::string_view name, FlagType type, HfDefaults hf,
                       std::string_view accepts, std::string_view reason,
                       Origin origin = kTrainingArguments) {
  Flag flag = inert(name, type, hf, reason, origin);
  flag.disposition = kRefused;
  flag.accepts = accepts;
  return flag;
}

// inert(), with another value than `accepts` refused with `refusal`.
constexpr Flag inert_unless(std::string_view name, FlagType type, HfDefaults hf,
                            std::string_view reason, std::string_view accepts,
                            std::string_view refusal, Origin origin = kTrainingArguments) {
  Flag flag = inert(name, type, hf, reason, origin);
  flag.accepts = accepts;
  flag.refusal = refusal;
  return flag;
}

// clang-format off
const Flag kRows[] = {
    // run_clm's ModelArguments (run_classification's are a subset but for
    // ignore_mismatched_sizes).
    refused("model_type", kString, kNone, "'gpt2'", "zero trains GPT-2 only (--model_type gpt2)",
            kModelArguments),
    {.name = "cache_dir", .field = &T::cache_dir, .commands = kTrain | kEstimate,
     .origin = kModelArguments, .section = Section::kModel, .hf_default = kNone,
     .help = "the Hugging Face Hub cache Hub ids are read from, offline (default: HF_HUB_CACHE, "
             "HF_HOME/hub or ~/.cache/huggingface/hub), and the datasets cache the tokenized "
             "data is kept in, in its zero_tokens folder (default: HF_DATASETS_CACHE, "
             "HF_HOME/datasets or ~/.cache/huggingface/datasets), as run_clm passes it to "
             "from_pretrained and load_dataset"},
    inert("use_fast_tokenizer", kBool, both("True"),
          "zero has one tokenizer (byte-level BPE, as the fast one)", kModelArguments),
    {.name = "model_revision", .field = &T::model_revision, .commands = kTrain | kEstimate,
     .origin = kModelArguments, .section = Section::kModel, .hf_default = both("'main'"),
     .show_default = true,
     .help = "the branch, tag or commit hash of Hub ids in the cache (refs/<revision>)"},
    inert("token", kString, kNone, "zero downloads nothing", kModelArguments),
    refused("trust_remote_code", kBool, both("False"), "False",
            "zero runs no Python code from the Hub (it trains GPT-2 only)", kModelArguments),
    inert_unless("torch_dtype", kString, kNone,
                 "zero keeps fp32 master weights; the compute precision is --bf16/--fp16 or the "
                 "DeepSpeed config's",
                 "'auto'|'bfloat16'|'float16'|'float32'",
                 "not a dtype run_clm takes (auto, bfloat16, float16, float32)", kModelArguments),
    inert("low_cpu_mem_usage", kBool, both("False"),
          "zero always loads as True does, and more frugally: each rank streams its partition of "
          "each tensor from the mapped safetensors files, never the whole model or file",
          kModelArguments),
    refused("ignore_mismatched_sizes", kBool, both("False"), "False",
            "zero loads a classifier head only when its labels match the training labels",
            kClassificationArguments),

    // run_clm's DataTrainingArguments.
    {.name = "dataset_name", .field = &T::dataset_name, .commands = kTrain,
     .origin = kDataArguments, .section = Section::kData, .hf_default = kNone,
     .help = "a folder of .txt, .json/.jsonl, .csv or .arrow files (splits by file name, as "
             "load_dataset(folder)); else the Arrow files datasets prepared in its cache "
             "(--cache_dir, else HF_DATASETS_CACHE, else HF_HOME/datasets), as "
             "load_dataset(name, config) reloads them offline; else a dataset of those files in "
             "the Hub cache (parquet is refused with the command that prepares it: python -c "
             "\"import datasets; datasets.load_dataset('NAME', 'CONFIG')\")"},
    {.name = "dataset_config_name", .field = &T::dataset_config_name, .commands = kTrain,
     .origin = kDataArguments, .section = Section::kData, .hf_default = kNone,
     .help = "the dataset's configuration: its folder in the datasets cache, or its subfolder "
             "of that name"},
    {.name = "overwrite_cache", .type = kBool, .field = &T::overwrite_cache, .commands = kTrain,
     .origin = kDataArguments, .section = Section::kData, .hf_default = both("False"),
     .help = "tokenize the data again and rewrite its cache (zero_tokens in the datasets "
             "cache: --cache_dir, else HF_DATASETS_CACHE, HF_HOME/datasets or "
             "~/.cache/huggingface/datasets; never beside the data; keyed by the files' "
             "content, size and time, the tokenizer and --keep_linebreaks; "
             "text-classification encodes its examples every run)"},
    {.name = "keep_linebreaks", .type = kBool, .field = &T::keep_linebreaks, .commands = kTrain,
     .origin = kDataArguments, .section = Section::kData, .hf_default = both("True"),
     .show_default = true,
     .help = "text files: each line keeps its line break (False: stripped, as "
             "load_dataset(\"text\", keep_linebreaks=False))"},

    // run_classification's DataTrainingArguments.
    {.name = "do_regression", .type = kBoolOrString, .field = &T::do_regression,
     .commands = kTrain, .origin = kClassificationArguments, .section = Section::kClassification,
     .hf_default = kNone, .accepts = "True|False", .refusal = "True or False",
     .help = "regression (num_labels 1, MSELoss, eval_mse) or not; unset: regression when the "
             "train split's labels are floats (a label column of numbers, one not an integer)"},
    refused("train_split_name", kString, kNone, "", kNoSplitNames, kClassificationArguments),
    refused("validation_split_name", kString, kNone, "", kNoSplitNames, kClassificationArguments),
    refused("test_split_name", kString, kNone, "", kNoSplitNames, kClassificationArguments),
    refused("remove_splits", kString, kNone, "", kNoSplitNames, kClassificationArguments),
    refused("remove_columns", kString, kNone, "",
            "zero reads only the text and label columns: the others are ignored already",
            kClassificationArguments),
    refused("pad_to_max_length", kBool, both("True"), "True",
            "zero pads every example to --max_seq_length (dynamic padding is not implemented)",
            kClassificationArguments),
    refused("shuffle_train_dataset", kBool, both("False"), "False",
            "not implemented: zero keeps the files' order before --max_train_samples (its "
            "sampler then shuffles the training examples every epoch by --data_seed)",
            kClassificationArguments),
    inert("shuffle_seed", kInt, both("42"), "only with --shuffle_train_dataset, which zero refuses",
          kClassificationArguments),
    inert("metric_name", kString, kNone,
          "zero reports run_classification's default metric always: accuracy (and "
          "--do_predict's precision, recall and F1), mse for regression, micro F1 for "
          "multi-label",
          kClassificationArguments),

    // TrainingArguments: implemented.
    {.name = "optim", .field = &T::optim, .commands = kTrain, .origin = kTrainingArguments,
     .section = Section::kTraining, .hf_default = {"'adamw_torch'", "'adamw_torch_fused'"},
     .show_default = true,
     .accepts = "'adamw_torch'|'adamw_torch_fused'|'adamw_hf'|'sgd'",
     .refusal = "zero supports adamw_torch, adamw_torch_fused, adamw_hf (AdamW) and sgd; or give "
                "the DeepSpeed config an \"optimizer\" section",
     .help = "the optimizer when the DeepSpeed config has none: adamw_torch, adamw_torch_fused, "
             "adamw_hf (AdamW) or sgd (5.x's default is adamw_torch_fused with torch >= 2.8)"},
    {.name = "report_to", .field = &T::report_to, .commands = kTrain, .origin = kTrainingArguments,
     .section = Section::kTraining, .hf_default = {"None", "'none'"}, .show_default = true,
     .accepts = "'none'|'tensorboard'|'all'",
     .refusal = "zero reports to TensorBoard only (tensorboard, all or none)",
     .help = "tensorboard (or all): TensorBoard event files in --logging_dir"},
    {.name = "logging_dir", .field = &T::logging_dir, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = only_4_46("None"),
     .help = "--report_to tensorboard's folder (default output_dir/runs/<time>_<host>)"},
    {.name = "run_name", .field = &T::run_name, .commands = kTrain, .origin = kTrainingArguments,
     .section = Section::kTraining, .hf_default = kNone, .help = "named in the start log"},
    {.name = "log_level", .field = &T::log_level, .commands = kTrain, .origin = kTrainingArguments,
     .section = Section::kTraining, .hf_default = both("'passive'"), .show_default = true,
     .accepts = "'passive'|'debug'|'info'|'warning'|'error'|'critical'",
     .refusal = "a log level is debug, info, warning, error, critical or passive",
     .help = "rank 0's log level (passive: ZERO_LOG_LEVEL's, else info)"},
    {.name = "log_level_replica", .field = &T::log_level_replica, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining,
     .hf_default = both("'warning'"), .show_default = true,
     .accepts = "'passive'|'debug'|'info'|'warning'|'error'|'critical'",
     .refusal = "a log level is debug, info, warning, error, critical or passive",
     .help = "the other ranks' log level (info or debug: they print info lines too)"},
    {.name = "ddp_backend", .field = &T::ddp_backend, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = kNone,
     .accepts = "'mpi'|'gloo'|'nccl'",
     .refusal = "zero's backends are mpi, gloo and nccl (leave it out to choose by the launch)",
     .help = "the collectives' backend: mpi, gloo or nccl (default: chosen by the launch)"},
    {.name = "ddp_timeout", .type = kInt, .field = &T::ddp_timeout, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = both("1800"),
     .show_default = true,
     .help = "seconds one collective waits for its peers before the watchdog stops the run "
             "(ZERO_COMM_TIMEOUT_S overrides)"},
    {.name = "dataloader_num_workers", .type = kInt, .field = &T::dataloader_num_workers,
     .commands = kTrain, .origin = kTrainingArguments, .section = Section::kTraining,
     .hf_default = both("0"), .show_default = true,
     .help = "tokenizer threads when --preprocessing_num_workers is not given (0: all cores)"},
    {.name = "local_rank", .type = kInt, .field = &T::local_rank,
     .commands = kTrain, .origin = kTrainingArguments, .section = Section::kTraining,
     .hf_default = both("-1"), .show_default = true,
     .help = "torch.distributed.launch's --local-rank=N / --local_rank=N: this process's rank "
             "on its node (LOCAL_RANK)"},
    {.name = "use_cpu", .aliases = {"no_cuda"}, .type = kBool, .field = &T::use_cpu,
     .commands = kTrain | kEstimate, .origin = kTrainingArguments, .section = Section::kTraining,
     .hf_default = both("False"), .show_default = true,
     .help = "run on the CPU even when CUDA devices are visible (without it, local rank r runs on "
             "cuda:r mod the visible devices, CUDA_VISIBLE_DEVICES honoured)",
     .estimate_help = "plan CPU ranks (the CPU kernels' activations, the device's memory being "
                      "host memory) instead of GPU ranks"},
    {.name = "save_safetensors", .type = kBool, .field = &T::save_safetensors, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = only_4_46("True"),
     .show_default = true, .accepts = "True",
     .refusal = "zero writes model.safetensors only (pytorch_model.bin is torch's pickle format)",
     .help = "write model.safetensors"},

    // TrainingArguments: the training loop's (Hugging Face Trainer's meaning).
    {.name = "eval_on_start", .type = kBool, .field = &T::eval_on_start, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = both("False"),
     .help = "evaluate before the first step (logged at step 0; needs --do_eval)"},
    {.name = "load_best_model_at_end", .type = kBool, .field = &T::load_best_model_at_end,
     .commands = kTrain, .origin = kTrainingArguments, .section = Section::kTraining,
     .hf_default = both("False"),
     .help = "keep the best checkpoint by --metric_for_best_model from rotation and end with its "
             "model (eval and save strategies must match)"},
    {.name = "metric_for_best_model", .field = &T::metric_for_best_model, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = kNone,
     .help = "loss (eval_loss), or accuracy for text-classification (default: loss with "
             "--load_best_model_at_end); trainer_state.json's best_metric"},
    {.name = "greater_is_better", .type = kBool, .field = &T::greater_is_better,
     .commands = kTrain, .origin = kTrainingArguments, .section = Section::kTraining,
     .hf_default = kNone,
     .help = "default: True unless --metric_for_best_model ends in \"loss\""},
    {.name = "save_only_model", .type = kBool, .field = &T::save_only_model, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = both("False"),
     .help = "checkpoints hold the model files only, no engine or optimizer state (they can't "
             "be resumed)"},
    {.name = "logging_first_step", .type = kBool, .field = &T::logging_first_step,
     .commands = kTrain, .origin = kTrainingArguments, .section = Section::kTraining,
     .hf_default = both("False"), .help = "log step 1 too"},
    {.name = "logging_strategy", .field = &T::logging_strategy, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = both("'steps'"),
     .show_default = true, .help = "no, steps (every --logging_steps) or epoch"},
    {.name = "include_tokens_per_second", .type = kBool, .field = &T::include_tokens_per_second,
     .commands = kTrain, .origin = kTrainingArguments, .section = Section::kTraining,
     .hf_default = only_4_46("False"),
     .help = "train_tokens_per_second (one rank's tokens, as Hugging Face counts) in "
             "train_results.json"},
    {.name = "include_num_input_tokens_seen", .type = kBoolOrString,
     .field = &T::include_num_input_tokens_seen, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = {"False", "'no'"},
     .show_default = true, .accepts = "True|False|'no'|'all'|'non_padding'",
     .refusal = "5.x takes all (or True), non_padding or no (or False)",
     .help = "num_input_tokens_seen (all ranks') in every log entry and trainer_state.json: all "
             "(or alone, True) counts every token of the rows trained on, non_padding a "
             "classification row's tokens before its padding (a causal LM block has none)"},
    {.name = "data_seed", .type = kInt, .field = &T::data_seed, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = kNone,
     .help = "the data order's shuffle seed (default: --seed)"},
    {.name = "auto_find_batch_size", .type = kBool, .field = &T::auto_find_batch_size,
     .commands = kTrain, .origin = kTrainingArguments, .section = Section::kTraining,
     .hf_default = both("False"),
     .help = "halve --per_device_train_batch_size until the run's memory plan fits the node "
             "(MemTotal or the memory cgroup's limit, as the run plan reads it), before anything "
             "is allocated"},
    {.name = "eval_delay", .type = kFloat, .field = &T::eval_delay, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = both("0"),
     .help = "no evaluation before this step (epoch strategy: this epoch)"},
    {.name = "dataloader_drop_last", .type = kBool, .field = &T::dataloader_drop_last,
     .commands = kTrain, .origin = kTrainingArguments, .section = Section::kTraining,
     .hf_default = both("False"),
     .help = "drop each epoch's last incomplete global batch (fewer steps per epoch)"},
    {.name = "ignore_data_skip", .type = kBool, .field = &T::ignore_data_skip,
     .commands = kTrain, .origin = kTrainingArguments, .section = Section::kTraining,
     .hf_default = both("False"),
     .help = "on resume, start the epoch reached from its first batch instead of where the "
             "checkpoint stopped"},
    {.name = "label_smoothing_factor", .type = kFloat, .field = &T::label_smoothing_factor,
     .commands = kTrain, .origin = kTrainingArguments, .section = Section::kTraining,
     .hf_default = both("0.0"), .show_default = true,
     .help = "ε of the training and evaluation cross-entropy, as torch's "
             "CrossEntropyLoss(label_smoothing=ε) (causal LM and classification; CPU and CUDA kernels)"},
    refused("bf16_full_eval", kBool, both("False"), "False", kNoFullEval),
    refused("fp16_full_eval", kBool, both("False"), "False", kNoFullEval),

    // TrainingArguments: refused.
    inert_unless("push_to_hub", kBool, both("False"), "nothing is uploaded", "False", kNoUpload),
    refused("fsdp", kString, {"''", "None"}, "''", kNoFsdp),
    refused("fsdp_min_num_params", kInt, only_4_46("0"), "0", kNoFsdp),
    refused("fsdp_config", kString, kNone, "", kNoFsdp),
    refused("fsdp_transformer_layer_cls_to_wrap", kString, only_4_46("None"), "", kNoFsdp),
    refused("parallelism_config", kString, only_5("None"), "",
            "zero is data-parallel ZeRO; it has no tensor, context or sequence parallelism"),
    refused("lr_scheduler_kwargs", kString, {"{}", "None"}, "'{}'",
            "zero's schedules take no extra arguments: give the DeepSpeed config a \"scheduler\" "
            "section"),
    refused("optim_args", kString, kNone, "",
            "zero's optimizers take the flags (--adam_*, --weight_decay) or the DeepSpeed "
            "config's \"optimizer\" section"),
    refused("optim_target_modules", kString, kNone, "",
            "GaLore/APOLLO-style optimizers are not in zero: use --optim adamw_torch"),
    refused("adafactor", kBool, only_4_46("False"), "False",
            "zero has no Adafactor: use --optim adamw_torch or sgd"),
    refused("neftune_noise_alpha", kFloat, kNone, "", "zero's GPT-2 has no NEFTune embeddings"),
    refused("use_mps_device", kBool, only_4_46("False"), "False", "zero has no Apple MPS backend"),
    refused("save_on_each_node", kBool, both("False"), "False",
            "zero writes checkpoints from rank 0: give every node the same (shared) output_dir"),

    // TrainingArguments: accepted without effect.
    inert("prediction_loss_only", kBool, both("False"),
          "zero's evaluation computes the loss (and perplexity or accuracy) only"),
    inert("eval_accumulation_steps", kInt, kNone,
          "zero reduces each evaluation batch as it goes; nothing accumulates on a device"),
    inert("torch_empty_cache_steps", kInt, kNone, kTorchOnly),
    inert("log_on_each_node", kBool, both("True"),
          "zero logs on rank 0 (ZERO_LOG_ALL_RANKS=1 or --log_level_replica info: every rank)"),
    inert("logging_nan_inf_filter", kBool, both("True"),
          "zero logs each step's loss as computed (fp16 overflow steps are skipped by the loss "
          "scaler)"),
    inert("restore_callback_states_from_checkpoint", kBool, both("False"),
          "zero has no trainer callbacks"),
    inert("jit_mode_eval", kBool, only_4_46("False"), kTorchOnly),
    inert("use_ipex", kBool, only_4_46("False"), kTorchOnly),
    inert("fp16_opt_level", kString, only_4_46("'O1'"),
          "an apex AMP level; zero's fp16 is DeepSpeed's (the config's loss scaling)"),
    {.name = "half_precision_backend", .aliases = {"fp16_backend"}, .type = kString,
     .commands = kTrain, .origin = kTrainingArguments, .section = Section::kTraining,
     .hf_default = only_4_46("'auto'"), .disposition = kAcceptedWithoutEffect,
     .reason = "zero's mixed precision is its own (DeepSpeed's fp16/bf16 sections)"},
    inert("tf32", kBool, kNone, "TF32 is a CUDA matmul mode and the model runs on the CPU"),
    inert("tpu_num_cores", kInt, only_4_46("None"), "zero has no TPU backend"),
    inert("tpu_metrics_debug", kBool, only_4_46("False"), "zero has no TPU backend"),
    inert("debug", kString, both("''"),
          "Hugging Face's debug options hook PyTorch modules; zero has no counterpart"),
    inert("dataloader_prefetch_factor", kInt, {"2", "None"}, kNoDataLoader),
    inert("dataloader_in_order", kBool, only_5("True"), kNoDataLoader),
    inert("dataloader_multiprocessing_context", kString, only_5("None"), kNoDataLoader),
    inert("dataloader_pin_memory", kBool, both("True"),
          "pinned host memory is a CUDA option and the model runs on the CPU"),
    inert("dataloader_persistent_workers", kBool, both("False"), kNoDataLoader),
    inert("past_index", kInt, only_4_46("-1"), "for Transformer-XL/XLNet memories; GPT-2 has none"),
    inert("disable_tqdm", kBool, kNone, "zero's progress bars show on a terminal only"),
    inert("remove_unused_columns", kBool, both("True"),
          "zero reads only the text (and label) columns"),
    inert("label_names", kString, kNone,
          "GPT-2's labels are its inputs (causal LM) or --label_column_name"),
    inert("accelerator_config", kString, kNone,
          "accelerate's data loader options; each zero rank reads its own rows"),
    inert("group_by_length", kBool, only_4_46("False"),
          "run_clm's blocks all have --block_size tokens and classification pads every example "
          "to --max_seq_length: grouping by length changes nothing"),
    inert("length_column_name", kString, both("'length'"), "only with --group_by_length"),
    inert("ddp_find_unused_parameters", kBool, kNone,
          "a torch DDP option; ZeRO reduces every gradient"),
    inert("ddp_bucket_cap_mb", kInt, kNone,
          "torch DDP's bucket; the DeepSpeed config's reduce_bucket_size sets zero's"),
    inert("ddp_broadcast_buffers", kBool, kNone, "GPT-2 has no buffers to broadcast"),
    inert("skip_memory_metrics", kBool, both("True"),
          "zero reports memory in the start log and with --dry_run"),
    inert("use_legacy_prediction_loop", kBool, only_4_46("False"),
          "zero has one evaluation loop"),
    inert("hub_model_id", kString, kNone, kHubOnly),
    inert("hub_strategy", kString, both("'every_save'"), kHubOnly),
    inert("hub_token", kString, kNone, kHubOnly),
    inert("hub_private_repo", kBool, {"False", "None"}, kHubOnly),
    inert("hub_always_push", kBool, both("False"), kHubOnly),
    inert("hub_revision", kString, only_5("None"), kHubOnly),
    inert("push_to_hub_model_id", kString, only_4_46("None"), kHubOnly),
    inert("push_to_hub_organization", kString, only_4_46("None"), kHubOnly),
    inert("push_to_hub_token", kString, only_4_46("None"), kHubOnly),
    {.name = "gradient_checkpointing_kwargs", .aliases = {"activation_checkpointing_kwargs"},
     .type = kString, .commands = kTrain, .origin = kTrainingArguments,
     .section = Section::kTraining, .hf_default = kNone,
     .disposition = kAcceptedWithoutEffect,
     .reason = "zero's --gradient_checkpointing recomputes each block; it takes no options "
               "(--recompute_blocks: the first k only)"},
    inert("include_inputs_for_metrics", kBool, only_4_46("False"),
          "zero computes its metrics itself; it has no compute_metrics hook"),
    inert("include_for_metrics", kString, both("[]"),
          "zero computes its metrics itself; it has no compute_metrics hook"),
    inert("eval_do_concat_batches", kBool, both("True"),
          "zero computes its metrics itself; it has no compute_metrics hook"),
    inert("batch_eval_metrics", kBool, both("False"),
          "zero computes its metrics itself; it has no compute_metrics hook"),
    inert("eval_use_gather_object", kBool, both("False"),
          "zero computes its metrics itself; it has no compute_metrics hook"),
    inert("mp_parameters", kString, only_4_46("''"), "SageMaker model parallelism; no counterpart"),
    inert("full_determinism", kBool, both("False"),
          "zero has no PyTorch/cuDNN determinism switches to set; --seed fixes initialisation "
          "and data order"),
    inert("torchdynamo", kString, only_4_46("None"), kTorchOnly),
    inert("torch_compile", kBool, both("False"), kTorchOnly),
    inert("torch_compile_backend", kString, kNone, kTorchOnly),
    inert("torch_compile_mode", kString, kNone, kTorchOnly),
    inert("ray_scope", kString, only_4_46("'last'"), "Ray Tune's hyperparameter search; no counterpart"),
    inert("dispatch_batches", kBool, only_4_46("None"),
          "accelerate's data loader option; each zero rank reads its own rows"),
    inert("split_batches", kBool, only_4_46("None"),
          "accelerate's data loader option; each zero rank reads its own rows"),
    inert("use_liger_kernel", kBool, both("False"),
          "Liger's Triton kernels; zero's GPT-2 kernels are its own"),
    inert("liger_kernel_config", kString, only_5("None"),
          "Liger's Triton kernels; zero's GPT-2 kernels are its own"),
    inert("average_tokens_across_devices", kBool, {"False", "True"},
          "zero's loss averaging over ranks is its own and not configurable"),
    inert("project", kString, only_5("'huggingface'"), "trackio's; zero reports to TensorBoard"),
    inert("trackio_space_id", kString, only_5("None"),
          "trackio's; zero reports to TensorBoard"),
    inert("trackio_bucket_id", kString, only_5("None"), "trackio's; zero reports to TensorBoard"),
    inert("trackio_static_space_id", kString, only_5("None"),
          "trackio's; zero reports to TensorBoard"),
    inert("ddp_static_graph", kBool, only_5("None"),
          "a torch DDP option; ZeRO reduces every gradient"),
    inert("enable_jit_checkpoint", kBool, only_5("False"),
          "zero always saves a checkpoint on SIGTERM or SIGUSR1 and stops (resume with "
          "--resume_from_checkpoint latest)"),
    inert("use_cache", kBool, only_5("False"),
          "GPT-2's key/value cache serves generation; zero's training keeps none"),
    {.name = "train_sampling_strategy", .field = &T::train_sampling_strategy, .commands = kTrain,
     .origin = kTrainingArguments, .section = Section::kTraining, .hf_default = only_5("'random'"),
     .show_default = true, .accepts = "'random'|'sequential'|'group_by_length'",
     .refusal = "the sampling strategies are random, sequential and group_by_length",
     .help = "random (shuffled every epoch), sequential (the data's order) or group_by_length "
             "(as random: every block and padded example has the same length)"},
};
// clang-format on

}  // namespace

std::span<const Flag> hugging_face_flags() { return kRows; }

}  // namespace zero::train::detail
