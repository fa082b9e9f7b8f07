// GPT2ForSequenceClassification checkpoints: config.json with the label maps, safetensors with
// the "transformer." body and score.weight; an LM checkpoint loads as the body alone.
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "zero/checkpoint/safetensors.h"
#include "zero/core/error.h"
#include "zero/gpt2/classifier.h"

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

std::vector<fs::path> weight_files(const fs::path& folder) {
  const fs::path index = folder / "model.safetensors.index.json";
  if (!fs::exists(index)) {
    ZERO_CHECK(fs::exists(folder / "model.safetensors"), "no model.safetensors or ",
               "model.safetensors.index.json in ", folder.string());
    return {folder / "model.safetensors"};
  }
  const nlohmann::json json = read_json(index);
  ZERO_CHECK(json.contains("weight_map") && json["weight_map"].is_object(), index.string(),
             " has no weight_map object");
  std::set<std::string> files;
  for (const auto& [name, file] : json["weight_map"].items()) {
    ZERO_CHECK(file.is_string() && file.get<std::string>().find('/') == std::string::npos,
               index.string(), ": weight_map entry '", name, "' is not a plain file name");
    files.insert(file.get<std::string>());
  }
  std::vector<fs::path> paths;
  for (const std::string& file : files) paths.push_back(folder / file);
  return paths;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::ostringstream text;
  text << "(";
  for (std::size_t i = 0; i < shape.size(); ++i) text << (i ? ", " : "") << shape[i];
  text << ")";
  return text.str();
}

}  // namespace

ClassifierCheckpoint load_classifier_config(const fs::path& folder) {
  const fs::path path = folder / "config.json";
  ClassifierCheckpoint checkpoint;
  checkpoint.body = GPT2Config::load(path);
  const nlohmann::json json = read_json(path);
  ClassifierConfig& head = checkpoint.head;
  head.pad_token_id = checkpoint.body.eos_token_id;
  if (json.contains("pad_token_id") && !json["pad_token_id"].is_null()) {
    ZERO_CHECK(json["pad_token_id"].is_number_integer(), path.string(),
               ": pad_token_id must be an integer");
    head.pad_token_id = json["pad_token_id"].get<std::int64_t>();
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
    checkpoint.has_score = std::find(architectures.begin(), architectures.end(),
                                     "GPT2ForSequenceClassification") != architectures.end();
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
  struct Place {
    float* data;
    std::size_t capacity;
    std::vector<std::int64_t> shape;
  };
  std::map<std::string, Place> places;
  for (int u = 0; u < body.num_units(); ++u)
    for (const TensorSlot& slot : body.params(u).layout().slots()) {
      std::vector<std::int64_t> shape = slot.shape;
      if (slot.name == "wte.weight") shape[0] = config.vocab_size;
      places[hf_tensor_name(body.units()[u], slot.name)] = {
          body.param_data(u) + slot.offset_elements, slot.num_elements, shape};
    }
  ZERO_CHECK(static_cast<std::int64_t>(score.size()) == num_labels * config.n_embd,
             "classifier: score buffer of ", score.size(), " elements for (", num_labels, ", ",
             config.n_embd, ")");
  places[kScoreTensorName] = {score.data(), score.size(), {num_labels, config.n_embd}};
  std::set<std::string> loaded;
  for (const fs::path& file : weight_files(folder)) {
    const SafetensorsReader reader(file);
    for (const SafetensorsTensor& tensor : reader.tensors()) {
      const std::string& stored = tensor.name;
      if (stored == "lm_head.weight" || stored.ends_with(".attn.bias") ||
          stored.ends_with(".attn.masked_bias"))
        continue;
      const std::string name = stored == kScoreTensorName || stored.starts_with("transformer.")
                                   ? stored
                                   : "transformer." + stored;
      const auto place = places.find(name);
      ZERO_CHECK(place != places.end(), file.string(), ": unexpected tensor '", stored,
                 "' for a GPT-2 classifier of ", config.n_layer, " layers");
      ZERO_CHECK(tensor.shape == place->second.shape, file.string(), ": tensor '", stored,
                 "' has shape ", shape_text(tensor.shape), ", the config needs ",
                 shape_text(place->second.shape));
      ZERO_CHECK(loaded.insert(name).second, "tensor '", stored, "' appears twice in ",
                 folder.string());
      reader.read_float(stored, place->second.data);
      std::fill(place->second.data + tensor.num_elements(),
                place->second.data + place->second.capacity, 0.0f);
    }
  }
  for (const auto& [name, place] : places)
    ZERO_CHECK(name == kScoreTensorName || loaded.contains(name), "checkpoint ", folder.string(),
               " lacks tensor '", name, "'");
  return loaded.contains(kScoreTensorName);
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
                                const fs::path& folder) {
  head.validate(config);
  ZERO_CHECK(static_cast<std::int64_t>(score.size()) == head.num_labels * config.n_embd,
             "classifier: score of ", score.size(), " elements for (", head.num_labels, ", ",
             config.n_embd, ")");
  fs::create_directories(folder);
  nlohmann::ordered_json json = nlohmann::ordered_json::parse(config.to_json_text());
  json["architectures"] = {"GPT2ForSequenceClassification"};
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
  json["pad_token_id"] = head.pad_token_id;
  json["problem_type"] = "single_label_classification";
  {
    std::ofstream stream(folder / "config.json", std::ios::trunc);
    stream << json.dump(2) << "\n";
    ZERO_CHECK(stream.good(), "writing ", (folder / "config.json").string(), " failed");
  }
  const ExtraTensor score_tensor{kScoreTensorName, {head.num_labels, config.n_embd}, score};
  write_hf_weights(config, source, std::span(&score_tensor, 1), folder);
}

}  // namespace zero::gpt2
