// run_clm's --dataset_name without the network: a local folder of data files, read as
// `datasets.load_dataset(folder)` reads it (the builder from the files' extensions, the splits
// from their names), or a dataset in the local Hugging Face Hub cache stored in those formats
// (hub_cache.h resolves datasets--<org>--<name> to its snapshot folder), or a folder datasets
// prepared in its own cache (datasets_cache.h).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace zero::train {

// The data files of a dataset folder by split, and the builder they were read as.
struct DatasetSplits {
  std::string format;  // "text", "json", "csv" or "arrow"
  std::vector<std::string> train, validation, test;
};

// The files of `folder` (or of its subfolder `config_name`, the layout of a Hub dataset's
// configs, when not empty), as datasets' data_files inference finds them: every file but hidden
// ones ("." or "__" names) and README/metadata files; the builder is the most common data file
// extension (.txt: text; .json/.jsonl: json; .csv: csv; .arrow: arrow, IPC streams) and only its
// files are kept; a file belongs to the split whose keyword (train/training;
// validation/valid/dev/val; test/testing/eval/evaluation) its relative path holds between
// separators ("-._ 0-9" or "/"), and with no keyword anywhere every file is train. A folder
// datasets prepared (is_prepared_dataset) gives its splits by its dataset_info.json instead
// (prepared_dataset_splits). Throws InputError naming `name` for a folder without data files, a
// missing config subfolder, or a format zero does not read (parquet, tsv, ...): for a Hub-cache
// snapshot the message gives the load_dataset command (with `config_name` and `cache_dir`, the
// run's --cache_dir) that prepares it as Arrow files zero reads, else the `datasets` one-liner
// that exports it to JSON Lines.
DatasetSplits dataset_splits(const std::string& name, const std::filesystem::path& folder,
                             const std::string& config_name, const std::string& cache_dir = "");

}  // namespace zero::train
