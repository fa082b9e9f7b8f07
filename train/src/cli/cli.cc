// Option parsing for the subcommands, with the nearest known option suggested on typos.
#include "zero/train/cli.h"

#include <iterator>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "zero/core/suggest.h"

namespace zero::cli {

namespace {

std::string suggestion(const std::string& unknown, const po::options_description& options) {
  std::string name = unknown;
  while (!name.empty() && name.front() == '-') name.erase(name.begin());
  if (auto equals = name.find('='); equals != std::string::npos) name.resize(equals);
  std::vector<std::string> known;
  for (const auto& option : options.options()) known.push_back(option->long_name());
  if (auto nearest = nearest_name(name, known)) return "; did you mean --" + *nearest + "?";
  return "";
}

// An option given more than once keeps its last value, as Hugging Face's argparse does
// (`scripts/demo.sh --max_steps 50` over the script's own `--max_steps 300`); Boost would refuse
// the second. An earlier value is still checked, as argparse converts each (`--max_steps x
// --max_steps 5` is an error). Positional words share their key and are all kept.
void keep_last_occurrences(po::parsed_options& parsed, const po::options_description& options) {
  std::set<std::string> seen;
  std::vector<po::option> kept;
  for (auto option = parsed.options.rbegin(); option != parsed.options.rend(); ++option) {
    if (option->position_key != -1 || seen.insert(option->string_key).second) {
      kept.push_back(std::move(*option));
      continue;
    }
    po::parsed_options earlier(&options);
    earlier.options.push_back(*option);
    po::variables_map checked;
    po::store(earlier, checked);
  }
  parsed.options.assign(std::make_move_iterator(kept.rbegin()),
                        std::make_move_iterator(kept.rend()));
}

}  // namespace

po::variables_map parse(std::span<char* const> args, const po::options_description& options,
                        const po::positional_options_description* positional) {
  std::vector<std::string> words(args.begin(), args.end());
  po::variables_map variables;
  try {
    po::command_line_parser parser(words);
    parser.options(options).style(po::command_line_style::default_style &
                                  ~po::command_line_style::allow_guessing);
    if (positional != nullptr) parser.positional(*positional);
    po::parsed_options parsed = parser.run();
    keep_last_occurrences(parsed, options);
    po::store(parsed, variables);
    po::notify(variables);
  } catch (const po::unknown_option& error) {
    throw UsageError{"unknown option '" + error.get_option_name() + "'" +
                     suggestion(error.get_option_name(), options)};
  } catch (const po::too_many_positional_options_error&) {
    throw UsageError{"too many positional arguments"};
  } catch (const po::error& error) {
    throw UsageError{error.what()};
  }
  return variables;
}

std::string usage(const std::string& command, const std::string& summary,
                  const po::options_description& options) {
  std::ostringstream out;
  out << "Usage: zero " << command << " [options]\n" << summary << "\n\n" << options;
  return out.str();
}

}  // namespace zero::cli
