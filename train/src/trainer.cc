// zero::train::train: run_clm on the engine. Everything that can be wrong with the input is checked
// on every rank (prepare.h) before rank 0 writes the first byte to output_dir.
#include "zero/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <tuple>

#include "checkpointing.h"
#include "micro_batch.h"
#include "preemption.h"
#include "prepare.h"
#include "run_outputs.h"
#include "zero/config/ds_config.h"
#include "zero/core/allocator.h"
#include "zero/core/memory_ledger.h"
#include "zero/engine/engine.h"
#include "zero/engine/from_config.h"
#include "zero/engine/memory_formula.h"
#include "zero/gpt2/checkpoint_hf.h"
#include "zero/gpt2/classifier.h"
#include "zero/gpt2/config.h"
#include "zero/gpt2/engine_classifier.h"
#include "zero/gpt2/engine_model.h"
#include "zero/gpt2/model.h"
#include "zero/offload/nvme_swap_store.h"
#include "zero/optim/lr_schedules.h"
#include "zero/optim/optimizers.h"
#include "zero/text/bpe_trainer.h"
#include "zero/text/lm_dataset.h"
#include "zero/text/progress.h"
#include "zero/text/sampler.h"
#include "zero/text/streaming.h"
#include "zero/text/text_files.h"
#include "zero/text/tokenizer.h"
#include "zero/train/classification_data.h"
#include "zero/train/monitors.h"

