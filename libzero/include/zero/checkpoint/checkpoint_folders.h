// The checkpoint folders under a root (an output_dir): which one a path or `latest` names, and
// which ones rotation removes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace zero::checkpoint {

// `path` resolved to one checkpoint folder: a folder holding zero_checkpoint.json as it is; a
// folder holding `latest` → the tag it names; else (an output_dir without `latest`) the
// `checkpoint-N` with the largest N that holds zero_checkpoint.json. Throws naming `path` when
// none is found.
std::filesystem::path resolve(const std::filesystem::path& path);

// Rank 0's housekeeping after a commit, in `root`: removes staging folders (`.tmp-*`) and all
// but the newest `keep` folders named `<prefix>N`; the one `latest` names is never removed.
// keep < 1 removes none of them. Returns the folders removed.
std::vector<std::filesystem::path> rotate(const std::filesystem::path& root,
                                          const std::string& prefix, std::int64_t keep);

}  // namespace zero::checkpoint
