// The pieces of the extension zero._zero, one function per source file that adds its part.
#pragma once

#include <nanobind/nanobind.h>

namespace zero::python {

// module.cc: zero.Error, zero.ConfigError, zero.InputError and the translator of C++ errors.
void add_errors(nanobind::module_& m);
// commands_binding.cc: estimate, plan, config resolve/validate and train over the flag table.
void add_commands(nanobind::module_& m);
// checkpoint_binding.cc: checkpoint info/consolidate.
void add_checkpoint(nanobind::module_& m);
// tokenizer_binding.cc: Tokenizer, TokenBatch.
void add_tokenizer(nanobind::module_& m);

}  // namespace zero::python
