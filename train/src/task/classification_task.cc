// The text-classification task (classification_task.h).
#include "task/classification_task.h"

#include <algorithm>
#include <string>

#include "prepare/prepare.h"
#include "zero/comm/host_collectives.h"
#include "zero/gpt2/classifier.h"
#include "zero/gpt2/engine_save.h"
#include "zero/gpt2/family.h"
#include "zero/text/progress.h"
#include "zero/train/classification_metrics.h"

namespace zero::train::detail {

using nlohmann::json;

ClassificationTask::ClassificationTask(const TaskContext& context)
    : context_(context),
      B_(context.arguments.per_device_train_batch_size),
      pad_id_(static_cast<int>(context.prepared.head.pad_token_id)),
      problem_(context.prepared.head.problem_type.value_or(gpt2::ProblemType::kSingleLabel)),
      metric_key_(classification_metric_key(problem_)),
      model_(context.engine, context.prepared.model_config, context.prepared.head, B_,
             context.prepared.block_size, context.arguments.seed, context.engine.allocator(),
             {.activation_checkpointing = context.arguments.gradient_checkpointing,
              .recompute_blocks =
                  recompute_blocks_of(context.arguments, context.prepared.model_config.n_layer),
              .label_smoothing = static_cast<float>(context.arguments.label_smoothing_factor)}) {
  if (context_.prepared.pretrained)
    pretrained_load_ = load_pretrained(model_, context_.arguments.model_name_or_path);
}

namespace {
// ['lm_head.weight'], as Hugging Face lists tensor names in its load warnings.
std::string python_list(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "'" : ", '") + name + "'";
  return "[" + text + "]";
}

// The first maximum of a row's logits, as torch.argmax.
int argmax(std::span<const float> logits) {
  return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}
}  // namespace

std::string_view ClassificationTask::model_class() const {
  return gpt2::family_spec(context_.prepared.model_config.family).classifier_architecture;
}

void ClassificationTask::print_task() const {
  const Prepared& prepared = context_.prepared;
  std::string names;
  for (const std::string& label : prepared.head.id2label)
    names += (names.empty() ? "" : ", ") + label;
  context_.console.say(
      "task: text-classification (%s), %lld labels (%s), pad_token_id %d, score.weight %s\n",
      std::string(gpt2::name_of(problem_)).c_str(),
      static_cast<long long>(prepared.head.num_labels), names.c_str(), pad_id_,
      prepared.pretrained_head ? "from the checkpoint" : "initialised N(0, initializer_range)");
  // Hugging Face's from_pretrained warnings, for a classifier started from another head's model.
  const std::string model_class(this->model_class());
  const std::string& folder = context_.arguments.model_name_or_path;
  if (!pretrained_load_.unused.empty())
    context_.console.say(
        "warning: some weights of the model checkpoint at %s were not used when initializing "
        "%s: %s (expected when the checkpoint is a model with another head, a causal LM's)\n",
        folder.c_str(), model_class.c_str(), python_list(pretrained_load_.unused).c_str());
  if (!pretrained_load_.newly_initialised.empty())
    context_.console.say(
        "warning: some weights of %s were not initialized from the model checkpoint at %s and "
        "are newly initialized: %s (normal(0, initializer_range %g)); train the model on a "
        "down-stream task before using it for predictions\n",
        model_class.c_str(), folder.c_str(),
        python_list(pretrained_load_.newly_initialised).c_str(),
        prepared.model_config.initializer_range);
}

void ClassificationTask::print_data() const {
  const Prepared& prepared = context_.prepared;
  context_.console.say(
      "data: %zu train, %zu validation and %zu test examples of %lld tokens (padded; %lld "
      "train examples truncated)\n",
      prepared.train_blocks, prepared.eval_blocks, prepared.test_examples,
      static_cast<long long>(prepared.block_size),
      static_cast<long long>(prepared.classify_train.truncated));
}

