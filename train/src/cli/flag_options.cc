// Boost.Program_options descriptions from the flag table, and the parsed words back into its
// fields.
#include "zero/train/flag_options.h"

#include <algorithm>
#include <boost/make_shared.hpp>
#include <cctype>
#include <charconv>
#include <optional>

#include "zero/core/error.h"

namespace zero::cli {

namespace {

using train::Command;
using train::Flag;
using train::FlagType;

std::string lowercase(std::string word) {
  std::transform(word.begin(), word.end(), word.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return word;
}

bool is_boolean_word(const std::string& word) {
  const std::string lower = lowercase(word);
  return lower == "true" || lower == "false" || lower == "1" || lower == "0" || lower == "yes" ||
         lower == "no";
}

bool parse_boolean(const std::string& flag, const std::string& text) {
  const std::string word = lowercase(text);
  if (word == "true" || word == "1" || word == "yes") return true;
  if (word == "false" || word == "0" || word == "no") return false;
  throw UsageError{"--" + flag + ": expected True or False, got '" + word + "'"};
}

// The value a row takes on the command line: bools as text (alone: "True"), vectors and interval
// strategies as one string, the rest as their own type; the default shown when `with_default`.
po::value_semantic* semantic(const Flag& flag, const train::FlagValues& defaults,
                             bool with_default) {
  return std::visit(
      [&](auto member) -> po::value_semantic* {
        using Member = decltype(member);
        if constexpr (std::is_same_v<Member, std::monostate>) {
          switch (flag.type) {
            case FlagType::kBool: return po::value<std::string>()->implicit_value("True");
            case FlagType::kInt: return po::value<std::int64_t>();
            case FlagType::kFloat: return po::value<double>();
            case FlagType::kString: return po::value<std::string>();
            case FlagType::kBoolOrString: return po::value<std::string>()->implicit_value("True");
          }
          return po::value<std::string>();
        } else {
          using Owner = typename train::MemberOf<Member>::owner;
          using Value = typename train::MemberOf<Member>::value;
          const Value& initial = defaults.of<Owner>().*member;
          if constexpr (std::is_same_v<Value, bool>) {
            return po::value<std::string>()->implicit_value("True");
          } else if constexpr (std::is_same_v<Value, std::vector<std::string>>) {
            return po::value<std::string>();
          } else if constexpr (std::is_same_v<Value, std::string>) {
            auto* value = po::value<std::string>();
            if (flag.type == FlagType::kBoolOrString) value->implicit_value("True");
            if (with_default) value->default_value(initial);
            return value;
          } else if constexpr (std::is_same_v<Value, train::IntervalStrategy>) {
            auto* value = po::value<std::string>();
            if (with_default) value->default_value(std::string(train::name_of(initial)));
            return value;
          } else {
            auto* value = po::value<Value>();
            if (with_default) value->default_value(initial);
            return value;
          }
        }
      },
      flag.field);
}

void add(po::options_description& group, const std::string& name, po::value_semantic* value,
         const std::string& help) {
  group.add(boost::make_shared<po::option_description>(name.c_str(), value, help.c_str()));
}

// Each row of `command` in table order (a row's aliases right after it) into the group `pick`
// chooses for it.
template <typename Pick>
void add_rows(Command command, const train::FlagValues& defaults, Pick pick) {
  for (const Flag& flag : train::flag_table()) {
    if (!flag.commands.has(command)) continue;
    const bool with_default = flag.show_default && command != Command::kConfig;
    po::options_description& group = pick(flag);
    std::string help(train::help_in(flag, command));
    if (flag.disposition != train::Disposition::kImplemented)
      help = (flag.disposition == train::Disposition::kRefused ? "refused: " : "no effect: ") +
             std::string(flag.reason);
    add(group, std::string(flag.name), semantic(flag, defaults, with_default), help);
    for (std::string_view alias : flag.aliases)
      if (!alias.empty())
        add(group, std::string(alias), semantic(flag, defaults, with_default),
            "the old name of --" + std::string(flag.name));
  }
}

// "--a-b" spelled "--a_b" when the table knows the latter for `command`: Hugging Face's parser
// takes both spellings of every flag (torch.distributed.launch passes --local-rank=N).
std::string underscored(std::string word, Command command) {
  if (!word.starts_with("--")) return word;
  const std::size_t end = std::min(word.find('='), word.size());
  std::string name = word.substr(2, end - 2);
  if (name.find('-') == std::string::npos) return word;
  std::replace(name.begin(), name.end(), '-', '_');
  const Flag* flag = train::find_flag(name);
  if (flag == nullptr || !flag->commands.has(command)) return word;
  return "--" + name + word.substr(end);
}

// A given value as Python's repr writes it ("True", "8", "5e-05", "'steps'"), for the row's
// `accepts` check.
std::string given_text(const Flag& flag, const po::variable_value& value,
                       const std::string& spelling) {
  const boost::any& any = value.value();
  if (const auto* text = boost::any_cast<std::string>(&any)) {
    if (flag.type == FlagType::kBool) return parse_boolean(spelling, *text) ? "True" : "False";
    if (flag.type == FlagType::kBoolOrString && is_boolean_word(*text) &&
        !train::accepts_value(flag, "'" + *text + "'"))
      return parse_boolean(spelling, *text) ? "True" : "False";
    return "'" + *text + "'";
  }
  if (const auto* number = boost::any_cast<std::int64_t>(&any)) return std::to_string(*number);
  if (const auto* number = boost::any_cast<std::uint64_t>(&any)) return std::to_string(*number);
  if (const auto* number = boost::any_cast<int>(&any)) return std::to_string(*number);
  if (const auto* number = boost::any_cast<double>(&any)) {
    char text[32];
    return std::string(text, std::to_chars(text, text + sizeof(text), *number).ptr);
  }
  return "?";
}

// The "--flag True" words of bool flags joined into "--flag=True".
std::vector<std::string> joined_boolean_values(std::span<char* const> args, Command command) {
  auto is_boolean_flag = [command](std::string_view word) {
    if (!word.starts_with("--")) return false;
    const Flag* flag = train::find_flag(word.substr(2));
    return flag != nullptr && flag->commands.has(command) &&
           (flag->type == FlagType::kBool || flag->type == FlagType::kBoolOrString);
  };
  // A kBoolOrString flag also joins the next word when it is one of the row's strings.
  auto is_row_string = [command](std::string_view word, std::string_view next) {
    const Flag* flag = word.starts_with("--") ? train::find_flag(word.substr(2)) : nullptr;
    return flag != nullptr && flag->commands.has(command) &&
           flag->type == FlagType::kBoolOrString &&
           train::accepts_value(*flag, "'" + std::string(next) + "'");
  };
  std::vector<std::string> words;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string word = underscored(args[i], command);
    if (is_boolean_flag(word) && i + 1 < args.size() &&
        (is_boolean_word(args[i + 1]) || is_row_string(word, args[i + 1])))
      word += "=" + std::string(args[++i]);
    words.push_back(word);
  }
  return words;
}

}  // namespace

CommandFlags::CommandFlags(Command command)
    : command_(command),
      options_(command == Command::kTrain ? po::options_description()
                                          : po::options_description("Options")) {
  if (command == Command::kTrain) {
    std::vector<po::options_description> sections;
    for (int s = 0; s < train::kNumSections; ++s)
      sections.emplace_back(std::string(train::title_of(static_cast<train::Section>(s))));
    sections[static_cast<int>(train::Section::kOwn)].add_options()("help,h", "print this help");
    add_rows(
        command, values_, [&](const Flag& flag) -> auto& {
          return sections[static_cast<int>(flag.section)];
        });
    for (const po::options_description& section : sections) options_.add(section);
  } else {
    options_.add_options()("help,h", "print this help");
    add_rows(
        command, values_, [&](const Flag&) -> auto& { return options_; });
  }
}

void CommandFlags::parse(std::span<char* const> args,
                         const po::positional_options_description* positional) {
  std::vector<std::string> words = joined_boolean_values(args, command_);
  std::vector<char*> pointers;
  for (std::string& word : words) pointers.push_back(word.data());
  variables_ = cli::parse(pointers, options_, positional);
  for (const Flag& flag : train::flag_table()) {
    if (!flag.commands.has(command_)) continue;
    std::optional<std::string> spelling;
    if (variables_.count(std::string(flag.name))) spelling = std::string(flag.name);
    for (std::string_view alias : flag.aliases)
      if (!spelling && !alias.empty() && variables_.count(std::string(alias)))
        spelling = std::string(alias);
    if (spelling) read(flag, *spelling);
  }
}

bool CommandFlags::given(std::string_view name) const {
  const Flag* flag = train::find_flag(name);
  if (flag == nullptr) return false;
  auto on_line = [this](std::string_view spelling) {
    const auto found = variables_.find(std::string(spelling));
    return found != variables_.end() && !found->second.defaulted();
  };
  if (on_line(flag->name)) return true;
  return std::any_of(flag->aliases.begin(), flag->aliases.end(),
                     [&](std::string_view alias) { return !alias.empty() && on_line(alias); });
}

std::vector<std::string> CommandFlags::given_names() const {
  std::vector<std::string> names;
  for (const Flag& flag : train::flag_table())
    if (flag.commands.has(command_) && given(flag.name)) names.emplace_back(flag.name);
  return names;
}

void CommandFlags::read(const Flag& flag, const std::string& spelling) {
  const po::variable_value& value = variables_[spelling];
  if (!value.defaulted()) {
    const std::string text = given_text(flag, value, spelling);
    if (!train::accepts_value(flag, text)) {
      const std::string_view why =
          flag.disposition == train::Disposition::kRefused ? flag.reason : flag.refusal;
      throw UsageError{"--" + spelling + " " + text + ": " + std::string(why)};
    }
    if (flag.disposition == train::Disposition::kAcceptedWithoutEffect)
      notes_.push_back("--" + spelling + " has no effect: " + std::string(flag.reason));
  }
  std::visit(
      [&](auto member) {
        using Member = decltype(member);
        if constexpr (!std::is_same_v<Member, std::monostate>) {
          using Owner = typename train::MemberOf<Member>::owner;
          using Value = typename train::MemberOf<Member>::value;
          Value& target = values_.of<Owner>().*member;
          if constexpr (std::is_same_v<Value, bool>) {
            target = parse_boolean(spelling, value.as<std::string>());
          } else if constexpr (std::is_same_v<Value, std::string>) {
            const std::string& text = value.as<std::string>();
            // A kBoolOrString row's own strings first ("no"), then the bool words.
            const bool boolean = flag.type == FlagType::kBoolOrString && is_boolean_word(text) &&
                                 !train::accepts_value(flag, "'" + text + "'");
            target = boolean ? (parse_boolean(spelling, text) ? "True" : "False") : text;
          } else if constexpr (std::is_same_v<Value, std::vector<std::string>>) {
            if (!value.as<std::string>().empty()) target = {value.as<std::string>()};
          } else if constexpr (std::is_same_v<Value, train::IntervalStrategy>) {
            try {
              target = train::interval_strategy_from_name(value.as<std::string>());
            } catch (const Error& error) {
              // Both IntervalStrategy flags name themselves together, as they always have.
              throw UsageError{std::string("--eval_strategy/--save_strategy: ") + error.what()};
            }
          } else {
            target = value.as<Value>();
          }
        }
      },
      flag.field);
}

}  // namespace zero::cli
