// Hub ids to snapshot folders in the local Hugging Face cache (zero/train/hub_cache.h).
#include "zero/train/hub_cache.h"

#include <pwd.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include "zero/train/datasets_cache.h"
#include "zero/train/input_error.h"

namespace zero::train {

namespace fs = std::filesystem;

namespace {

std::string value_of(const std::map<std::string, std::string>& environment,
                     const std::string& name) {
  const auto found = environment.find(name);
  return found == environment.end() ? "" : found->second;
}

// A Hub repo id: "name" or "org/name" of letters, digits, '-', '_', '.'.
bool is_hub_id(const std::string& name) {
  if (name.empty() || name.front() == '/' || name.front() == '.' || name.back() == '/')
    return false;
  int slashes = 0;
  for (char c : name) {
    if (c == '/') {
      ++slashes;
    } else if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return slashes <= 1 && name.find("..") == std::string::npos;
}

bool is_commit_hash(const std::string& revision) {
  return revision.size() == 40 &&
         revision.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// The repo ids to try for `name`: itself, and openai-community/<name> for the moved GPT models.
std::vector<std::string> candidates(const std::string& name, RepoType type) {
  std::vector<std::string> ids = {name};
  if (type == RepoType::kDataset) return ids;
  for (const char* moved : {"gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "openai-gpt"})
    if (name == moved) ids.push_back("openai-community/" + name);
  return ids;
}

std::string folder_name(const std::string& id, RepoType type) {
  std::string folder = (type == RepoType::kDataset ? "datasets--" : "models--") + id;
  for (std::size_t at = folder.find('/'); at != std::string::npos; at = folder.find('/'))
    folder.replace(at, 1, "--");
  return folder;
}

// Hugging Face's home folder: HF_HOME, else XDG_CACHE_HOME/huggingface, else
// ~/.cache/huggingface (huggingface_hub's and datasets' order; ~ as expanduser reads it: HOME,
// else the user's home in the password database).
fs::path hf_home_folder(const std::map<std::string, std::string>& environment) {
  if (const std::string home = value_of(environment, "HF_HOME"); !home.empty()) return home;
  if (const std::string xdg = value_of(environment, "XDG_CACHE_HOME"); !xdg.empty())
    return fs::path(xdg) / "huggingface";
  std::string home = value_of(environment, "HOME");
  if (home.empty())
    if (const struct passwd* user = ::getpwuid(::getuid()); user != nullptr && user->pw_dir)
      home = user->pw_dir;
  return fs::path(home) / ".cache" / "huggingface";
}

}  // namespace

fs::path hub_cache_folder(const std::string& cache_dir,
                          const std::map<std::string, std::string>& environment) {
  if (!cache_dir.empty()) return cache_dir;
  for (const char* name : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"})
    if (const std::string value = value_of(environment, name); !value.empty()) return value;
  return hf_home_folder(environment) / "hub";
}

fs::path datasets_cache_folder(const std::string& cache_dir,
                               const std::map<std::string, std::string>& environment) {
  if (!cache_dir.empty()) return cache_dir;
  if (const std::string value = value_of(environment, "HF_DATASETS_CACHE"); !value.empty())
    return value;
  return hf_home_folder(environment) / "datasets";
}

fs::path resolve_hub_folder(const std::string& flag, const std::string& name,
                            const std::string& revision, const fs::path& cache, RepoType type) {
  std::error_code error;
  if (fs::is_directory(name, error)) return name;
  if (!is_hub_id(name))
    throw InputError("--" + flag + " " + name + ": no such folder (and not a Hub id)");
  const std::string wanted = revision.empty() ? "main" : revision;
  std::vector<std::string> tried;
  for (const std::string& id : candidates(name, type)) {
    const fs::path repo = cache / folder_name(id, type);
    std::string commit = wanted;
    if (!is_commit_hash(wanted)) {
      const fs::path ref = repo / "refs" / wanted;
      std::ifstream in(ref);
      if (!(in >> commit)) {
        tried.push_back(ref.string());
        continue;
      }
    }
    const fs::path snapshot = repo / "snapshots" / commit;
    if (fs::is_directory(snapshot, error)) return snapshot;
    tried.push_back(snapshot.string());
  }
  std::ostringstream message;
  message << "--" << flag << " " << name << ": not a folder, and revision " << wanted
          << " is not in the Hugging Face cache (zero reads it offline); looked for:";
  for (const std::string& path : tried) message << "\n  " << path;
  message << "\nfetch it on a machine with network access with `huggingface-cli download "
          << candidates(name, type).back()
          << (type == RepoType::kDataset ? " --repo-type dataset" : "")
          << (wanted == "main" ? std::string() : " --revision " + wanted)
          << "` and copy the cache folder here (or set HF_HUB_CACHE / HF_HOME), or give a "
          << (type == RepoType::kDataset ? "folder of data files" : "checkpoint folder");
  throw InputError(message.str());
}

std::vector<std::string> resolve_hub_names(TrainingArguments& arguments,
                                           const std::map<std::string, std::string>& environment) {
  std::vector<std::string> lines;
  const fs::path cache = hub_cache_folder(arguments.cache_dir, environment);
  auto resolve = [&](const char* flag, std::string& value) {
    if (value.empty()) return;
    std::error_code error;
    if (fs::exists(value, error)) return;  // a folder (or --config_name's config.json)
    const fs::path folder = resolve_hub_folder(flag, value, arguments.model_revision, cache);
    lines.push_back("--" + std::string(flag) + " " + value + ": " + folder.string());
    value = folder.string();
  };
  resolve("model_name_or_path", arguments.model_name_or_path);
  resolve("tokenizer_name", arguments.tokenizer_name);
  resolve("config_name", arguments.config_name);
  if (!arguments.dataset_name.empty()) {
    std::error_code error;
    if (fs::is_directory(arguments.dataset_name, error)) return lines;
    const std::string& name = arguments.dataset_name;
    const std::string& config = arguments.dataset_config_name;
    // As datasets reloads it offline: the Arrow files load_dataset prepared, else the Hub cache.
    const fs::path datasets_cache = datasets_cache_folder(arguments.cache_dir, environment);
    if (!is_hub_id(name))
      throw InputError("--dataset_name " + name + ": no such folder (and not a Hub id)");
    if (const auto prepared = find_prepared_dataset(name, config, datasets_cache)) {
      lines.push_back("--dataset_name " + name + ": " + prepared->string() +
                      " (prepared by datasets)");
      arguments.dataset_name = prepared->string();
      return lines;
    }
    const fs::path repo = cache / folder_name(name, RepoType::kDataset);
    if (!fs::is_directory(repo, error))
      throw InputError(
          "--dataset_name " + name + ": not a folder, and neither the datasets cache (" +
          datasets_cache.string() + ") nor the Hub cache (" + repo.string() +
          ") holds it (zero reads them offline); have datasets prepare it where the network is, "
          "with the same HF_HOME / HF_DATASETS_CACHE: " +
          load_dataset_command(name, config, arguments.cache_dir) +
          " (or copy its folder in the datasets cache here), or give a folder of data files");
    const fs::path folder =
        resolve_hub_folder("dataset_name", name, "main", cache, RepoType::kDataset);
    lines.push_back("--dataset_name " + name + ": " + folder.string());
    arguments.dataset_name = folder.string();
  }
  return lines;
}

}  // namespace zero::train