void ClassificationTask::next_train_batch(text::DistributedSampler& sampler, MicroBatch& batch) {
  fill_classification_batch(context_.prepared.classify_train, sampler.next(), B_, pad_id_,
                            batch.tokens, batch.targets, batch.float_targets);
  // A row's tokens end at its first pad, where the model reads the label from (padding past it).
  const std::size_t T = batch.tokens.size() / static_cast<std::size_t>(B_);
  batch.rows = batch.non_padding_tokens = 0;
  for (std::size_t b = 0; b < static_cast<std::size_t>(B_); ++b) {
    if (batch.targets[b] < 0) continue;
    ++batch.rows;
    const auto row = std::span(batch.tokens).subspan(b * T, T);
    batch.non_padding_tokens +=
        static_cast<std::uint64_t>(std::find(row.begin(), row.end(), pad_id_) - row.begin());
  }
}

double ClassificationTask::train_micro_step(const MicroBatch& batch,
                                            const gpt2::DropoutKey& dropout,
                                            TrainerProgress& progress) {
  if (float_targets())
    return model_.train_micro_step(batch.tokens, std::span<const float>(batch.float_targets),
                                   dropout);
  const double loss = model_.train_micro_step(batch.tokens, batch.targets, dropout);
  const std::vector<int> predicted = model_.predictions();
  for (std::size_t b = 0; b < predicted.size(); ++b)
    if (batch.targets[b] >= 0) {
      progress.epoch_correct += predicted[b] == batch.targets[b];
      ++progress.epoch_counted;
    }
  return loss;
}

std::optional<LogEntry> ClassificationTask::end_step(std::int64_t step, const LogEntry* evaluation,
                                                     TrainerProgress& progress) {
  const Prepared& prepared = context_.prepared;
  if (step % prepared.steps_per_epoch != 0 && step != prepared.total_steps) return std::nullopt;
  const double correct = context_.engine.average_across_ranks(progress.epoch_correct);
  const double counted = context_.engine.average_across_ranks(progress.epoch_counted);
  LogEntry entry;
  entry.step = step;
  entry.epoch = epoch_at(step, prepared.steps_per_epoch);
  entry.epoch_train_loss =
      progress.epoch_loss / static_cast<double>(std::max<std::int64_t>(progress.epoch_steps, 1));
  char text[96] = "";
  if (!float_targets()) {
    entry.train_accuracy = counted > 0 ? correct / counted : 0.0;
    std::snprintf(text, sizeof(text), " | train_accuracy %.4f", *entry.train_accuracy);
  }
  std::string line = text;
  if (evaluation) {
    std::snprintf(text, sizeof(text), " | eval_loss %.4f | %s %.4f", *evaluation->eval_loss,
                  metric_key_.c_str(), metric_of(*evaluation).value_or(0.0));
    line += text;
  }
  context_.console.say("epoch %.2f | train_loss %.4f%s\n", entry.epoch, *entry.epoch_train_loss,
                       line.c_str());
  progress.epoch_correct = progress.epoch_counted = progress.epoch_loss = 0.0;
  progress.epoch_steps = 0;
  return entry;
}

double ClassificationTask::evaluate_rows(const ClassificationDataset& data,
                                         std::span<const std::size_t> rows) {
  if (!float_targets()) {
    fill_classification_batch(data, rows, B_, pad_id_, tokens_, labels_);
    return model_.evaluate(tokens_, labels_);
  }
  fill_classification_batch(data, rows, B_, pad_id_, tokens_, labels_, targets_);
  return model_.evaluate(tokens_, std::span<const float>(targets_));
}

