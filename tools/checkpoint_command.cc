// `zero checkpoint info DIR` and `zero checkpoint consolidate DIR OUT`: a resumable checkpoint
// described and validated, or turned into a Hugging Face model (DeepSpeed's zero_to_fp32.py),
// without the world that wrote it.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "cli.h"
#include "commands.h"
#include "zero/checkpoint/zero_checkpoint.h"
#include "zero/core/error.h"
#include "zero/gpt2/checkpoint_hf.h"
#include "zero/gpt2/classifier.h"
#include "zero/gpt2/units.h"

namespace zero::cli {
namespace {

namespace fs = std::filesystem;

std::string mib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

int run_info(const fs::path& given, bool checksums) {
  const fs::path folder = checkpoint::resolve(given);
  const checkpoint::CheckpointIndex index = checkpoint::read_index(folder);
  std::cout << "checkpoint " << folder.string() << "\n"
            << "step " << index.training.global_steps << " (optimizer steps "
            << index.training.optimizer_steps << ", skipped " << index.training.skipped_steps
            << ", scheduler at " << index.training.scheduler_last_batch_iteration << ", loss scale "
            << index.training.loss_scaler.scale << ")\n"
            << "written by world " << index.world_size << ", ZeRO stage " << index.stage << ", "
            << index.param_dtype << " parameters, " << index.master_dtype
            << " master weights, optimizer " << index.optimizer << " (states:";
  for (const std::string& state : index.optimizer_states) std::cout << " " << state;
  std::cout << ")\n";
  std::size_t total = 0;
  std::cout << index.units.size() << " units:\n";
  for (const checkpoint::UnitInfo& unit : index.units) {
    std::cout << "  " << unit.name << ": " << unit.num_elements << " elements\n";
    total += unit.num_elements;
  }
  std::cout << "parameters: " << total << " (" << mib(total * 4) << " fp32; with "
            << index.optimizer_states.size() << " optimizer states "
            << mib(total * 4 * (1 + index.optimizer_states.size())) << ")\n";
  std::uint64_t bytes = 0;
  std::cout << index.files.size() << " shard files:\n";
  for (const checkpoint::ShardFileInfo& file : index.files) {
    std::size_t elements = 0;
    for (const auto& [unit, range] : file.ranges) elements += range.size();
    std::cout << "  " << file.name << ": rank " << file.rank << ", " << file.size_bytes
              << " bytes, " << elements << " elements of " << file.ranges.size() << " units\n";
    bytes += file.size_bytes;
  }
  std::cout << "shard bytes: " << bytes << " (" << mib(bytes) << ")\n";
  checkpoint::validate(folder, index, checksums);
  std::cout << "valid: every file present with its recorded size"
            << (checksums ? " and checksum" : "") << ", every unit covered once\n";
  return 0;
}

// Streams: each unit is read from the shard files (only its pieces) and written before the next,
// so memory is the largest unit plus the writer's buffers, whatever the model's size.
int run_consolidate(const fs::path& given, const fs::path& out) {
  const fs::path folder = checkpoint::resolve(given);
  checkpoint::CheckpointIndex index = checkpoint::read_index(folder);
  checkpoint::check_complete(folder, index);
  const gpt2::ClassifierCheckpoint config = gpt2::load_classifier_config(folder);
  const std::vector<gpt2::UnitSpec> specs = gpt2::gpt2_units(config.body);
  for (const gpt2::UnitSpec& spec : specs) {  // every unit checked before anything is written
    const checkpoint::UnitInfo* unit = index.find_unit(spec.name);
    ZERO_CHECK(unit != nullptr, "checkpoint ", folder.string(), " has no unit '", spec.name,
               "', which config.json's model has");
    ZERO_CHECK(unit->num_elements == spec.num_elements(), "checkpoint ", folder.string(),
               ": unit '", spec.name, "' has ", unit->num_elements,
               " elements, config.json's model needs ", spec.num_elements());
  }
  const bool classifier = index.find_unit("score") != nullptr;
  checkpoint::UnitReader reader(folder, std::move(index));
  std::vector<float> values;  // one unit at a time
  const gpt2::UnitSource source = [&](int unit, const gpt2::UnitSink& sink) {
    const gpt2::UnitSpec& spec = specs[static_cast<std::size_t>(unit)];
    values.resize(spec.num_elements());
    reader.read(spec.name, "params", values);
    sink(values.data(), DType::kFloat32);
  };
  if (classifier) {
    const std::vector<float> score = reader.read("score");
    gpt2::save_classifier_checkpoint(config.body, config.head, source, score, out);
  } else {
    gpt2::save_hf_checkpoint(config.body, source, out);
  }
  const checkpoint::CheckpointIndex& read = reader.index();
  std::vector<std::string> copied;
  for (const char* name : {"tokenizer.json", "vocab.json", "merges.txt", "tokenizer_config.json",
                           "special_tokens_map.json"})
    if (fs::exists(folder / name)) {
      fs::copy_file(folder / name, out / name, fs::copy_options::overwrite_existing);
      copied.push_back(name);
    }
  std::cout << "wrote " << (out / "model.safetensors").string() << " + config.json ("
            << (classifier ? "GPT2ForSequenceClassification" : "GPT2LMHeadModel")
            << ", fp32 master weights of step " << read.training.global_steps << ", "
            << read.files.size() << " shard files of world " << read.world_size << ")";
  for (const std::string& name : copied)
    std::cout << (name == copied.front() ? "; " : ", ") << name;
  std::cout << "\n";
  return 0;
}

}  // namespace

int run_checkpoint(std::span<char* const> args) {
  po::options_description options("Options");
  options.add_options()("help,h", "print this help")("action", po::value<std::string>(),
                                                     "info or consolidate")(
      "dir", po::value<std::string>(),
      "a checkpoint-N folder, or an output_dir (its `latest`, else its newest checkpoint)")(
      "out", po::value<std::string>(), "consolidate: the folder to write")(
      "no_checksums", "info: check sizes and headers only (faster on large checkpoints)");
  po::positional_options_description positional;
  positional.add("action", 1).add("dir", 1).add("out", 1);
  const std::string summary =
      "zero checkpoint info DIR               describe a resumable checkpoint and validate it\n"
      "zero checkpoint consolidate DIR OUT    write OUT/model.safetensors + config.json (fp32)\n"
      "                                       from the ZeRO shards, as zero_to_fp32.py";
  for (char* const word : args)
    if (std::string(word) == "--help" || std::string(word) == "-h") {
      std::cout << usage("checkpoint", summary, options);
      return 0;
    }
  const auto variables = parse(args, options, &positional);
  if (!variables.count("action") || !variables.count("dir"))
    throw UsageError{"expected 'info DIR' or 'consolidate DIR OUT'"};
  const std::string action = variables["action"].as<std::string>();
  const fs::path dir = variables["dir"].as<std::string>();
  if (action == "info") {
    if (variables.count("out")) throw UsageError{"info takes one folder"};
    return run_info(dir, !variables.count("no_checksums"));
  }
  if (action == "consolidate") {
    if (!variables.count("out")) throw UsageError{"consolidate needs DIR and OUT"};
    return run_consolidate(dir, variables["out"].as<std::string>());
  }
  throw UsageError{"unknown action '" + action + "' (info or consolidate)"};
}

}  // namespace zero::cli
