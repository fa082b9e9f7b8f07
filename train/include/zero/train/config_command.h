// `zero config` as a library call: a DeepSpeed config resolved as `zero train` would resolve it
// with the flags given (the config precedence rule, Hugging Face's defaults for flags not given).
// The CLI prints the result; the Python module (`zero.config.resolve`/`validate`, bindings/)
// returns it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "zero/train/flag_options.h"

namespace zero::train {

struct ResolvedConfig {
  std::string json;                   // the resolved config, as `zero config` prints it
  std::vector<std::string> warnings;  // one line each, naming the JSON path
};

// Resolves `text` (the config's JSON; `source_name` names it in messages) with `flags` as parsed
// from `zero config`'s flags. `notes` receives, before anything can throw, the lines `zero config`
// prints about flags not given ("take Hugging Face's defaults: ...", "take the values the file
// writes: ..."). Throws cli::UsageError for contradictory flags, config::ConfigError listing
// every error in the config, and zero::Error for other bad input.
ResolvedConfig resolve_config_flags(const cli::CommandFlags& flags, const std::string& text,
                                    std::string_view source_name, std::vector<std::string>& notes);

}  // namespace zero::train