ClassificationTask::Outcome ClassificationTask::evaluate_split(const ClassificationDataset& data,
                                                               std::size_t count,
                                                               const char* what) {
  const Clock::time_point start = Clock::now();
  const int rank = context_.engine.rank(), world = context_.engine.world_size();
  const std::int64_t eval_B = context_.arguments.per_device_eval_batch_size;
  const auto total = static_cast<std::int64_t>(count);
  const std::int64_t global = eval_B * world;
  const std::int64_t batches = (total + global - 1) / global;
  const auto K = static_cast<std::size_t>(context_.prepared.head.num_labels);
  const std::size_t width = K + 1;  // a row's slot: [1 (0: padding), logits (K)]
  text::ProgressBar bar(what, static_cast<std::uint64_t>(batches), "batches",
                        context_.console.progress_bars());
  // This rank's rows, eval_B slots per global batch.
  std::vector<float> local(static_cast<std::size_t>(batches * eval_B) * width, 0.0f);
  double loss_sum = 0.0, counted = 0.0;
  for (std::int64_t batch_index = 0; batch_index < batches; ++batch_index) {
    const std::int64_t begin = batch_index * global + rank * eval_B;
    const std::int64_t end = std::min(begin + eval_B, total);
    for (std::int64_t chunk = begin; chunk < begin + eval_B; chunk += B_) {
      std::vector<std::size_t> rows;
      for (std::int64_t i = chunk; i < std::min(chunk + B_, end); ++i)
        rows.push_back(static_cast<std::size_t>(i));
      const double loss = evaluate_rows(data, rows);
      loss_sum += loss * static_cast<double>(model_.num_counted());
      counted += static_cast<double>(model_.num_counted());
      const float* logits = model_.logits();
      for (std::size_t b = 0; b < rows.size(); ++b) {
        float* slot =
            local.data() +
            (static_cast<std::size_t>(batch_index * eval_B + (chunk - begin)) + b) * width;
        slot[0] = 1.0f;
        std::copy_n(logits + b * K, K, slot + 1);
      }
    }
    bar.add(1);
  }
  bar.finish();
  std::vector<float> all(local.size() * static_cast<std::size_t>(world));
  all_gather_host(context_.communicator, context_.engine.context(), local, all,
                  "classification predictions");
  Outcome outcome;
  outcome.logits.assign(count * K, 0.0f);
  std::vector<bool> seen(count, false);
  for (int r = 0; r < world; ++r)
    for (std::int64_t batch_index = 0; batch_index < batches; ++batch_index)
      for (std::int64_t i = 0; i < eval_B; ++i) {
        const float* slot = all.data() + static_cast<std::size_t>(r) * local.size() +
                            static_cast<std::size_t>(batch_index * eval_B + i) * width;
        const std::int64_t example = batch_index * global + r * eval_B + i;
        if (slot[0] == 0.0f) continue;
        ZERO_CHECK(example < total && !seen[static_cast<std::size_t>(example)],
                   "classification evaluation: example ", example, " predicted twice");
        seen[static_cast<std::size_t>(example)] = true;
        std::copy_n(slot + 1, K, outcome.logits.begin() + static_cast<std::ptrdiff_t>(example * K));
      }
  for (std::size_t i = 0; i < count; ++i)
    ZERO_CHECK(seen[i], "classification evaluation: example ", i, " has no prediction");
  const auto logits = std::span<const float>(outcome.logits);
  if (float_targets()) {
    const auto targets = std::span<const float>(data.targets).first(count * K);
    outcome.metric = problem_ == gpt2::ProblemType::kRegression
                         ? mean_squared_error(logits, targets)
                         : multi_label_micro_f1(logits, targets);
  } else {
    std::int64_t correct = 0;
    for (std::size_t i = 0; i < count; ++i) {
      outcome.predictions.push_back(argmax(logits.subspan(i * K, K)));
      correct += outcome.predictions[i] == data.labels[i];
    }
    outcome.metric = count > 0 ? static_cast<double>(correct) / static_cast<double>(count) : 0.0;
  }
  const double mean_counted = context_.engine.average_across_ranks(counted);
  const double mean_sum = context_.engine.average_across_ranks(loss_sum);
  outcome.loss = mean_counted > 0 ? mean_sum / mean_counted : 0.0;
  outcome.seconds = seconds_since(start);
  return outcome;
}

