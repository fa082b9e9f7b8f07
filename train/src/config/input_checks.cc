// The shared readings of flags (input_checks.h).
#include "config/input_checks.h"

namespace zero::train::detail {

std::vector<std::string> split_files(const std::vector<std::string>& specs) {
  std::vector<std::string> files;
  for (const std::string& spec : specs)
    for (std::size_t begin = 0; begin <= spec.size();) {
      const std::size_t end = std::min(spec.find(',', begin), spec.size());
      if (end > begin) files.push_back(spec.substr(begin, end - begin));
      begin = end + 1;
    }
  return files;
}

}  // namespace zero::train::detail
