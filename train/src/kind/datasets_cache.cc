// Datasets prepared by HF datasets, found in its cache as its offline load_dataset finds them
// (zero/train/datasets_cache.h).
#include "zero/train/datasets_cache.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <system_error>
#include <vector>

#include "zero/train/input_error.h"

namespace zero::train {

namespace fs = std::filesystem;

namespace {

// datasets.naming.camelcase_to_snakecase.
std::string camelcase_to_snakecase(const std::string& name) {
  static const std::regex kUpperUpper("([A-Z]+)([A-Z][a-z])");
  static const std::regex kLowerUpper("([a-z\\d])([A-Z])");
  std::string snake = std::regex_replace(name, kUpperUpper, "$1_$2");
  snake = std::regex_replace(snake, kLowerUpper, "$1_$2");
  std::transform(snake.begin(), snake.end(), snake.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return snake;
}

// "org/Name" -> "org___name": the dataset's folder in the cache (namespace kept, name in snake
// case, as _find_hash_in_cache and DatasetBuilder._relative_data_dir spell it).
std::string cached_relative_path(const std::string& name) {
  const std::size_t slash = name.rfind('/');
  if (slash == std::string::npos) return camelcase_to_snakecase(name);
  return name.substr(0, slash) + "___" + camelcase_to_snakecase(name.substr(slash + 1));
}

nlohmann::json read_info(const std::string& name, const fs::path& folder) {
  const fs::path path = folder / "dataset_info.json";
  std::ifstream in(path);
  if (!in) throw InputError("--dataset_name " + name + ": cannot read " + path.string());
  try {
    nlohmann::json info = nlohmann::json::parse(in);
    if (!info.is_object()) throw InputError("not a JSON object");
    return info;
  } catch (const std::exception& error) {
    throw InputError("--dataset_name " + name + ": " + path.string() +
                     " is not datasets' dataset_info.json: " + error.what());
  }
}

std::string config_of(const nlohmann::json& info) {
  const auto found = info.find("config_name");
  return found != info.end() && found->is_string() ? found->get<std::string>() : "";
}

struct Prepared {
  fs::path folder;  // <config>/<version>/<hash>
  fs::file_time_type modified;
};

std::string joined(const std::set<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text.empty() ? "none" : text;
}

std::vector<fs::path> subfolders(const fs::path& folder) {
  std::vector<fs::path> folders;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, error))
    if (entry.is_directory(error)) folders.push_back(entry.path());
  std::sort(folders.begin(), folders.end());
  return folders;
}

}  // namespace

bool is_prepared_dataset(const fs::path& folder) {
  std::error_code error;
  if (!fs::is_regular_file(folder / "dataset_info.json", error)) return false;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, error))
    if (entry.path().extension() == ".arrow") return true;
  return false;
}

std::optional<fs::path> find_prepared_dataset(const std::string& name,
                                              const std::string& config_name,
                                              const fs::path& cache) {
  const fs::path root = cache / cached_relative_path(name);
  std::error_code error;
  if (!fs::is_directory(root, error)) return std::nullopt;
  std::vector<Prepared> prepared;
  std::set<std::string> configs;  // every configuration folder prepared, for the messages
  for (const fs::path& config : subfolders(root))
    for (const fs::path& version : subfolders(config))
      for (const fs::path& hash : subfolders(version)) {
        if (hash.filename().string().ends_with(".incomplete") ||
            !fs::is_regular_file(hash / "dataset_info.json", error))
          continue;  // still being written (or abandoned): datasets renames it when done
        if (config_of(read_info(name, hash)) != config.filename().string()) continue;
        configs.insert(config.filename().string());
        if (config_name.empty() || config.filename() == config_name)
          prepared.push_back({hash, fs::last_write_time(hash, error)});
      }
  if (prepared.empty())
    throw InputError("--dataset_name " + name +
                     (config_name.empty() ? "" : " --dataset_config_name " + config_name) +
                     ": the datasets cache folder " + root.string() + " holds no prepared " +
                     (config_name.empty() ? "configuration" : "configuration " + config_name) +
                     " (configurations prepared there: " + joined(configs) + "); prepare it with " +
                     load_dataset_command(name, config_name, ""));
  const Prepared newest = *std::max_element(
      prepared.begin(), prepared.end(),
      [](const Prepared& a, const Prepared& b) { return a.modified < b.modified; });
  if (config_name.empty()) {
    std::set<std::string> same;  // the configurations of the newest one's version and hash
    for (const Prepared& other : prepared)
      if (other.folder.filename() == newest.folder.filename() &&
          other.folder.parent_path().filename() == newest.folder.parent_path().filename())
        same.insert(other.folder.parent_path().parent_path().filename().string());
    if (same.size() > 1)
      throw InputError("--dataset_name " + name + ": the datasets cache holds several of its " +
                       "configurations (" + joined(same) + "); give --dataset_config_name " +
                       *same.begin() + " (or another), as load_dataset needs it");
  }
  return newest.folder;
}

