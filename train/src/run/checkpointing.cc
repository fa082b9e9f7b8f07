// The trainer's resumable checkpoints: save (crash-safe, rotated) and resume (checked).
#include "run/checkpointing.h"

#include <fstream>
#include <sstream>

#include "config/input_checks.h"
#include "run/best_model.h"
#include "zero/comm/host_collectives.h"
#include "zero/core/error.h"

namespace zero::train::detail {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json shape_to_json(const RunShape& shape) {
  return {{"task", shape.task},
          {"train_batch_size", shape.train_batch_size},
          {"per_device_train_batch_size", shape.per_device_train_batch_size},
          {"gradient_accumulation_steps", shape.gradient_accumulation_steps},
          {"world_size", shape.world_size},
          {"block_size", shape.block_size},
          {"seed", shape.seed},
          {"train_blocks", shape.train_blocks}};
}

json progress_to_json(const TrainerProgress& progress) {
  return {{"global_step", progress.step},
          {"sampler_position", progress.sampler_position},
          {"stream_position", progress.stream_position},
          {"train_loss_sum", progress.train_loss_sum},
          {"window_loss", progress.window_loss},
          {"window_steps", progress.window_steps},
          {"epoch_loss", progress.epoch_loss},
          {"epoch_correct", progress.epoch_correct},
          {"epoch_counted", progress.epoch_counted},
          {"epoch_steps", progress.epoch_steps}};
}

json read_json(const fs::path& path) {
  std::ifstream stream(path);
  if (!stream.good())
    input_error("--resume_from_checkpoint: ", path.string(),
                " is missing (not a resumable checkpoint, or an incomplete one)");
  try {
    return json::parse(stream);
  } catch (const json::exception& error) {
    input_error("--resume_from_checkpoint: ", path.string(), " is not valid JSON: ", error.what());
  }
}

}  // namespace

fs::path save_checkpoint(Communicator& communicator, Engine& engine, const fs::path& output_dir,
                         std::int64_t step, const SaveOptions& options, const RunShape& shape,
                         const TrainerProgress& progress,
                         const std::function<void(const fs::path&)>& write_hf_files) {
  checkpoint::CheckpointSave save(communicator, output_dir, "checkpoint-" + std::to_string(step));
  write_hf_files(save.staging());
  if (!options.model_only) save.write_engine(engine);
  if (communicator.rank() == 0) {
    json state = {{"format", "zero-trainer-state"},
                  {"version", 1},
                  {"progress", progress_to_json(progress)},
                  {"run", shape_to_json(shape)}};
    if (options.model_only) state["save_only_model"] = true;
    checkpoint::write_file_atomically(save.staging() / kTrainerStateFile, state.dump(1) + "\n");
  }
  const fs::path folder = save.commit();
  if (communicator.rank() == 0) {
    if (options.best_checkpoint.empty()) {
      checkpoint::rotate(output_dir, "checkpoint-", options.save_total_limit);
    } else {
      checkpoint::rotate(output_dir, "checkpoint-", 0);  // staging folders only
      rotate_keeping_best(output_dir, options.save_total_limit, options.best_checkpoint);
    }
  }
  host_barrier(communicator, "checkpoint rotated");
  return folder;
}

RunShape run_shape(const TrainingArguments& arguments, const Prepared& prepared, int world) {
  const std::int64_t accumulation = prepared.deepspeed.config.gradient_accumulation_steps;
  return {.task = arguments.task,
          .train_batch_size = arguments.per_device_train_batch_size * world * accumulation,
          .per_device_train_batch_size = arguments.per_device_train_batch_size,
          .gradient_accumulation_steps = accumulation,
          .world_size = world,
          .block_size = prepared.block_size,
          .seed = arguments.seed,
          .train_blocks = prepared.train_blocks};
}

