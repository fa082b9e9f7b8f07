// --dataset_name's folder read as datasets' load_dataset(folder) reads it (dataset_folder.h).
#include "zero/train/dataset_folder.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <string_view>
#include <system_error>

#include "zero/train/datasets_cache.h"
#include "zero/train/input_error.h"

namespace zero::train {

namespace fs = std::filesystem;

namespace {

// datasets' _EXTENSION_TO_MODULE for the tabular and text builders.
std::string module_of(const std::string& extension) {
  if (extension == ".txt") return "text";
  if (extension == ".json" || extension == ".jsonl") return "json";
  if (extension == ".csv") return "csv";
  if (extension == ".tsv") return "tsv";
  if (extension == ".parquet" || extension == ".geoparquet" || extension == ".gpq")
    return "parquet";
  if (extension == ".arrow") return "arrow";
  if (extension == ".tar") return "webdataset";
  return "";
}

bool is_separator(char c) {  // datasets' NON_WORDS_CHARS "-._ 0-9"
  return c == '-' || c == '.' || c == '_' || c == ' ' || (c >= '0' && c <= '9');
}

// Whether `keyword` is a word of the relative path `path`: after its start, a '/' or a separator,
// and before a separator (in the file name) or a '/' (a folder).
bool holds_keyword(std::string_view path, std::string_view keyword) {
  for (std::size_t at = path.find(keyword); at != std::string_view::npos;
       at = path.find(keyword, at + 1)) {
    const bool after = at == 0 || path[at - 1] == '/' || is_separator(path[at - 1]);
    const std::size_t end = at + keyword.size();
    if (!after || end >= path.size()) continue;
    if (path[end] == '/') return true;
    if (is_separator(path[end]) && path.find('/', end) == std::string_view::npos) return true;
  }
  return false;
}

int split_of(const std::string& relative) {  // 0 train, 1 validation, 2 test, -1 none
  static const std::vector<std::vector<std::string_view>> kKeywords = {
      {"train", "training"},
      {"validation", "valid", "dev", "val"},
      {"test", "testing", "eval", "evaluation"}};
  std::string lower = relative;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (std::size_t split = 0; split < kKeywords.size(); ++split)
    for (std::string_view keyword : kKeywords[split])
      if (holds_keyword(lower, keyword)) return static_cast<int>(split);
  return -1;
}

bool hidden(const fs::path& relative) {
  for (const fs::path& part : relative) {
    const std::string name = part.string();
    if (name.starts_with(".") || name.starts_with("__")) return true;
  }
  return false;
}

std::string lower_extension(const fs::path& path) {
  std::string extension = path.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension;
}

// The Hub id of a Hub-cache snapshot folder (<cache>/datasets--<org>--<name>/snapshots/<hash>),
// else empty.
std::string hub_id_of(const fs::path& folder) {
  const fs::path snapshots = folder.lexically_normal().parent_path();
  const std::string repo = snapshots.parent_path().filename().string();
  if (snapshots.filename() != "snapshots" || !repo.starts_with("datasets--")) return "";
  std::string id = repo.substr(std::string("datasets--").size());
  if (const std::size_t at = id.find("--"); at != std::string::npos) id.replace(at, 2, "/");
  return id;
}

[[noreturn]] void refuse_format(const std::string& name, const fs::path& folder,
                                const std::string& module, const std::string& config_name,
                                const std::string& cache_dir) {
  const std::string id = hub_id_of(folder);
  std::ostringstream message;
  message << "--dataset_name " << (id.empty() ? name : id) << ": its data files are " << module
          << ", which zero does not read (it reads text, JSON Lines, CSV and Arrow files); ";
  if (!id.empty()) {
    // A Hub dataset: datasets prepares it as Arrow files in its cache, which zero then reads.
    message << "have datasets prepare it where the network is, with the same HF_HOME / "
               "HF_DATASETS_CACHE: "
            << load_dataset_command(id, config_name, cache_dir)
            << " and run this zero command again: it reads the Arrow files datasets leaves in "
               "its cache";
  } else {
    message << "export it to JSON Lines where `datasets` is installed: python -c \"from datasets "
               "import load_dataset; d = load_dataset('"
            << folder.string() << "'" << (config_name.empty() ? "" : ", '" + config_name + "'")
            << "); [d[s].to_json(s + '.jsonl') for s in d]\" and give the folder of those files "
               "(or --train_file train.jsonl --validation_file validation.jsonl)";
  }
  throw InputError(message.str());
}

}  // namespace

DatasetSplits dataset_splits(const std::string& name, const fs::path& folder,
                             const std::string& config_name, const std::string& cache_dir) {
  if (is_prepared_dataset(folder)) return prepared_dataset_splits(name, folder, config_name);
  fs::path root = folder;
  std::error_code error;
  if (!config_name.empty()) {
    root = folder / config_name;
    if (!fs::is_directory(root, error)) {
      std::string configs;
      for (const fs::directory_entry& entry : fs::directory_iterator(folder, error))
        if (entry.is_directory() && !hidden(entry.path().filename()))
          configs += (configs.empty() ? "" : ", ") + entry.path().filename().string();
      throw InputError("--dataset_config_name " + config_name + ": " + name +
                       " has no such configuration (no folder " + root.string() + "; its " +
                       "folders: " + (configs.empty() ? "none" : configs) + ")");
    }
  }
  std::vector<fs::path> files;
  std::map<std::string, int> counts;  // by builder
  for (auto it = fs::recursive_directory_iterator(root, error);
       it != fs::recursive_directory_iterator(); it.increment(error)) {
    const fs::path relative = fs::relative(it->path(), root, error);
    if (hidden(relative)) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(error) && !(it->is_symlink() && fs::is_regular_file(it->path())))
      continue;
    const std::string module = module_of(lower_extension(it->path()));
    if (module.empty()) continue;  // README.md, metadata, ...
    ++counts[module];
    files.push_back(relative);
  }
  if (error) throw InputError("--dataset_name " + name + ": cannot read " + root.string());
  if (counts.empty())
    throw InputError("--dataset_name " + name + ": " + root.string() +
                     " holds no data file (.txt, .json, .jsonl, .csv or .arrow)");
  const auto most = std::max_element(counts.begin(), counts.end(),
                                     [](auto& a, auto& b) { return a.second < b.second; });
  DatasetSplits splits;
  splits.format = most->first;
  if (splits.format != "text" && splits.format != "json" && splits.format != "csv" &&
      splits.format != "arrow")
    refuse_format(name, folder, splits.format, config_name, cache_dir);
  std::sort(files.begin(), files.end());
  bool any_split = false;
  for (const fs::path& file : files)
    if (module_of(lower_extension(file)) == splits.format && split_of(file.generic_string()) >= 0)
      any_split = true;
  for (const fs::path& file : files) {
    if (module_of(lower_extension(file)) != splits.format) continue;
    const int split = any_split ? split_of(file.generic_string()) : 0;
    std::vector<std::string>* into = split == 0   ? &splits.train
                                     : split == 1 ? &splits.validation
                                     : split == 2 ? &splits.test
                                                  : nullptr;
    if (into != nullptr) into->push_back((root / file).string());
  }
  return splits;
}

}  // namespace zero::train
