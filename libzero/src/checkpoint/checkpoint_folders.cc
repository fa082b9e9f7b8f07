// The checkpoint folders under a root: resolving a path or `latest` to one, rotating old ones.
#include "zero/checkpoint/checkpoint_folders.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <system_error>
#include <utility>

#include "zero/checkpoint/checkpoint_index.h"
#include "zero/checkpoint/durable_write.h"
#include "zero/core/error.h"

namespace zero::checkpoint {

namespace fs = std::filesystem;

fs::path resolve(const fs::path& path) {
  std::error_code error;
  ZERO_CHECK(fs::is_directory(path, error), "checkpoint ", path.string(),
             " does not exist or is not a folder");
  if (fs::exists(path / kIndexFileName)) return path;
  const fs::path latest = path / kLatestFileName;
  if (fs::exists(latest)) {
    std::ifstream stream(latest);
    std::string tag;
    std::getline(stream, tag);
    while (!tag.empty() && std::isspace(static_cast<unsigned char>(tag.back()))) tag.pop_back();
    ZERO_CHECK(!tag.empty() && tag.find('/') == std::string::npos, latest.string(),
               " does not name a checkpoint folder");
    ZERO_CHECK(fs::exists(path / tag / kIndexFileName), latest.string(), " names '", tag,
               "', which is not a complete checkpoint (no ", (path / tag / kIndexFileName).string(),
               ")");
    return path / tag;
  }
  long long best = -1;
  fs::path found;
  for (const fs::directory_entry& entry : fs::directory_iterator(path)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || !name.starts_with("checkpoint-")) continue;
    char* end = nullptr;
    const long long step = std::strtoll(name.c_str() + 11, &end, 10);
    if (*end != '\0' || !fs::exists(entry.path() / kIndexFileName)) continue;
    if (step > best) best = step, found = entry.path();
  }
  ZERO_CHECK(best >= 0, path.string(), " holds no complete checkpoint (no ", kLatestFileName,
             " file, no checkpoint-N folder with ", kIndexFileName, ")");
  return found;
}

std::vector<fs::path> rotate(const fs::path& root, const std::string& prefix, std::int64_t keep) {
  std::vector<fs::path> removed;
  std::string latest;
  if (std::ifstream stream(root / kLatestFileName); stream) std::getline(stream, latest);
  while (!latest.empty() && std::isspace(static_cast<unsigned char>(latest.back())))
    latest.pop_back();
  std::vector<std::pair<long long, fs::path>> folders;
  for (const fs::directory_entry& entry : fs::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory()) continue;
    if (name.starts_with(kStagingPrefix)) {
      fs::remove_all(entry.path());
      removed.push_back(entry.path());
      continue;
    }
    if (!name.starts_with(prefix)) continue;
    char* end = nullptr;
    const long long number = std::strtoll(name.c_str() + prefix.size(), &end, 10);
    if (end == name.c_str() + prefix.size() || *end != '\0') continue;
    folders.emplace_back(number, entry.path());
  }
  if (keep < 1) return removed;
  std::sort(folders.begin(), folders.end());
  std::size_t excess = folders.size() > static_cast<std::size_t>(keep)
                           ? folders.size() - static_cast<std::size_t>(keep)
                           : 0;
  for (std::size_t i = 0; i < folders.size() && excess > 0; ++i) {
    if (folders[i].second.filename() == latest || i + 1 == folders.size()) continue;
    fs::remove_all(folders[i].second);
    removed.push_back(folders[i].second);
    --excess;
  }
  if (!removed.empty()) fsync_path(root);
  return removed;
}

}  // namespace zero::checkpoint
