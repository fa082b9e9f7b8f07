// Sequence classifiers' checkpoints (GPT2ForSequenceClassification, LlamaForSequenceClassification,
// ...): config.json with the label maps, safetensors with the body's Hugging Face names and
// score.weight; an LM checkpoint loads as the body alone.
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "zero/checkpoint/safetensors.h"
#include "zero/core/error.h"
#include "zero/gpt2/classifier.h"
#include "zero/gpt2/family.h"
#include "zero/gpt2/hf_weights.h"

namespace zero::gpt2 {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const fs::path& path) {
  std::ifstream stream(path);
  ZERO_CHECK(stream.good(), "cannot read ", path.string());
  try {
    return nlohmann::json::parse(stream);
  } catch (const nlohmann::json::exception& error) {
    ZERO_THROW(path.string(), " is not valid JSON: ", error.what());
  }
}

// The classifier's body has no LM head (classifier_body): its units are what the checkpoint holds.
void check_body(const GPT2Config& config) {
  ZERO_CHECK(config.tie_word_embeddings, "classifier: the body has an untied LM head ",
             "(lm_head.weight), which ", family_spec(config.family).classifier_architecture,
             " does not have; make the body's config with classifier_body()");
}

}  // namespace

ClassifierCheckpoint load_classifier_config(const fs::path& folder) {
  const fs::path path = folder / "config.json";
  ClassifierCheckpoint checkpoint;
  checkpoint.body = GPT2Config::load(path);
  const nlohmann::json json = read_json(path);
  ClassifierConfig& head = checkpoint.head;
  head.pad_token_id = kNoPadToken;
  if (json.contains("pad_token_id") && !json["pad_token_id"].is_null()) {
    ZERO_CHECK(json["pad_token_id"].is_number_integer(), path.string(),
               ": pad_token_id must be an integer");
    head.pad_token_id = json["pad_token_id"].get<std::int64_t>();
  }
  if (json.contains("problem_type") && !json["problem_type"].is_null()) {
    const auto& value = json["problem_type"];
    head.problem_type =
        value.is_string() ? problem_type_named(value.get<std::string>()) : std::nullopt;
    ZERO_CHECK(head.problem_type, path.string(), ": problem_type ", value.dump(),
               " is not regression, single_label_classification or multi_label_classification");
  }
  if (json.contains("id2label") && json["id2label"].is_object()) {
    const auto& id2label = json["id2label"];
    head.num_labels = static_cast<std::int64_t>(id2label.size());
    head.id2label.assign(id2label.size(), "");
    for (const auto& [key, name] : id2label.items()) {
      std::size_t used = 0;
      long long id = -1;
      try {
        id = std::stoll(key, &used);
      } catch (const std::exception&) {
      }
      ZERO_CHECK(used == key.size() && id >= 0 && id < head.num_labels && name.is_string(),
                 path.string(), ": id2label entry '", key, "' is not an id in [0, ",
                 head.num_labels, ") with a name");
      head.id2label[static_cast<std::size_t>(id)] = name.get<std::string>();
    }
    if (json.contains("num_labels"))
      ZERO_CHECK(json["num_labels"] == head.num_labels, path.string(), ": num_labels ",
                 json["num_labels"].dump(), " but id2label has ", head.num_labels, " entries");
    const auto& architectures = json.value("architectures", nlohmann::json::array());
    const std::string classifier(family_spec(checkpoint.body.family).classifier_architecture);
    checkpoint.has_score =
        std::find(architectures.begin(), architectures.end(), classifier) != architectures.end();
  } else {
    if (json.contains("num_labels") && json["num_labels"].is_number_integer())
      head.num_labels = json["num_labels"].get<std::int64_t>();
    for (std::int64_t k = 0; k < head.num_labels; ++k)
      head.id2label.push_back("LABEL_" + std::to_string(k));
  }
  return checkpoint;
}

bool load_classifier_weights(GPT2Model& body, std::span<float> score, std::int64_t num_labels,
                             const fs::path& folder) {
  const GPT2Config& config = body.config();
  check_body(config);
  ZERO_CHECK(static_cast<std::int64_t>(score.size()) == num_labels * config.n_embd,
             "classifier: score buffer of ", score.size(), " elements for (", num_labels, ", ",
             config.n_embd, ")");
  const HFWeights weights(folder, config, {{kScoreTensorName, {num_labels, config.n_embd}}});
  for (int u = 0; u < body.num_units(); ++u) {
    const FlatLayout& layout = body.params(u).layout();
    weights.read_unit(body.units()[u], layout, {0, layout.num_elements()}, body.param_data(u));
  }
  if (!weights.contains(kScoreTensorName)) return false;
  weights.read(kScoreTensorName, {0, score.size()}, score.data());
  return true;
}

void save_classifier_checkpoint(const GPT2Model& body, const ClassifierConfig& head,
                                std::span<const float> score, const fs::path& folder) {
  save_classifier_checkpoint(
      body.config(), head,
      [&body](int unit, const UnitSink& sink) { sink(body.param_data(unit), DType::kFloat32); },
      score, folder);
}

void save_classifier_checkpoint(const GPT2Config& config, const ClassifierConfig& head,
                                const UnitSource& source, std::span<const float> score,
                                const fs::path& folder, SaveOptions options) {
  head.validate(config);
  check_body(config);
  ZERO_CHECK(static_cast<std::int64_t>(score.size()) == head.num_labels * config.n_embd,
             "classifier: score of ", score.size(), " elements for (", head.num_labels, ", ",
             config.n_embd, ")");
  fs::create_directories(folder);
  nlohmann::ordered_json json =
      nlohmann::ordered_json::parse(hf_config_text(config, options.dtype));
  json["architectures"] = {family_spec(config.family).classifier_architecture};
  nlohmann::ordered_json id2label = nlohmann::ordered_json::object();
  nlohmann::ordered_json label2id = nlohmann::ordered_json::object();
  for (std::int64_t k = 0; k < head.num_labels; ++k) {
    const std::string name = head.id2label.empty() ? "LABEL_" + std::to_string(k)
                                                   : head.id2label[static_cast<std::size_t>(k)];
    id2label[std::to_string(k)] = name;
    label2id[name] = k;
  }
  json["num_labels"] = head.num_labels;
  json["id2label"] = id2label;
  json["label2id"] = label2id;
  if (head.pad_token_id == kNoPadToken)
    json["pad_token_id"] = nullptr;
  else
    json["pad_token_id"] = head.pad_token_id;
  if (head.problem_type)
    json["problem_type"] = name_of(*head.problem_type);
  else
    json["problem_type"] = nullptr;
  {
    std::ofstream stream(folder / "config.json", std::ios::trunc);
    stream << json.dump(2) << "\n";
    ZERO_CHECK(stream.good(), "writing ", (folder / "config.json").string(), " failed");
  }
  const ExtraTensor score_tensor{kScoreTensorName, {head.num_labels, config.n_embd}, score};
  write_hf_weights(config, source, std::span(&score_tensor, 1), folder, options);
}

}  // namespace zero::gpt2