DatasetSplits prepared_dataset_splits(const std::string& name, const fs::path& folder,
                                      const std::string& config_name) {
  const nlohmann::json info = read_info(name, folder);
  const std::string config = config_of(info);
  if (!config_name.empty() && config_name != config)
    throw InputError("--dataset_config_name " + config_name + ": " + folder.string() +
                     " holds configuration " + (config.empty() ? "(none)" : config) + " of " +
                     name);
  const auto dataset_name = info.find("dataset_name");
  const auto splits = info.find("splits");
  if (dataset_name == info.end() || !dataset_name->is_string() || splits == info.end() ||
      !splits->is_object())
    throw InputError("--dataset_name " + name + ": " + (folder / "dataset_info.json").string() +
                     " has no dataset_name or splits (datasets 2.14 or later writes both)");
  const std::string prefix = camelcase_to_snakecase(dataset_name->get<std::string>());
  DatasetSplits result;
  result.format = "arrow";
  for (const auto& [split, split_info] : splits->items()) {
    std::vector<std::string>* into = split == "train"        ? &result.train
                                     : split == "validation" ? &result.validation
                                     : split == "test"       ? &result.test
                                                             : nullptr;
    if (into == nullptr) continue;
    const fs::path stem = folder / (prefix + "-" + split);
    const auto shards =
        split_info.is_object() ? split_info.find("shard_lengths") : split_info.end();
    if (shards != split_info.end() && shards->is_array() && !shards->empty()) {
      for (std::size_t shard = 0; shard < shards->size(); ++shard) {
        char suffix[64];
        std::snprintf(suffix, sizeof suffix, "-%05zu-of-%05zu.arrow", shard, shards->size());
        into->push_back(stem.string() + suffix);
      }
    } else {
      into->push_back(stem.string() + ".arrow");
    }
    std::error_code error;
    for (const std::string& file : *into)
      if (!fs::is_regular_file(file, error))
        throw InputError("--dataset_name " + name + ": " + file + ", of split " + split +
                         " in dataset_info.json, is missing");
  }
  if (result.train.empty() && result.validation.empty() && result.test.empty())
    throw InputError("--dataset_name " + name + ": " + folder.string() +
                     " has no train, validation or test split");
  return result;
}

std::string load_dataset_command(const std::string& name, const std::string& config_name,
                                 const std::string& cache_dir) {
  // A Python string literal, then escaped for the shell's double quotes.
  const auto literal = [](const std::string& text) {
    std::string python = "'";
    for (char c : text) {
      if (c == '\\' || c == '\'') python += '\\';
      python += c;
    }
    python += "'";
    std::string shell;
    for (char c : python) {
      if (c == '"' || c == '$' || c == '`' || c == '\\') shell += '\\';
      shell += c;
    }
    return shell;
  };
  std::string arguments = literal(name);
  if (!config_name.empty()) arguments += ", " + literal(config_name);
  if (!cache_dir.empty()) arguments += ", cache_dir=" + literal(cache_dir);
  return "python -c \"import datasets; datasets.load_dataset(" + arguments + ")\"";
}

}  // namespace zero::train
