// Which checkpoint a run resumes from (resume_folder.h).
#include "prepare/resume_folder.h"

#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "config/input_checks.h"
#include "zero/checkpoint/zero_checkpoint.h"
#include "zero/core/error.h"

namespace zero::train::detail {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// `path`, or the checkpoint its `latest` names, when it was saved with --save_only_model.
void refuse_model_only_at(const fs::path& path) {
  fs::path folder = path;
  if (std::ifstream latest(path / "latest"); latest) {
    std::string tag;
    std::getline(latest, tag);
    while (!tag.empty() && std::isspace(static_cast<unsigned char>(tag.back()))) tag.pop_back();
    folder = path / tag;
  }
  std::ifstream stream(folder / kTrainerStateFile);
  if (!stream.good()) return;
  const json state = json::parse(stream, nullptr, false);
  if (state.is_object() && state.value("save_only_model", false)) refuse_model_only(folder);
}

bool holds_checkpoint(const fs::path& output_dir) {
  try {
    checkpoint::resolve(output_dir);
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

void refuse_model_only(const fs::path& folder) {
  input_error("--resume_from_checkpoint ", folder.string(),
              ": saved with --save_only_model, it holds the model only (no optimizer, scheduler or "
              "RNG state), so training can't resume from it (as in Hugging Face); start a new run "
              "from its weights with --model_name_or_path ",
              folder.string());
}

std::optional<fs::path> resume_folder(const TrainingArguments& arguments) {
  const std::string& given = arguments.resume_from_checkpoint;
  const fs::path output_dir = arguments.output_dir;
  if (given.empty()) {
    // run_clm: an output_dir that is not empty, training, not overwritten: resume from its last
    // checkpoint when it has one (prepare() refuses the output_dir otherwise).
    if (!arguments.do_train || arguments.overwrite_output_dir || !fs::is_directory(output_dir) ||
        fs::is_empty(output_dir) || !holds_checkpoint(output_dir))
      return std::nullopt;
    return checkpoint::resolve(output_dir);
  }
  const fs::path path =
      given == "latest" || given == "True" || given == "true" ? output_dir : fs::path(given);
  refuse_model_only_at(path);
  try {
    return checkpoint::resolve(path);
  } catch (const Error& error) {
    input_error("--resume_from_checkpoint ", given, ": ", error.what());
  }
}

}  // namespace zero::train::detail
