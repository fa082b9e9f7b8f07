// `zero checkpoint info DIR` and `zero checkpoint consolidate DIR OUT`: a resumable checkpoint
// described and validated, or turned into a Hugging Face model (DeepSpeed's zero_to_fp32.py),
// without the world that wrote it.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"
#include "zero/checkpoint/zero_checkpoint.h"
#include "zero/core/error.h"
#include "zero/gpt2/consolidate.h"
#include "zero/train/cli.h"

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

int run_consolidate(const fs::path& given, const fs::path& out) {
  const gpt2::ConsolidateSummary summary = gpt2::consolidate_checkpoint(given, out);
  std::cout << "wrote " << summary.model.string() << " + config.json (" << summary.architecture
            << ", fp32 master weights of step " << summary.global_steps << ", " << summary.num_files
            << " shard files of world " << summary.world_size << ")";
  for (const std::string& name : summary.copied)
    std::cout << (name == summary.copied.front() ? "; " : ", ") << name;
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
  if (action != "info" && action != "consolidate")
    throw UsageError{"unknown action '" + action + "' (info or consolidate)"};
  if (action == "info" && variables.count("out")) throw UsageError{"info takes one folder"};
  if (action == "consolidate" && !variables.count("out"))
    throw UsageError{"consolidate needs DIR and OUT"};
  stop_if_parse_only();
  if (action == "info") return run_info(dir, !variables.count("no_checksums"));
  return run_consolidate(dir, variables["out"].as<std::string>());
}

}  // namespace zero::cli
