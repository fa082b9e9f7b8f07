// zero::train's arguments: Hugging Face run_clm's ModelArguments, DataTrainingArguments and
// TrainingArguments under the same names, with Hugging Face's defaults. These member
// initialisers are the one definition of those defaults: `zero train` starts from them and
// `zero config` fills "auto" from them (with_hf_defaults).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zero/config/ds_config.h"

namespace zero::train {

struct TokenDataset;  // zero/train/token_dataset.h

// eval_strategy / save_strategy: "no", "steps" or "epoch".
enum class IntervalStrategy { kNo, kSteps, kEpoch };
IntervalStrategy interval_strategy_from_name(std::string_view name);  // throws zero::Error
std::string_view name_of(IntervalStrategy strategy);

struct TrainingArguments {
  // ModelArguments: a Hugging Face checkpoint folder (config.json + model.safetensors), or a
  // config to train from scratch (--config_name: a config.json or a folder holding one; neither:
  // GPT-2 124M's config), then --config_overrides "key=value,...".
  std::string model_name_or_path;
  std::string config_name;
  std::string config_overrides;
  std::string tokenizer_name;  // default: model_name_or_path's tokenizer files
  // zero's own: with no tokenizer given or found, learn a byte-level BPE of this many tokens on
  // the training files (run_clm refuses to build a tokenizer from scratch).
  std::int64_t tokenizer_vocab_size = 2048;
  // Hub ids in the three flags above resolve offline through the local Hugging Face cache
  // (zero/train/hub_cache.h): --cache_dir (default: HF_HUB_CACHE, HF_HOME/hub, ...) at
  // --model_revision (a branch, tag or commit hash). --cache_dir is also the datasets cache, as
  // run_clm hands it to load_dataset: the token cache goes to its zero_tokens folder.
  std::string cache_dir;
  std::string model_revision = "main";

  // DataTrainingArguments. Text (.txt, .tokens, ...: one example per line), JSON Lines
  // (.json/.jsonl: the "text" field) or CSV (.csv: the "text" column, else the first), as run_clm.
  // Several files may be given comma-separated.
  std::vector<std::string> train_files;
  std::vector<std::string> validation_files;  // empty: the first p% of the train examples
  int validation_split_percentage = 5;
  std::int64_t block_size = -1;  // -1: min(1024, n_positions)
  bool streaming = false;
  int preprocessing_num_workers = 0;  // tokenizer threads; 0: all cores
  std::int64_t max_train_samples = -1;
  std::int64_t max_eval_samples = -1;
  // Not flags: token ids given in memory (zero/train/token_dataset.h: a C++ program's own
  // pre-tokenized data, the Python module's train_dataset/eval_dataset of ids) in place of the
  // data files: train_dataset for --train_file, validation_dataset for --validation_file (null:
  // the first validation_split_percentage% of train_dataset's rows, as from a train file).
  std::shared_ptr<const TokenDataset> train_dataset;
  std::shared_ptr<const TokenDataset> validation_dataset;

  // The task: "causal-lm" (run_clm, the default) or "text-classification" (run_classification:
  // GPT2ForSequenceClassification on labelled CSV / JSON Lines files; the flags below).
  std::string task = "causal-lm";
  std::vector<std::string> test_files;         // --test_file, read with --do_predict
  std::string text_column_names = "sentence";  // comma-separated; joined by the delimiter
  std::string text_column_delimiter = " ";
  std::string label_column_name = "label";
  // "" (None): regression when the train split's labels are floats; "True" or "False" decides.
  std::string do_regression;
  std::int64_t max_seq_length = 128;  // truncation and padding length
  std::int64_t max_predict_samples = -1;

