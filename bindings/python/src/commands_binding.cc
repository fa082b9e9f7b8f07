// The commands that take flags from the flag table (zero/train/flags.h), called with the words of
// their command line: the package turns keyword arguments into those words (zero/__init__.py), so
// every name, alias, type, refusal and "did you mean" is the CLI's own.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "results.h"
#include "zero/config/ds_config.h"
#include "zero/train/config_command.h"
#include "zero/train/config_precedence.h"
#include "zero/train/estimate.h"
#include "zero/train/flag_options.h"
#include "zero/train/train_command.h"

namespace nb = nanobind;

namespace zero::python {

namespace {

// Parses `words` as `command`'s command line (positional: `zero config`'s FILE).
void parse_words(cli::CommandFlags& flags, const std::vector<std::string>& words,
                 const cli::po::positional_options_description* positional = nullptr) {
  std::vector<std::string> copies = words;
  std::vector<char*> pointers;
  for (std::string& word : copies) pointers.push_back(word.data());
  flags.parse(pointers, positional);
}

// `zero estimate --json`'s text (the package parses it) and the notes the CLI prints on stderr.
nb::tuple estimate(const std::vector<std::string>& words) {
  cli::CommandFlags flags(train::Command::kEstimate);
  parse_words(flags, words);
  train::TrainingArguments& a = flags.values().training;
  a.dry_run = true;
  a.given_flags = flags.given_names();
  std::vector<std::string> notes;
  std::string json;
  {
    nb::gil_scoped_release release;
    const train::Estimate result = train::estimate_run(a, flags.values().estimate, notes);
    json = train::estimate_json(result, flags.values().estimate);
  }
  return nb::make_tuple(json, notes);
}

// The per-rank plans of `zero train --dry_run` with `words`, each as JSON text.
std::vector<std::string> plan(const std::vector<std::string>& words) {
  cli::CommandFlags flags(train::Command::kTrain);
  parse_words(flags, words);
  ZERO_CHECK(flags.values().training.dry_run, "plan: the words must include --dry_run");
  train::RunOptions options;
  options.print = false;
  std::vector<std::string> plans;
  nb::gil_scoped_release release;
  for (const train::RankPlan& rank : train::train_from_flags(flags, options).plan)
    plans.push_back(train::rank_plan_json(rank));
  return plans;
}

// `zero config`: the config at `path`, or `text` (named `source_name`), resolved with `words`.
// Returns (json, warnings, notes).
nb::tuple resolve(const std::vector<std::string>& words, const std::optional<std::string>& path,
                  const std::optional<std::string>& text, const std::string& source_name) {
  cli::CommandFlags flags(train::Command::kConfig);
  parse_words(flags, words);
  std::vector<std::string> notes;
  train::ResolvedConfig resolved;
  {
    nb::gil_scoped_release release;
    const std::string contents = path ? train::read_deepspeed_file(*path) : text.value_or("");
    resolved = train::resolve_config_flags(flags, contents, path ? *path : source_name, notes);
  }
  return nb::make_tuple(resolved.json, resolved.warnings, notes);
}

// The errors `resolve` finds in the config itself, one message each (empty: valid); bad flags and
// an unreadable file still raise.
std::vector<std::string> validate(const std::vector<std::string>& words,
                                  const std::optional<std::string>& path,
                                  const std::optional<std::string>& text,
                                  const std::string& source_name) {
  try {
    resolve(words, path, text, source_name);
  } catch (const config::ConfigError& error) {
    return error.errors();
  } catch (const train::InputError&) {
    throw;
  } catch (const Error& error) {  // not JSON, not an object, a value out of range
    return {error.what()};
  }
  return {};
}

// `zero train` with `words` in this process, on every rank of the launch; the GIL released, and
// SIGINT stopping the run after the step as SIGTERM does.
nb::dict train_words(const std::vector<std::string>& words, bool verbose) {
  cli::CommandFlags flags(train::Command::kTrain);
  parse_words(flags, words);
  train::RunOptions options;
  options.print = verbose;
  options.stop_on_interrupt = true;
  train::TrainResult result;
  {
    nb::gil_scoped_release release;
    result = train::train_from_flags(flags, options);
  }
  return train_result_dict(result);
}

}  // namespace

void add_commands(nb::module_& m) {
  m.def("estimate", &estimate, nb::arg("words"),
        "`zero estimate --json` with these words: (the JSON text, the notes).");
  m.def("plan", &plan, nb::arg("words"),
        "`zero train --dry_run` with these words: each rank's plan as JSON text.");
  m.def("resolve_config", &resolve, nb::arg("words"), nb::arg("path").none(),
        nb::arg("text").none(), nb::arg("source_name"),
        "`zero config` with these words: (the resolved JSON text, warnings, notes).");
  m.def("validate_config", &validate, nb::arg("words"), nb::arg("path").none(),
        nb::arg("text").none(), nb::arg("source_name"),
        "The errors `zero config` finds in the config, one message each (empty: valid).");
  m.def("train", &train_words, nb::arg("words"), nb::arg("verbose") = true,
        "`zero train` with these words, in-process: the results as a dict.");
}

}  // namespace zero::python
