// The consolidation of ZeRO shards into a Hugging Face model, one unit at a time.
#include "zero/gpt2/consolidate.h"

#include "zero/checkpoint/zero_checkpoint.h"
#include "zero/core/error.h"
#include "zero/gpt2/checkpoint_hf.h"
#include "zero/gpt2/classifier.h"
#include "zero/gpt2/family.h"
#include "zero/gpt2/units.h"

namespace zero::gpt2 {

namespace fs = std::filesystem;

ConsolidateSummary consolidate_checkpoint(const fs::path& given, const fs::path& out) {
  const fs::path folder = checkpoint::resolve(given);
  checkpoint::CheckpointIndex index = checkpoint::read_index(folder);
  checkpoint::check_complete(folder, index);
  const ClassifierCheckpoint config = load_classifier_config(folder);
  const bool classifier = index.find_unit(kScoreUnitName) != nullptr;
  // A classifier's units have no LM head (classifier_body); an LM's are config.json's.
  const GPT2Config body = classifier ? classifier_body(config.body) : config.body;
  const std::vector<UnitSpec> specs = gpt2_units(body);
  for (const UnitSpec& spec : specs) {  // every unit checked before anything is written
    const checkpoint::UnitInfo* unit = index.find_unit(spec.name);
    ZERO_CHECK(unit != nullptr, "checkpoint ", folder.string(), " has no unit '", spec.name,
               "', which config.json's model has");
    ZERO_CHECK(unit->num_elements == spec.num_elements(), "checkpoint ", folder.string(),
               ": unit '", spec.name, "' has ", unit->num_elements,
               " elements, config.json's model needs ", spec.num_elements());
  }
  ConsolidateSummary summary;
  summary.checkpoint = folder;
  summary.classifier = classifier;
  const FamilySpec& family = family_spec(config.body.family);
  summary.architecture = classifier ? family.classifier_architecture : family.architecture;
  checkpoint::UnitReader reader(folder, std::move(index));
  std::vector<float> values;  // one unit at a time
  const UnitSource source = [&](int unit, const UnitSink& sink) {
    const UnitSpec& spec = specs[static_cast<std::size_t>(unit)];
    values.resize(spec.num_elements());
    reader.read(spec.name, "params", values);
    sink(values.data(), DType::kFloat32);
  };
  if (summary.classifier) {
    const std::vector<float> score = reader.read("score");
    save_classifier_checkpoint(body, config.head, source, score, out);
  } else {
    save_hf_checkpoint(body, source, out);
  }
  summary.model = fs::exists(out / "model.safetensors.index.json")
                      ? out / "model.safetensors.index.json"
                      : out / "model.safetensors";
  const checkpoint::CheckpointIndex& read = reader.index();
  summary.global_steps = read.training.global_steps;
  summary.num_files = read.files.size();
  summary.world_size = read.world_size;
  for (const char* name : {"tokenizer.json", "vocab.json", "merges.txt", "tokenizer_config.json",
                           "special_tokens_map.json"})
    if (fs::exists(folder / name)) {
      fs::copy_file(folder / name, out / name, fs::copy_options::overwrite_existing);
      summary.copied.push_back(name);
    }
  return summary;
}

}  // namespace zero::gpt2
