// The pieces of the extension zero._zero, one function per source file that adds its part.
#pragma once

#include <nanobind/nanobind.h>

#include <memory>
#include <string>

#include "zero/train/token_dataset.h"

namespace zero::python {

// module.cc: zero.Error, zero.ConfigError, zero.InputError and the translator of C++ errors.
void add_errors(nanobind::module_& m);
// Raises zero.ArgumentTypeError (a TypeError) with `message` (throws nanobind::python_error).
[[noreturn]] void raise_argument_type_error(const std::string& message);
// commands_binding.cc: estimate, plan, config resolve/validate and train over the flag table.
void add_commands(nanobind::module_& m);
// checkpoint_binding.cc: checkpoint info/consolidate.
void add_checkpoint(nanobind::module_& m);
// tokenizer_binding.cc: Tokenizer, TokenBatch.
void add_tokenizer(nanobind::module_& m);
// token_dataset_binding.cc: token ids from Python as a TokenDataset (zero._zero.TokenDataset).
struct TokenRows {
  std::shared_ptr<const train::TokenDataset> dataset;
};
void add_token_dataset(nanobind::module_& m);

}  // namespace zero::python
