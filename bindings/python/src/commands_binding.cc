// The commands that take flags from the flag table (zero/train/flags.h), called with the words of
// their command line: the package turns keyword arguments into those words (zero/__init__.py), so
// every name, alias, type, refusal and "did you mean" is the CLI's own.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "bindings.h"
#include "results.h"
#include "zero/config/ds_config.h"
#include "zero/train/config_command.h"
#include "zero/train/config_precedence.h"
#include "zero/train/estimate.h"
#include "zero/train/flag_options.h"
#include "zero/train/flags.h"
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
// SIGINT stopping the run after the step as SIGTERM does. `write` (when given) takes rank 0's log
// lines instead of stdout, `on_log` each log entry as a dict: both called under the GIL, on this
// thread; what they raise ends the run and comes back to the caller. `train_dataset` and
// `eval_dataset` (token_dataset's) replace the data files.
nb::dict train_words(const std::vector<std::string>& words, bool verbose, nb::object write,
                     nb::object on_log, const TokenRows* train_dataset,
                     const TokenRows* eval_dataset) {
  cli::CommandFlags flags(train::Command::kTrain);
  parse_words(flags, words);
  if (train_dataset != nullptr) flags.values().training.train_dataset = train_dataset->dataset;
  if (eval_dataset != nullptr) flags.values().training.validation_dataset = eval_dataset->dataset;
  train::RunOptions options;
  options.print = verbose;
  options.stop_on_interrupt = true;
  if (!write.is_none())
    options.print_line = [&write](std::string_view text) {
      nb::gil_scoped_acquire gil;
      write(nb::str(text.data(), text.size()));
    };
  if (!on_log.is_none())
    options.on_log = [&on_log](const train::LogEntry& entry) {
      nb::gil_scoped_acquire gil;
      on_log(log_entry_dict(entry));
    };
  train::TrainResult result;
  {
    nb::gil_scoped_release release;
    result = train::train_from_flags(flags, options);
  }
  return train_result_dict(result);
}

// The flags `command` ("train", "estimate", "config") takes, each name and alias with its type as
// the flag table has it ("bool", "int", "float", "str", "str or bool", "list" for a field of
// comma-separated values): the package checks keyword arguments' Python types against it.
nb::dict flag_types(const std::string& command) {
  train::Command wanted = train::Command::kTrain;
  if (command == "estimate")
    wanted = train::Command::kEstimate;
  else if (command == "config")
    wanted = train::Command::kConfig;
  else
    ZERO_CHECK(command == "train", "flag_types: no command '", command, "'");
  nb::dict out;
  for (const train::Flag& flag : train::flag_table()) {
    if (!flag.commands.has(wanted)) continue;
    const bool list =
        std::holds_alternative<std::vector<std::string> train::TrainingArguments::*>(flag.field);
    const std::string type = list ? "list" : std::string(train::name_of(flag.type));
    out[nb::str(flag.name.data(), flag.name.size())] = type;
    for (const std::string_view alias : flag.aliases)
      if (!alias.empty()) out[nb::str(alias.data(), alias.size())] = type;
  }
  return out;
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
        nb::arg("write").none() = nb::none(), nb::arg("on_log").none() = nb::none(),
        nb::arg("train_dataset").none() = nb::none(), nb::arg("eval_dataset").none() = nb::none(),
        "`zero train` with these words, in-process: the results as a dict. write(text): rank 0's "
        "log lines instead of stdout; on_log(entry): each log entry as it is logged; "
        "train_dataset, eval_dataset: TokenDatasets (token_dataset) in place of the data files.");
  m.def("flag_types", &flag_types, nb::arg("command"),
        "The flags of `command` (train, estimate, config) and aliases, each with its type.");
}

}  // namespace zero::python
