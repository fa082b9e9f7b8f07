// zero::train's bad input: what every layer of the trainer throws for input it refuses before
// anything is written to output_dir.
#pragma once

#include <string>

#include "zero/core/error.h"

namespace zero::train {

// A bad input found before anything is written to output_dir: a missing, empty or binary data
// file, a block_size larger than the model's n_positions, a DeepSpeed config that contradicts a
// flag, an existing non-empty output_dir without --overwrite_output_dir, ... Every rank throws
// the same one; `zero train` prints it and exits 2.
class InputError : public Error {
 public:
  explicit InputError(const std::string& message) : Error(message) {}
};

}  // namespace zero::train
