// run_clm's --dataset_name NAME --dataset_config_name CONFIG as HF datasets reloads it offline:
// from the Arrow files load_dataset left in its cache,
// <cache>/<NAME, "/" as "___">/<CONFIG>/<version>/<hash>/<name>-<split>[-NNNNN-of-NNNNN].arrow
// beside dataset_info.json (datasets 2.14+'s layout; datasets/packaged_modules/cache/cache.py).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "zero/train/dataset_folder.h"

namespace zero::train {

// The prepared folder (<hash>) of dataset `name` in the datasets cache `cache` as
// datasets' _find_hash_in_cache chooses it: among <name folder>/<config>/<version>/<hash>/ whose
// dataset_info.json names the config folder as its config_name (only `config_name`'s folder when
// given), the most recently modified. A folder still being written (<hash>.incomplete, or no
// dataset_info.json yet) is passed over. Without `config_name`, when the folders of that version
// and hash hold several configurations, throws InputError naming them (datasets: "multiple
// configurations in the cache"). nullopt when `cache` has no folder for `name`; InputError when
// it has one but not `config_name` (naming the configurations there).
std::optional<std::filesystem::path> find_prepared_dataset(const std::string& name,
                                                           const std::string& config_name,
                                                           const std::filesystem::path& cache);

// Whether `folder` is one load_dataset prepared: a dataset_info.json beside .arrow files.
bool is_prepared_dataset(const std::filesystem::path& folder);

// The Arrow files of a prepared folder by split (format "arrow"), as datasets' cache builder
// names them from dataset_info.json: <dataset_name>-<split>.arrow, or one file per entry of the
// split's shard_lengths (-00000-of-0000N); splits other than train, validation and test are left
// out (run_clm reads only those). Throws InputError naming `name` for a config_name that is not
// the folder's, or a dataset_info.json or file that is missing or unreadable.
DatasetSplits prepared_dataset_splits(const std::string& name, const std::filesystem::path& folder,
                                      const std::string& config_name);

// The command that makes datasets prepare `name` (and `config_name`, `cache_dir` when given) in
// its cache, where the network is: python -c "import datasets; datasets.load_dataset(...)".
std::string load_dataset_command(const std::string& name, const std::string& config_name,
                                 const std::string& cache_dir);

}  // namespace zero::train
