// Builds zero::Error messages with their source location.
#include "zero/core/error.h"

#include <cstring>

namespace zero::detail {

void throw_error(const char* file, int line, const std::string& message) {
  const char* base = std::strrchr(file, '/');
  throw Error(concat(message, " (", base ? base + 1 : file, ":", line, ")"));
}

}  // namespace zero::detail
