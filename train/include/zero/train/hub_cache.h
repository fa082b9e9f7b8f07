// Hugging Face Hub ids ("gpt2", "openai-community/gpt2") resolved offline through the local Hub
// cache, as huggingface_hub lays it out and transformers reads it with HF_HUB_OFFLINE=1:
// <cache>/models--<org>--<name>/refs/<revision> holds a commit hash, and
// <cache>/models--<org>--<name>/snapshots/<hash>/ the files. The cache folder is --cache_dir,
// else HF_HUB_CACHE, else HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub (huggingface_hub's order). The datasets cache beside it holds zero's
// token cache.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "zero/train/arguments.h"

namespace zero::train {

// The Hub cache folder for `cache_dir` (empty: not given) and `environment`.
std::filesystem::path hub_cache_folder(const std::string& cache_dir,
                                       const std::map<std::string, std::string>& environment);

// The datasets cache folder, where datasets keeps what load_dataset prepares (run_clm passes
// --cache_dir to load_dataset as to from_pretrained): `cache_dir` when given, else
// HF_DATASETS_CACHE, else hf_home_folder()/datasets. zero's token cache is its zero_tokens folder.
std::filesystem::path datasets_cache_folder(const std::string& cache_dir,
                                            const std::map<std::string, std::string>& environment);

// `name` when it is an existing folder; else the snapshot folder of the Hub id `name` at
// `revision` (a branch or tag under refs/, or a commit hash) in `cache`. "gpt2", "gpt2-medium",
// "gpt2-large", "gpt2-xl" and "openai-gpt" are also looked up under openai-community/, where the
// Hub moved them. Throws InputError naming `flag`, every path it tried and how to fetch the model
// elsewhere (`huggingface-cli download NAME`) when none is there.
// A dataset (repo_type "dataset") is looked up under datasets--<org>--<name> instead.
enum class RepoType { kModel, kDataset };
std::filesystem::path resolve_hub_folder(const std::string& flag, const std::string& name,
                                         const std::string& revision,
                                         const std::filesystem::path& cache,
                                         RepoType type = RepoType::kModel);

// --model_name_or_path, --tokenizer_name and --config_name resolved in place (those that are Hub
// ids), and --dataset_name that is not a folder: the folder datasets prepared in the datasets
// cache for it and --dataset_config_name (datasets_cache.h: as load_dataset reloads offline),
// else its dataset repo at main in the Hub cache; returns a start-log line for each
// ("--model_name_or_path gpt2: <snapshot folder>"). InputError, with the load_dataset command
// that prepares it, for a dataset in neither cache.
std::vector<std::string> resolve_hub_names(TrainingArguments& arguments,
                                           const std::map<std::string, std::string>& environment);

}  // namespace zero::train