namespace zero::train {

namespace {

using namespace detail;
using nlohmann::json;

}  // namespace

TrainResult train(const TrainingArguments& arguments, Communicator& communicator,
                  const RunOptions& run_options) {
  if (arguments.dry_run) {  // the memory plan of this run, nothing allocated (plan.cc)
    TrainResult planned;
    planned.plan = dry_run(arguments,
                           arguments.world_size > 0 ? static_cast<int>(arguments.world_size)
                                                    : communicator.world_size(),
                           run_options.print && communicator.rank() == 0);
    return planned;
  }
  const Clock::time_point run_start = Clock::now();
  const int rank = communicator.rank(), world = communicator.world_size();
  const bool console = run_options.print && rank == 0;
  auto say = [console](const char* format, auto... values) {
    if (!console) return;
    std::printf(format, values...);
    std::fflush(stdout);
  };
  Prepared prepared = prepare(arguments, world, rank, run_options.print);
  const RunShape shape = run_shape(arguments, prepared, world);
  std::optional<Resumed> resume;  // checked before anything is written
  if (const std::optional<fs::path> folder = resume_folder(arguments))
    resume = check_resume(*folder, prepared.model_config, shape);
  // SIGTERM/SIGUSR1 while training, until train() returns (an evaluation-only run keeps the
  // process's own handlers).
  std::optional<PreemptionHandlers> preemption;
  if (arguments.do_train) preemption.emplace();
  // Test hook: rank 0 signals itself (SIGUSR1) after this step, as Slurm's --signal would.
  const char* preempt_test = std::getenv("ZERO_TEST_PREEMPT_AT_STEP");
  const std::int64_t preempt_test_step = preempt_test ? std::atoll(preempt_test) : -1;
  // Every rank has checked everything before rank 0 writes anything.
  communicator.barrier("zero::train inputs checked");
  const fs::path output_dir = arguments.output_dir;
  if (rank == 0) fs::create_directories(output_dir);

  const gpt2::GPT2Config& model_config = prepared.model_config;
  const config::DeepSpeedConfig& ds = prepared.deepspeed.config;
  const EngineOptions& options = prepared.engine.options;
  const std::int64_t B = arguments.per_device_train_batch_size, T = prepared.block_size;
  const std::int64_t accumulation = ds.gradient_accumulation_steps;
  const std::int64_t total_steps = prepared.total_steps;
  const std::int64_t warmup = warmup_steps_for(arguments, total_steps);
  for (const std::string& warning : prepared.deepspeed.warnings)
    say("config: %s\n", warning.c_str());
  for (const std::string& warning : prepared.engine.warnings) say("config: %s\n", warning.c_str());

  std::unique_ptr<LrSchedule> schedule =
      options.scheduler.type == config::SchedulerType::kNone
          ? make_hf_schedule(arguments.lr_scheduler_type, options.optimizer.lr, warmup, total_steps)
          : optim::make_lr_schedule(options.scheduler, options.optimizer.lr);
  const std::string schedule_name(schedule->name());
  Engine engine(options, communicator, optim::make_optimizer(options.optimizer),
                std::move(schedule));
  engine.set_swap_store_factory(make_nvme_swap_store);  // zero::make_engine's, until it builds this
  // The task's model: GPT2LMHeadModel (causal-lm) or GPT2ForSequenceClassification.
  const gpt2::ComputeOptions compute_options{.activation_checkpointing =
                                                 arguments.gradient_checkpointing};
  std::unique_ptr<gpt2::EngineModel> lm_model;
  std::unique_ptr<gpt2::EngineClassifier> classifier;
  if (prepared.classification) {
    classifier = std::make_unique<gpt2::EngineClassifier>(engine, model_config, prepared.head, B, T,
                                                          arguments.seed, engine.allocator(),
                                                          compute_options);
    if (prepared.pretrained) load_pretrained(*classifier, arguments.model_name_or_path);
  } else {
    lm_model = std::make_unique<gpt2::EngineModel>(engine, model_config, B, T, arguments.seed,
                                                   engine.allocator(), compute_options);
    if (prepared.pretrained) load_pretrained(*lm_model, arguments.model_name_or_path);
  }
  // The checkpoint's shards and engine state, before rank 0 rewrites any log file.
  if (resume) load_resume(*resume, engine);
  const int pad_id = static_cast<int>(prepared.head.pad_token_id);
  if (classifier) {
    std::string names;
    for (const std::string& label : prepared.head.id2label)
      names += (names.empty() ? "" : ", ") + label;
    say("task: text-classification, %lld labels (%s), pad_token_id %d, score.weight %s\n",
        static_cast<long long>(prepared.head.num_labels), names.c_str(), pad_id,
        prepared.pretrained_head ? "from the checkpoint" : "initialised N(0, initializer_range)");
  }
  say("model: GPT-2 %s, %lld layers, %lld heads, width %lld, vocabulary %lld, context %lld: "
      "%.2fM parameters\n",
      prepared.pretrained ? arguments.model_name_or_path.c_str() : "(from scratch)",
      static_cast<long long>(model_config.n_layer), static_cast<long long>(model_config.n_head),
      static_cast<long long>(model_config.n_embd), static_cast<long long>(model_config.vocab_size),
      static_cast<long long>(model_config.n_positions),
      static_cast<double>(model_config.num_parameters()) / 1e6);
  if (classifier) {
    say("data: %zu train, %zu validation and %zu test examples of %lld tokens (padded; %lld "
        "train examples truncated)\n",
        prepared.train_blocks, prepared.eval_blocks, prepared.test_examples,
        static_cast<long long>(T), static_cast<long long>(prepared.classify_train.truncated));
  } else if (arguments.streaming) {
    say("data: train blocks streamed from %zu file(s); %zu validation blocks of %lld tokens\n",
        prepared.streaming_files.size(), prepared.eval_blocks, static_cast<long long>(T));
  } else {
    say("data: %zu train and %zu validation blocks of %lld tokens\n", prepared.train_blocks,
        prepared.eval_blocks, static_cast<long long>(T));
  }
  say("engine: ZeRO stage %d, %d rank(s), %s lr %g (schedule %s, warmup %lld), clip %g, batch %lld "
      "= %lld per rank x %d x %lld accumulation; %lld steps (%.3g epochs)\n",
      options.stage, world, std::string(config::name_of(options.optimizer.type)).c_str(),
      options.optimizer.lr, schedule_name.c_str(), static_cast<long long>(warmup),
      options.gradient_clipping, static_cast<long long>(ds.train_batch_size),
      static_cast<long long>(B), world, static_cast<long long>(accumulation),
      static_cast<long long>(total_steps),
      static_cast<double>(total_steps) / static_cast<double>(prepared.steps_per_epoch));

  {  // The ZeRO memory formula for this run, beside what one rank would hold unsharded.
    std::vector<std::size_t> sizes;
    for (UnitId unit = 0; unit < static_cast<UnitId>(engine.num_units()); ++unit)
      sizes.push_back(engine.layout(unit).num_elements());  // every unit the engine holds
    const StatePolicy policy = state_policy(options);
    const int states = optim::make_optimizer(options.optimizer)->states_per_element();
    auto mib = [&](int stage, int ranks) {
      return static_cast<double>(model_state_bytes(stage, sizes, ranks, options.alignment_elements,
                                                   policy.compute, states, policy.accumulate)
                                     .total()) /
             (1024.0 * 1024.0);
    };
    // Where they live (offload: docs/engine.md): the placed bytes per memory space.
    const ModelStateBytesBySpace placed = model_state_bytes(options, sizes, world, states);
    std::string where;
    for (std::size_t s = 0; s < kNumMemorySpaces; ++s) {
      const auto space = static_cast<MemorySpace>(s);
      const std::int64_t bytes = placed.in(space).total();
      if (bytes == 0) continue;
      char part[64];
      std::snprintf(part, sizeof(part), "%s%s %.1f MiB", where.empty() ? "" : ", ",
                    std::string(name_of(space)).c_str(),
                    static_cast<double>(bytes) / (1024.0 * 1024.0));
      where += part;
    }
    say("memory: model states per rank %.1f MiB (stage %d, %s parameters, %s gradient "
        "accumulation), %.1f MiB unsharded; placed: %s\n",
        mib(options.stage, world), options.stage, std::string(name_of(policy.compute)).c_str(),
        std::string(name_of(policy.accumulate)).c_str(), mib(0, 1), where.c_str());
  }

  TrainResult result;
  json log_history = json::array();
  std::ofstream metrics;
  std::unique_ptr<Monitors> monitors;
  if (rank == 0) {
    metrics.open(output_dir / "metrics.jsonl", std::ios::trunc);
    monitors = std::make_unique<Monitors>(ds.csv_monitor, ds.tensorboard, output_dir);
  }
  const std::int64_t samples_per_step = B * world * accumulation;
  auto record = [&](const LogEntry& entry) {
    result.log_history.push_back(entry);
    if (rank != 0) return;
    const json line = entry_to_json(entry);
    log_history.push_back(line);
    metrics << line.dump() << "\n";
    metrics.flush();
    const std::int64_t samples = entry.step * samples_per_step;
    if (entry.loss) monitors->write("Train/Samples/train_loss", *entry.loss, samples);
    if (entry.learning_rate) monitors->write("Train/Samples/lr", *entry.learning_rate, samples);
    if (entry.loss_scale) monitors->write("Train/Samples/loss_scale", *entry.loss_scale, samples);
    if (entry.eval_loss) monitors->write("Eval/Samples/eval_loss", *entry.eval_loss, samples);
    if (entry.perplexity) monitors->write("Eval/Samples/perplexity", *entry.perplexity, samples);
  };

  // Evaluation: the first eval_blocks validation blocks, global batches of eval_B × W, each rank
  // its rows in micro-batches of B; a token-weighted mean (every block counts T - 1 targets, so
  // it equals Hugging Face's mean over samples).
  const std::int64_t eval_B = arguments.per_device_eval_batch_size;
  auto evaluate = [&](std::int64_t step) {
    const Clock::time_point start = Clock::now();
    const std::int64_t count = static_cast<std::int64_t>(prepared.eval_blocks);
    const std::int64_t global = eval_B * world;
    const std::int64_t batches = (count + global - 1) / global;
    text::ProgressBar bar("eval", static_cast<std::uint64_t>(batches), "batches", console);
    MicroBatch batch;
    double loss_sum = 0.0, targets = 0.0;
    for (std::int64_t first = 0; first < count; first += global) {
      const std::int64_t begin = first + rank * eval_B;
      const std::int64_t end = std::min(first + (rank + 1) * eval_B, count);
      for (std::int64_t chunk = begin; chunk < begin + eval_B; chunk += B) {
        std::vector<std::size_t> blocks;
        for (std::int64_t b = chunk; b < std::min(chunk + B, end); ++b)
          blocks.push_back(static_cast<std::size_t>(b));
        fill_micro_batch(prepared.data.validation, blocks, B, T, batch);
        const double loss = lm_model->eval_loss(batch.tokens, batch.targets);
        loss_sum += loss * static_cast<double>(lm_model->num_counted_targets());
        targets += static_cast<double>(lm_model->num_counted_targets());
      }
      bar.add(1);
    }
    bar.finish();
    const double mean_targets = engine.average_across_ranks(targets);
    const double mean_sum = engine.average_across_ranks(loss_sum);
    const double loss = mean_targets > 0 ? mean_sum / mean_targets : 0.0;
    LogEntry entry;
    entry.step = step;
    entry.epoch = static_cast<double>(step) / static_cast<double>(prepared.steps_per_epoch);
    entry.eval_loss = loss;
    entry.perplexity = perplexity_of(loss);
    record(entry);
    say("step %lld/%lld | eval_loss %.4f | perplexity %.2f | %lld blocks in %.1f s\n",
        static_cast<long long>(step), static_cast<long long>(total_steps), loss, *entry.perplexity,
        static_cast<long long>(count), seconds_since(start));
    return std::pair{loss, seconds_since(start)};
  };

  // Classification evaluation of the first `count` examples of `data`: global batches of
  // eval_B × W, rank r rows [first + r·eval_B, first + (r+1)·eval_B) in micro-batches of B, the
  // rows past `count` padded and ignored, so every example counts exactly once whatever the world
  // size. Every rank gets all predictions (one all_gather, in example order).
  struct ClassifyEval {
    double loss = 0.0;
    double accuracy = 0.0;
    std::vector<int> predictions;
    double seconds = 0.0;
  };
  auto evaluate_classification = [&](const ClassificationDataset& data, std::size_t count,
                                     const char* what) {
    const Clock::time_point start = Clock::now();
    const auto total = static_cast<std::int64_t>(count);
    const std::int64_t global = eval_B * world;
    const std::int64_t batches = (total + global - 1) / global;
    text::ProgressBar bar(what, static_cast<std::uint64_t>(batches), "batches", console);
    std::vector<int> tokens, labels;
    // This rank's predictions, eval_B per global batch, -1 where a row is padding.
    std::vector<float> local(static_cast<std::size_t>(batches * eval_B), -1.0f);
    double loss_sum = 0.0, counted = 0.0;
    for (std::int64_t batch_index = 0; batch_index < batches; ++batch_index) {
      const std::int64_t begin = batch_index * global + rank * eval_B;
      const std::int64_t end = std::min(begin + eval_B, total);
      for (std::int64_t chunk = begin; chunk < begin + eval_B; chunk += B) {
        std::vector<std::size_t> rows;
        for (std::int64_t i = chunk; i < std::min(chunk + B, end); ++i)
          rows.push_back(static_cast<std::size_t>(i));
        fill_classification_batch(data, rows, B, pad_id, tokens, labels);
        const double loss = classifier->evaluate(tokens, labels);
        loss_sum += loss * static_cast<double>(classifier->num_counted());
        counted += static_cast<double>(classifier->num_counted());
        const std::vector<int> predicted = classifier->predictions();
        for (std::size_t b = 0; b < rows.size(); ++b)
          local[static_cast<std::size_t>(batch_index * eval_B + (chunk - begin)) + b] =
              static_cast<float>(predicted[b]);
      }
      bar.add(1);
    }
    bar.finish();
    std::vector<float> all(local.size() * static_cast<std::size_t>(world));
    communicator.all_gather(local.data(), all.data(), local.size(), DType::kFloat32,
                            "classification predictions");
    communicator.synchronize();
    ClassifyEval outcome;
    outcome.predictions.assign(count, -1);
    for (int r = 0; r < world; ++r)
      for (std::int64_t batch_index = 0; batch_index < batches; ++batch_index)
        for (std::int64_t i = 0; i < eval_B; ++i) {
          const float value = all[static_cast<std::size_t>(r) * local.size() +
                                  static_cast<std::size_t>(batch_index * eval_B + i)];
          const std::int64_t example = batch_index * global + r * eval_B + i;
          if (value < 0.0f) continue;
          ZERO_CHECK(example < total && outcome.predictions[example] == -1,
                     "classification evaluation: example ", example, " predicted twice");
          outcome.predictions[static_cast<std::size_t>(example)] = static_cast<int>(value);
        }
    std::int64_t correct = 0;
    for (std::size_t i = 0; i < count; ++i) {
      ZERO_CHECK(outcome.predictions[i] >= 0, "classification evaluation: example ", i,
                 " has no prediction");
      correct += outcome.predictions[i] == data.labels[i];
    }
    const double mean_counted = engine.average_across_ranks(counted);
    const double mean_sum = engine.average_across_ranks(loss_sum);
    outcome.loss = mean_counted > 0 ? mean_sum / mean_counted : 0.0;
    outcome.accuracy = count > 0 ? static_cast<double>(correct) / static_cast<double>(count) : 0.0;
    outcome.seconds = seconds_since(start);
    return outcome;
  };
  auto evaluate_validation = [&](std::int64_t step) {
    const ClassifyEval validation =
        evaluate_classification(prepared.classify_validation, prepared.eval_blocks, "eval");
    LogEntry entry;
    entry.step = step;
    entry.epoch = static_cast<double>(step) / static_cast<double>(prepared.steps_per_epoch);
    entry.eval_loss = validation.loss;
    entry.eval_accuracy = validation.accuracy;
    record(entry);
    say("step %lld/%lld | eval_loss %.4f | eval_accuracy %.4f | %zu examples in %.1f s\n",
        static_cast<long long>(step), static_cast<long long>(total_steps), validation.loss,
        validation.accuracy, prepared.eval_blocks, validation.seconds);
    return std::tuple{validation.loss, validation.seconds, validation.accuracy};
  };

  MemoryLedger save_ledger;
  HostAllocator save_allocator(save_ledger);
  auto trainer_state = [&](std::int64_t step) {
    return hf_trainer_state(arguments, step, prepared.steps_per_epoch, total_steps, B, log_history);
  };
  auto save = [&](const fs::path& folder, std::int64_t step) {
    std::unique_ptr<gpt2::GPT2Model> whole;
    if (classifier) {
      whole = gather_model(*classifier, save_allocator);
      const std::vector<float> score = gather_score(*classifier);
      if (!whole) return whole;
      gpt2::save_classifier_checkpoint(*whole, prepared.head, score, folder);
    } else {
      whole = gather_model(*lm_model, save_allocator);
      if (!whole) return whole;
      gpt2::save_hf_checkpoint(*whole, folder);
    }
    save_tokenizer(prepared, folder);
    write_json(folder / "trainer_state.json", trainer_state(step));
    return whole;
  };
  const std::int64_t eval_steps =
      arguments.eval_steps > 0 ? arguments.eval_steps : arguments.logging_steps;
  std::optional<double> last_eval, last_eval_accuracy;
  std::int64_t last_eval_step = -1;
  double eval_runtime = 0.0;
  double train_runtime = 0.0, train_loss_sum = 0.0;
  std::int64_t step = 0;
  if (arguments.do_train) {
    std::unique_ptr<text::StreamingShard> stream;
    std::vector<std::vector<text::TokenId>> stream_blocks;
    if (arguments.streaming)
      stream = std::make_unique<text::StreamingShard>(
          text::StreamingBlocks(prepared.streaming_files, *prepared.tokenizer,
                                static_cast<std::size_t>(T)),
          static_cast<std::size_t>(B * world), world, rank);
    text::DistributedSampler sampler({.num_blocks = std::max<std::size_t>(prepared.train_blocks, 1),
                                      .global_batch_size = static_cast<std::size_t>(B * world),
                                      .world_size = world,
                                      .rank = rank,
                                      .seed = arguments.seed});
    say("training: %lld steps of %lld samples; logging every %lld, %s evaluation, %s saves\n",
        static_cast<long long>(total_steps), static_cast<long long>(samples_per_step),
        static_cast<long long>(arguments.logging_steps),
        classifier && arguments.do_eval && arguments.eval_strategy != IntervalStrategy::kSteps
            ? "epoch"
            : std::string(name_of(arguments.eval_strategy)).c_str(),
        std::string(name_of(arguments.save_strategy)).c_str());
    MicroBatch batch;
    double epoch_correct = 0.0, epoch_counted = 0.0, epoch_loss = 0.0;  // text-classification
    std::int64_t epoch_steps = 0;
    double window_loss = 0.0;
    std::int64_t window_steps = 0;
    std::int64_t first_step = 1;
    if (resume) {  // the data position, the loss sums, the logs so far
      const Resumed& resumed = *resume;
      const TrainerProgress& p = resumed.progress;
      first_step = p.step + 1;
      sampler.set_position({static_cast<std::uint64_t>(p.step * accumulation)});
      if (stream) stream->seek(p.stream_position);
      train_loss_sum = p.train_loss_sum;
      window_loss = p.window_loss;
      window_steps = p.window_steps;
      epoch_loss = p.epoch_loss;
      epoch_correct = p.epoch_correct;
      epoch_counted = p.epoch_counted;
      epoch_steps = p.epoch_steps;
      for (const json& line : resumed.log_history)
        if (line.contains("step") && line.value("step", std::int64_t{0}) <= p.step)
          record(entry_from_json(line));
      std::string changes;
      for (const std::string& note : resumed.notes) changes += "; " + note;
      say("resumed from %s at step %lld (written by %d rank(s), stage %d, %s parameters%s)\n",
          resumed.folder.c_str(), static_cast<long long>(p.step), resumed.index.world_size,
          resumed.index.stage, resumed.index.param_dtype.c_str(), changes.c_str());
    }
    auto save_resumable = [&](std::int64_t at) {
      const TrainerProgress progress{.step = at,
                                     .sampler_position = sampler.position().step,
                                     .stream_position = stream ? stream->step() : 0,
                                     .train_loss_sum = train_loss_sum,
                                     .window_loss = window_loss,
                                     .window_steps = window_steps,
                                     .epoch_loss = epoch_loss,
                                     .epoch_correct = epoch_correct,
                                     .epoch_counted = epoch_counted,
                                     .epoch_steps = epoch_steps};
      const Clock::time_point start = Clock::now();
      const fs::path folder =
          save_checkpoint(communicator, engine, output_dir, at, arguments.save_total_limit, shape,
                          progress, [&](const fs::path& staging) { save(staging, at); });
      say("saved %s in %.2f s\n", folder.c_str(), seconds_since(start));
    };
    Clock::time_point window_start = Clock::now();
    const Clock::time_point train_start = Clock::now();
    text::ProgressBar bar("train", static_cast<std::uint64_t>(total_steps), "steps", console);
    for (step = first_step; step <= total_steps; ++step) {
      double step_loss = 0.0;
      for (std::int64_t micro = 0; micro < accumulation; ++micro) {
        const std::uint64_t position =
            static_cast<std::uint64_t>((step - 1) * accumulation + micro);
        if (stream) {
          // At the end of the stream, another pass (Hugging Face's next epoch).
          if (!stream->next(stream_blocks)) {
            stream->seek(0);
            ZERO_CHECK(stream->next(stream_blocks), "the training stream ran dry");
          }
          fill_micro_batch(stream_blocks, B, T, batch);
        } else if (classifier) {
          fill_classification_batch(prepared.classify_train, sampler.next(), B, pad_id,
                                    batch.tokens, batch.targets);
        } else {
          fill_micro_batch(prepared.data.train, sampler.next(), B, T, batch);
        }
        // Dropout keyed by (optimizer step, sample within its global batch): the same masks
        // whatever the world size and accumulation that make up the global batch.
        const gpt2::DropoutKey dropout{
            .seed = arguments.seed,
            .step = static_cast<std::uint64_t>(step - 1),
            .sample_offset =
                (static_cast<std::int64_t>(position) % accumulation) * B * world + rank * B,
            .training = true};
        if (classifier) {
          step_loss += classifier->train_micro_step(batch.tokens, batch.targets, dropout);
          const std::vector<int> predicted = classifier->predictions();
          for (std::size_t b = 0; b < predicted.size(); ++b)
            if (batch.targets[b] >= 0) {
              epoch_correct += predicted[b] == batch.targets[b];
              ++epoch_counted;
            }
        } else {
          step_loss += lm_model->train_micro_step(batch.tokens, batch.targets, dropout);
        }
        engine.step();
      }
      const double loss =
          engine.average_across_ranks(step_loss / static_cast<double>(accumulation));
      window_loss += loss;
      train_loss_sum += loss;
      ++window_steps;
      bar.add(1);
      const bool epoch_end = step % prepared.steps_per_epoch == 0;
      if (step % arguments.logging_steps == 0 || step == total_steps) {
        const double seconds = seconds_since(window_start);
        float peak_mib = static_cast<float>(
            static_cast<double>(engine.ledger().space_total(MemorySpace::kDevice).peak_bytes +
                                engine.ledger().space_total(MemorySpace::kHost).peak_bytes) /
            (1 << 20));
        std::vector<float> peaks(static_cast<std::size_t>(world));
        communicator.all_gather(&peak_mib, peaks.data(), 1, DType::kFloat32, "memory peaks");
        communicator.synchronize();
        LogEntry entry;
        entry.step = step;
        entry.epoch = static_cast<double>(step) / static_cast<double>(prepared.steps_per_epoch);
        entry.loss = window_loss / static_cast<double>(window_steps);
        entry.learning_rate = engine.lr();
        entry.grad_norm = engine.global_grad_norm();
        entry.loss_scale = engine.loss_scale();
        entry.tokens_per_second =
            static_cast<double>(window_steps * samples_per_step * T) / std::max(seconds, 1e-9);
        record(entry);
        std::string peak_text;
        for (const float peak : peaks) {
          char piece[32];
          std::snprintf(piece, sizeof(piece), "%s%.1f", peak_text.empty() ? "" : "/", peak);
          peak_text += piece;
        }
        say("step %lld/%lld | epoch %.3f | loss %.4f | lr %.3e | grad_norm %.3f | loss_scale %g "
            "| %.0f tokens/s | memory peak MiB per rank %s\n",
            static_cast<long long>(step), static_cast<long long>(total_steps), entry.epoch,
            *entry.loss, *entry.learning_rate, *entry.grad_norm, *entry.loss_scale,
            *entry.tokens_per_second, peak_text.c_str());
        window_loss = 0.0;
        window_steps = 0;
        window_start = Clock::now();
      }
      epoch_loss += loss;
      ++epoch_steps;
      // text-classification validates at every epoch's end (and as eval_strategy asks).
      if (arguments.do_eval &&
          ((arguments.eval_strategy == IntervalStrategy::kSteps && step % eval_steps == 0) ||
           ((arguments.eval_strategy == IntervalStrategy::kEpoch || classifier) && epoch_end))) {
        if (classifier) {
          double accuracy = 0.0;
          std::tie(last_eval, eval_runtime, accuracy) = evaluate_validation(step);
          last_eval_accuracy = accuracy;
        } else {
          std::tie(last_eval, eval_runtime) = evaluate(step);
        }
        last_eval_step = step;
      }
      if (classifier && (epoch_end || step == total_steps)) {
        // The epoch's line: mean training loss and accuracy (of the training forward, dropout
        // on) over the epoch's steps, all ranks' rows; the validation of this step when it ran.
        const double correct = engine.average_across_ranks(epoch_correct);
        const double counted = engine.average_across_ranks(epoch_counted);
        LogEntry entry;
        entry.step = step;
        entry.epoch = static_cast<double>(step) / static_cast<double>(prepared.steps_per_epoch);
        entry.epoch_train_loss =
            epoch_loss / static_cast<double>(std::max<std::int64_t>(epoch_steps, 1));
        entry.train_accuracy = counted > 0 ? correct / counted : 0.0;
        record(entry);
        std::string validation;
        if (last_eval_step == step) {
          char text[96];
          std::snprintf(text, sizeof(text), " | eval_loss %.4f | eval_accuracy %.4f", *last_eval,
                        *last_eval_accuracy);
          validation = text;
        }
        say("epoch %.2f | train_loss %.4f | train_accuracy %.4f%s\n", entry.epoch,
            *entry.epoch_train_loss, *entry.train_accuracy, validation.c_str());
        epoch_correct = epoch_counted = epoch_loss = 0.0;
        epoch_steps = 0;
      }
      // Preemption: every rank agrees at this boundary, saves and leaves the loop.
      if (step == preempt_test_step && rank == 0) std::raise(SIGUSR1);
      const bool preempted = preemption->agreed(communicator);
      if ((arguments.save_strategy == IntervalStrategy::kSteps &&
           step % arguments.save_steps == 0) ||
          (arguments.save_strategy == IntervalStrategy::kEpoch && epoch_end) || preempted)
        save_resumable(step);
      if (preempted) {
        const int signal = PreemptionHandlers::received();
        say("preempted (%s): stopped after step %lld with a checkpoint; continue with "
            "--resume_from_checkpoint latest\n",
            signal == SIGTERM   ? "SIGTERM"
            : signal == SIGUSR1 ? "SIGUSR1"
                                : "a signal to another rank",
            static_cast<long long>(step));
        result.preempted = true;
        result.global_step = step;
        return result;
      }
    }
    step = total_steps;
    bar.finish();
    train_runtime = seconds_since(train_start);
    result.train_loss =
        train_loss_sum / static_cast<double>(std::max<std::int64_t>(total_steps, 1));
  }
  result.memory = MemoryPeaks::of(engine.ledger());  // measured: the plan's check
  result.global_step = step;
  result.epoch = static_cast<double>(step) / static_cast<double>(prepared.steps_per_epoch);

  // run_clm: trainer.evaluate() after training.
  // (An evaluation at the last step already is that one.)
  if (arguments.do_eval && last_eval_step != step) {
    if (classifier) {
      double accuracy = 0.0;
      std::tie(last_eval, eval_runtime, accuracy) = evaluate_validation(step);
      last_eval_accuracy = accuracy;
    } else {
      std::tie(last_eval, eval_runtime) = evaluate(step);
    }
  }
  result.eval_loss = last_eval;
  result.eval_accuracy = last_eval_accuracy;

  // text-classification --do_predict: the test split's report, as scikit-learn prints it.
  json test_results;
  if (classifier && arguments.do_predict) {
    const ClassifyEval test =
        evaluate_classification(prepared.classify_test, prepared.test_examples, "test");
    const std::vector<int> truth(prepared.classify_test.labels.begin(),
                                 prepared.classify_test.labels.begin() +
                                     static_cast<std::ptrdiff_t>(prepared.test_examples));
    ClassificationReport report =
        classification_report(truth, test.predictions, prepared.head.id2label);
    const std::string text = report.text(), confusion = report.confusion_text();
    say("test: %zu examples, loss %.4f, accuracy %.4f\n%s\nconfusion matrix (rows: true label, "
        "columns: predicted):\n%s",
        prepared.test_examples, test.loss, report.accuracy, text.c_str(), confusion.c_str());
    test_results = {{"test_loss", test.loss},
                    {"test_accuracy", report.accuracy},
                    {"test_samples", prepared.test_examples},
                    {"test_runtime", test.seconds},
                    {"labels", prepared.head.id2label},
                    {"classification_report", json::parse(report.to_json_text())},
                    {"classification_report_text", text},
                    {"confusion_matrix", report.confusion},
                    {"predictions", test.predictions}};
    result.test_loss = test.loss;
    result.test_report = std::move(report);
  }

  // The final model in output_dir, the result files, the plot, samples.
  std::unique_ptr<gpt2::GPT2Model> whole;
  if (arguments.do_train) {
    whole = save(output_dir, step);
    say("saved %s/{config.json,model.safetensors,tokenizer files} (Hugging Face %s)\n",
        output_dir.c_str(), classifier ? "GPT2ForSequenceClassification" : "GPT2LMHeadModel");
  }
  if (rank == 0) {
    json all = json::object();
    const double epoch = result.epoch;
    if (arguments.do_train) {
      const double samples = static_cast<double>(step * samples_per_step);
      json train_results = {
          {"epoch", epoch},
          {"train_loss", *result.train_loss},
          {"train_runtime", train_runtime},
          {"train_samples", prepared.train_blocks},
          {"train_samples_per_second", samples / std::max(train_runtime, 1e-9)},
          {"train_steps_per_second", static_cast<double>(step) / std::max(train_runtime, 1e-9)}};
      write_json(output_dir / "train_results.json", train_results);
      all.update(train_results);
      log_history.push_back({{"epoch", epoch},
                             {"step", step},
                             {"train_loss", *result.train_loss},
                             {"train_runtime", train_runtime}});
    }
    if (arguments.do_eval) {
      const double blocks = static_cast<double>(prepared.eval_blocks);
      json eval_results = {{"epoch", epoch},
                           {"eval_loss", *last_eval},
                           {"eval_samples", prepared.eval_blocks},
                           {"eval_runtime", eval_runtime},
                           {"eval_samples_per_second", blocks / std::max(eval_runtime, 1e-9)}};
      if (classifier)
        eval_results["eval_accuracy"] = *last_eval_accuracy;
      else
        eval_results["perplexity"] = perplexity_of(*last_eval);
      write_json(output_dir / "eval_results.json", eval_results);
      all.update(eval_results);
    }
    if (!test_results.is_null()) {
      write_json(output_dir / "test_results.json", test_results);
      for (const char* key : {"test_loss", "test_accuracy", "test_samples", "test_runtime"})
        all[key] = test_results[key];
    }
    write_json(output_dir / "all_results.json", all);
    write_json(output_dir / "trainer_state.json", trainer_state(step));
    if (arguments.plot) {
      std::string why;
      if (plot_log(output_dir, result.log_history, why)) {
        say("plot: %s/loss.svg\n", output_dir.c_str());
      } else if (run_options.print) {
        std::fprintf(stderr, "zero train: warning: no loss plot: %s\n", why.c_str());
      }
    }
  }
  if (whole && console && arguments.num_samples > 0 && !classifier) {
    const std::vector<std::string> samples =
        generate_samples(*whole, save_allocator, *prepared.tokenizer, arguments);
    for (std::size_t s = 0; s < samples.size(); ++s)
      say("sample %zu (top-k %d):\n%s\n%s\n", s + 1, arguments.top_k, std::string(40, '-').c_str(),
          samples[s].c_str());
  }
  say("done in %.1f s\n", seconds_since(run_start));
  return result;
}

}  // namespace zero::train