std::optional<double>& ClassificationTask::metric_of(LogEntry& entry) const {
  switch (problem_) {
    case gpt2::ProblemType::kRegression: return entry.eval_mse;
    case gpt2::ProblemType::kMultiLabel: return entry.eval_f1;
    case gpt2::ProblemType::kSingleLabel: break;
  }
  return entry.eval_accuracy;
}

Evaluation ClassificationTask::evaluate(std::int64_t step) {
  const Prepared& prepared = context_.prepared;
  const Outcome validation =
      evaluate_split(prepared.classify_validation, prepared.eval_blocks, "eval");
  Evaluation evaluation;
  LogEntry& entry = evaluation.entry;
  entry.step = step;
  entry.epoch = epoch_at(step, prepared.steps_per_epoch);
  entry.eval_loss = validation.loss;
  metric_of(entry) = validation.metric;
  evaluation.seconds = validation.seconds;
  context_.console.say("step %lld/%lld | eval_loss %.4f | %s %.4f | %zu examples in %.1f s\n",
                       static_cast<long long>(step), static_cast<long long>(prepared.total_steps),
                       validation.loss, metric_key_.c_str(), validation.metric,
                       prepared.eval_blocks, validation.seconds);
  return evaluation;
}

json ClassificationTask::float_predictions(const Outcome& test) const {
  const Prepared& prepared = context_.prepared;
  const auto K = static_cast<std::size_t>(prepared.head.num_labels);
  const std::string key = "test_" + metric_key_.substr(5);
  json predictions = json::array();
  for (std::size_t i = 0; i < prepared.test_examples; ++i) {
    if (problem_ == gpt2::ProblemType::kRegression) {
      predictions.push_back(test.logits[i]);
      continue;
    }
    json classes = json::array();  // run_classification's predict: the classes of logits > 0
    for (std::size_t k = 0; k < K; ++k)
      if (test.logits[i * K + k] > 0.0f) classes.push_back(prepared.head.id2label[k]);
    predictions.push_back(std::move(classes));
  }
  context_.console.say("test: %zu examples, loss %.4f, %s %.4f\n", prepared.test_examples,
                       test.loss, key.c_str(), test.metric);
  return {{"test_loss", test.loss},
          {key, test.metric},
          {"test_samples", prepared.test_examples},
          {"test_runtime", test.seconds},
          {"labels", prepared.head.id2label},
          {"problem_type", gpt2::name_of(problem_)},
          {"predictions", std::move(predictions)}};
}

json ClassificationTask::predict(TrainResult& result) {
  const Prepared& prepared = context_.prepared;
  const Outcome test = evaluate_split(prepared.classify_test, prepared.test_examples, "test");
  result.test_loss = test.loss;
  if (float_targets()) return float_predictions(test);
  const std::vector<int> truth(
      prepared.classify_test.labels.begin(),
      prepared.classify_test.labels.begin() + static_cast<std::ptrdiff_t>(prepared.test_examples));
  ClassificationReport report =
      classification_report(truth, test.predictions, prepared.head.id2label);
  const std::string text = report.text(), confusion = report.confusion_text();
  context_.console.say(
      "test: %zu examples, loss %.4f, accuracy %.4f\n%s\nconfusion matrix (rows: true label, "
      "columns: predicted):\n%s",
      prepared.test_examples, test.loss, report.accuracy, text.c_str(), confusion.c_str());
  json test_results = {{"test_loss", test.loss},
                       {"test_accuracy", report.accuracy},
                       {"test_samples", prepared.test_examples},
                       {"test_runtime", test.seconds},
                       {"labels", prepared.head.id2label},
                       {"classification_report", json::parse(report.to_json_text())},
                       {"classification_report_text", text},
                       {"confusion_matrix", report.confusion},
                       {"predictions", test.predictions}};
  result.test_report = std::move(report);
  return test_results;
}

void ClassificationTask::save_model(const std::filesystem::path& folder, DType dtype) {
  gpt2::save_classifier_checkpoint(model_, folder, {.dtype = dtype});
}

void ClassificationTask::load_model(const std::filesystem::path& folder) {
  load_pretrained(model_, folder);
}

}  // namespace zero::train::detail