Resumed check_resume(const fs::path& folder, const gpt2::GPT2Config& model_config,
                     const RunShape& shape) {
  Resumed resumed;
  resumed.folder = folder;
  // The model: config.json's shape against this run's.
  const fs::path config_path = folder / "config.json";
  if (!fs::exists(config_path))
    input_error("--resume_from_checkpoint ", folder.string(), " has no config.json");
  const gpt2::GPT2Config written = gpt2::GPT2Config::load(config_path);
  const std::pair<const char*, std::pair<std::int64_t, std::int64_t>> sizes[] = {
      {"vocab_size", {written.vocab_size, model_config.vocab_size}},
      {"n_positions", {written.n_positions, model_config.n_positions}},
      {"n_embd", {written.n_embd, model_config.n_embd}},
      {"n_layer", {written.n_layer, model_config.n_layer}},
      {"n_head", {written.n_head, model_config.n_head}},
      {"n_inner", {written.hidden_size(), model_config.hidden_size()}}};
  for (const auto& [key, values] : sizes)
    if (values.first != values.second)
      input_error("--resume_from_checkpoint ", folder.string(), ": the checkpoint's model has ",
                  key, " ", values.first, " (", config_path.string(), "), this run's has ",
                  values.second, "; resume with the model config it was trained with");

  const json state = read_json(folder / kTrainerStateFile);
  if (state.value("save_only_model", false)) refuse_model_only(folder);
  try {
    const json& run = state.at("run");
    resumed.written.task = run.at("task").get<std::string>();
    resumed.written.train_batch_size = run.at("train_batch_size").get<std::int64_t>();
    resumed.written.per_device_train_batch_size =
        run.at("per_device_train_batch_size").get<std::int64_t>();
    resumed.written.gradient_accumulation_steps =
        run.at("gradient_accumulation_steps").get<std::int64_t>();
    resumed.written.world_size = run.at("world_size").get<int>();
    resumed.written.block_size = run.at("block_size").get<std::int64_t>();
    resumed.written.seed = run.at("seed").get<std::uint64_t>();
    resumed.written.train_blocks = run.at("train_blocks").get<std::size_t>();
    const json& progress = state.at("progress");
    TrainerProgress& p = resumed.progress;
    p.step = progress.at("global_step").get<std::int64_t>();
    p.sampler_position = progress.at("sampler_position").get<std::uint64_t>();
    p.stream_position = progress.at("stream_position").get<std::uint64_t>();
    p.train_loss_sum = progress.at("train_loss_sum").get<double>();
    p.window_loss = progress.at("window_loss").get<double>();
    p.window_steps = progress.at("window_steps").get<std::int64_t>();
    p.epoch_loss = progress.at("epoch_loss").get<double>();
    p.epoch_correct = progress.at("epoch_correct").get<double>();
    p.epoch_counted = progress.at("epoch_counted").get<double>();
    p.epoch_steps = progress.at("epoch_steps").get<std::int64_t>();
  } catch (const json::exception& error) {
    input_error("--resume_from_checkpoint: ", (folder / kTrainerStateFile).string(),
                " is not valid: ", error.what());
  }
  const RunShape& was = resumed.written;
  if (was.task != shape.task)
    input_error("--resume_from_checkpoint ", folder.string(), ": written by a ", was.task,
                " run, this one is ", shape.task);
  if (was.train_batch_size != shape.train_batch_size)
    input_error("--resume_from_checkpoint ", folder.string(), ": written with a global batch of ",
                was.train_batch_size, " samples (", was.per_device_train_batch_size,
                " per device x ", was.world_size, " ranks x ", was.gradient_accumulation_steps,
                " accumulation), this run's is ", shape.train_batch_size, " (",
                shape.per_device_train_batch_size, " x ", shape.world_size, " x ",
                shape.gradient_accumulation_steps,
                "); keep per_device_train_batch_size x ranks x gradient_accumulation_steps");
  if (was.block_size != shape.block_size)
    input_error("--resume_from_checkpoint ", folder.string(), ": written with block_size ",
                was.block_size, ", this run's is ", shape.block_size);
  if (was.seed != shape.seed)
    resumed.notes.push_back("seed " + std::to_string(was.seed) + " -> " +
                            std::to_string(shape.seed) + " (other data order and dropout)");
  if (was.train_blocks != shape.train_blocks)
    resumed.notes.push_back("train blocks " + std::to_string(was.train_blocks) + " -> " +
                            std::to_string(shape.train_blocks) + " (another corpus)");
  if (const fs::path hf_state = folder / "trainer_state.json"; fs::exists(hf_state)) {
    const json hf = read_json(hf_state);
    resumed.log_history = hf.value("log_history", json::array());
    resumed.progress.input_tokens_seen = hf.value("num_input_tokens_seen", std::int64_t{0});
    for (const char* key : {"best_metric", "best_model_checkpoint", "best_global_step"})
      if (hf.contains(key)) resumed.best[key] = hf[key];
  } else {
    resumed.log_history = json::array();
  }

  try {
    resumed.index = checkpoint::read_index(folder);
    checkpoint::check_complete(folder, resumed.index);
  } catch (const InputError&) {
    throw;
  } catch (const Error& error) {
    input_error("--resume_from_checkpoint ", folder.string(), ": ", error.what());
  }
  if (resumed.index.training.global_steps != resumed.progress.step)
    input_error("--resume_from_checkpoint ", folder.string(), ": ", checkpoint::kIndexFileName,
                " is at step ", resumed.index.training.global_steps, ", ", kTrainerStateFile,
                " at ", resumed.progress.step);
  return resumed;
}

void load_resume(Resumed& resumed, Engine& engine) {
  resumed.index = checkpoint::load(engine, resumed.folder);
  const checkpoint::CheckpointIndex& index = resumed.index;
  if (index.world_size != engine.world_size())
    resumed.notes.push_back("world " + std::to_string(index.world_size) + " -> " +
                            std::to_string(engine.world_size()));
  if (index.stage != engine.options().stage)
    resumed.notes.push_back("stage " + std::to_string(index.stage) + " -> " +
                            std::to_string(engine.options().stage));
  const std::string dtype(name_of(engine.param_dtype()));
  if (index.param_dtype != dtype)
    resumed.notes.push_back(index.param_dtype + " -> " + dtype + " parameters");
}

}  // namespace zero::train::detail