  // TrainingArguments.
  std::string output_dir;
  bool overwrite_output_dir = false;
  bool do_train = false;
  bool do_eval = false;
  bool do_predict = false;  // text-classification: the test report on --test_file
  std::int64_t per_device_train_batch_size = 8;
  std::int64_t per_device_eval_batch_size = 8;
  std::int64_t gradient_accumulation_steps = 1;
  double learning_rate = 5e-5;
  double weight_decay = 0.0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  double max_grad_norm = 1.0;
  double num_train_epochs = 3.0;
  std::int64_t max_steps = -1;  // > 0 overrides num_train_epochs
  std::string lr_scheduler_type = "linear";
  double warmup_ratio = 0.0;
  // >= 1: that many steps (truncated, as int() does); in (0, 1): a fraction of the total steps
  // (transformers 5.x); either overrides warmup_ratio.
  double warmup_steps = 0.0;
  std::int64_t logging_steps = 500;
  IntervalStrategy eval_strategy = IntervalStrategy::kNo;
  std::int64_t eval_steps = -1;  // -1: logging_steps
  IntervalStrategy save_strategy = IntervalStrategy::kSteps;
  std::int64_t save_steps = 500;
  std::int64_t save_total_limit = -1;  // -1: keep every checkpoint
  // A checkpoint-N folder, an output_dir (its `latest`), or "latest" (this output_dir's): the run
  // continues from there, on any world size, stage or precision (docs/checkpoints.md).
  std::string resume_from_checkpoint;
  std::uint64_t seed = 42;
  bool bf16 = false;
  bool fp16 = false;
  bool gradient_checkpointing = false;
  // --recompute_blocks: "" (none), a count k (the first k blocks recompute their activations in
  // backward; recompute_blocks_of) or "auto" (the fewest the memory plan needs, resolved before
  // the run). --gradient_checkpointing recomputes every block.
  std::string recompute_blocks;
  std::string deepspeed;  // DeepSpeed JSON config; empty: ZeRO stage 0 with HF's AdamW

  // zero's own: samples printed from the final model (0: none), as the demo shows them.
  int num_samples = 0;
  int sample_tokens = 64;
  std::string prompt;  // empty: start from <|endoftext|>
  int top_k = 20;
  double temperature = 0.9;
  bool plot = true;  // output_dir/loss.svg through gnuplot when it is installed

  // --dry_run: print the run's memory plan per rank (zero/train/plan.h) and return, allocating no
  // model memory and reading no data; --world_size plans that many ranks (default: the launch's).
  bool dry_run = false;
  std::int64_t world_size = -1;
  // Run even when the memory plan says a phase does not fit the node (zero::train refuses it
  // otherwise, before anything is allocated, naming the phase).
  bool ignore_memory_plan = false;

  // The TrainingArguments flags of issue 23 that change the run (docs/flags.md). --optim: the
  // optimizer when the DeepSpeed config has no "optimizer" section (adamw_torch,
  // adamw_torch_fused, adamw_hf: AdamW; sgd: SGD). --report_to tensorboard (or all): TensorBoard
  // event files in logging_dir (default output_dir/runs/<time>_<host>), as HF's callback writes.
  std::string optim = "adamw_torch_fused";  // 5.x's default (torch >= 2.8); AdamW as adamw_torch
  std::string report_to = "none";
  std::string logging_dir;
  std::string run_name;                       // named in the start log
  std::string log_level = "passive";          // rank 0's: debug, info, warning, error, critical
  std::string log_level_replica = "warning";  // the other ranks'
  std::string ddp_backend;                    // mpi, gloo or nccl; empty: chosen by the launch
  std::int64_t ddp_timeout = 1800;            // seconds one collective waits for its peers
  int dataloader_num_workers = 0;             // tokenizer threads when no preprocessing_num_workers
  std::int64_t local_rank = -1;               // torch.distributed.launch's --local-rank
  bool use_cpu = false;                       // the CPU even when CUDA devices are visible
  bool save_safetensors = true;               // zero writes safetensors only

