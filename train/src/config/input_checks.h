// Bad input as InputError, for every layer of zero::train (internal): the error built from parts,
// another error turned into one, and the small readings of flags the layers share.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "zero/train/input_error.h"

namespace zero::train::detail {

// Bad input: an InputError (zero train exits 2) with the parts streamed into its message.
template <typename... Parts>
[[noreturn]] void input_error(const Parts&... parts) {
  std::ostringstream message;
  (message << ... << parts);
  throw InputError(message.str());
}

// Runs `body`; a zero::Error (any std::exception) from it becomes an InputError prefixed by `what`.
template <typename Body>
auto as_input_error(std::string_view what, Body&& body) {
  try {
    return body();
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& error) {
    input_error(what, ": ", error.what());
  }
}

// `count` limited to `limit` when that is positive (--max_train_samples and the like).
inline std::size_t capped(std::size_t count, std::int64_t limit) {
  return limit > 0 ? std::min<std::size_t>(count, static_cast<std::size_t>(limit)) : count;
}

// The comma-separated lists of `specs` as one list ("a.txt,b.txt" "c.txt": three files).
std::vector<std::string> split_files(const std::vector<std::string>& specs);

}  // namespace zero::train::detail