  // The TrainingArguments flags of issue 23 that need the training loop, with Hugging Face
  // Trainer's meaning (docs/flags.md).
  bool eval_on_start = false;  // an evaluation before the first step, logged at step 0
  // The best checkpoint by metric_for_best_model (empty: "loss" with load_best_model_at_end, else
  // none tracked) is kept from rotation and loaded at the end. greater_is_better: when not given,
  // true unless the metric ends in "loss" (greater_is_better_for()).
  bool load_best_model_at_end = false;
  std::string metric_for_best_model;
  bool greater_is_better = false;
  bool save_only_model = false;  // checkpoint-N holds the model files only (not resumable)
  IntervalStrategy logging_strategy = IntervalStrategy::kSteps;
  bool logging_first_step = false;
  bool include_tokens_per_second = false;  // train_tokens_per_second in train_results.json
  // num_input_tokens_seen in every log entry: "no" (or "False"), "all" (or "True": every token of
  // the rows trained on) or "non_padding" (5.x: a classification row's tokens before its padding).
  std::string include_num_input_tokens_seen = "no";
  std::int64_t data_seed = -1;        // the sampler's shuffle seed; -1 (None): --seed
  bool auto_find_batch_size = false;  // halve the micro-batch until the plan fits the node
  bool dataloader_drop_last = false;  // drop each epoch's last incomplete global batch
  double eval_delay = 0.0;            // no evaluation before this step (epoch: this epoch)
  bool ignore_data_skip = false;      // a resumed run starts its epoch's data from the start
  // ε of the training and evaluation losses (Hugging Face's LabelSmoother, torch's
  // CrossEntropyLoss(label_smoothing=ε)): the LM's next-token loss and the classifier's.
  double label_smoothing_factor = 0.0;
  // 5.x: random (the sampler's shuffle), sequential (no shuffle) or group_by_length (random: the
  // blocks all have the same length).
  std::string train_sampling_strategy = "random";
  // run_clm's data: text files split into lines keep their line breaks (False: stripped, as
  // load_dataset("text", keep_linebreaks=False)); --dataset_name: a folder of text/json/csv files
  // (zero/train/dataset_folder.h), the Arrow files HF datasets cached for that name
  // (zero/train/datasets_cache.h), or a dataset in the Hub cache, in place of the files.
  bool keep_linebreaks = true;
  // The tokenized data is cached (text::load_token_stream) in the datasets cache's zero_tokens
  // folder (cache_dir, else HF_DATASETS_CACHE, HF_HOME/datasets, ...: zero/train/hub_cache.h),
  // never beside the data; --overwrite_cache rebuilds it.
  bool overwrite_cache = false;
  std::string dataset_name;
  std::string dataset_config_name;

  // The flags the command line gave (names without "--"), as `zero train`/`estimate` record
  // them: a value written in the DeepSpeed config wins over a flag not given
  // (apply_config_precedence). Unset (library callers): every value counts as given.
  std::optional<std::vector<std::string>> given_flags;
  bool was_given(std::string_view flag) const;
};

// Throws zero::Error naming the flag for a value out of range (batch sizes < 1, ...). The rules of
// --task's own flags are its kind's (train() and the planner check both before any work).
void check_arguments(const TrainingArguments& arguments);

// The blocks --recompute_blocks recomputes, the first ones of a model of `n_layer` blocks: 0 when
// not given, n_layer with --gradient_checkpointing. Throws zero::Error naming the flag for "auto"
// (the planner resolves it first: resolve_recompute_blocks, plan.h) or a count not in
// [0, n_layer].
int recompute_blocks_of(const TrainingArguments& arguments, std::int64_t n_layer);

// --include_num_input_tokens_seen as transformers 5.x reads it (a bool maps to all or no). Throws
// zero::Error naming the flag for another value.
enum class TokensSeen { kNo, kAll, kNonPadding };
TokensSeen tokens_seen_of(const TrainingArguments& arguments);

// The metric --load_best_model_at_end compares ("" when none is tracked) and whether greater is
// better, by Hugging Face's rules: metric_for_best_model, else "loss" with load_best_model_at_end;
// greater_is_better as given, else true unless the metric ends in "loss".
std::string metric_for_best_model_of(const TrainingArguments& arguments);
bool greater_is_better_for(const TrainingArguments& arguments);

// The steps of warmup Hugging Face runs for `total_steps`: warmup_steps when >= 1 (truncated),
// ceil(warmup_steps × total_steps) when it is a fraction in (0, 1) (5.x), else
// ceil(warmup_ratio × total_steps) (4.46).
std::int64_t warmup_steps_for(const TrainingArguments& arguments, std::int64_t total_steps);

// The values that fill a DeepSpeed config's "auto", all given as Hugging Face's Trainer gives them.
config::TrainerValues trainer_values(const TrainingArguments& arguments, std::int64_t world_size,
                                     std::int64_t total_steps, std::int64_t hidden_size);

// `given` with every empty flag value filled from TrainingArguments' defaults (Hugging Face's), as
// the Trainer fills "auto" from flags the command line did not give. `defaulted` lists each filled
// one as "--name value". world_size, total_steps and hidden_size have no default and stay empty.
struct DefaultedValues {
  config::TrainerValues values;
  std::vector<std::string> defaulted;
};
DefaultedValues with_hf_defaults(const config::TrainerValues& given);

}  // namespace zero::train
