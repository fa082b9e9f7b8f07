// The flag table: every command-line flag of `zero train`, `zero estimate` and `zero config`, one
// row each: its name and other spellings, type, where its value lands, Hugging Face's default per
// transformers version, what zero does with it, which commands take it, and its help. The
// commands build their options from it (zero/train/flag_options.h) and docs/flags.md is generated
// from it; a new flag is one row in train/src/cli/flags.cc (plus its field, when it has one).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "zero/train/arguments.h"
#include "zero/train/command_arguments.h"

namespace zero::train {

// The commands that take flags from the table; a row names a set of them.
enum class Command : std::uint8_t { kTrain = 1, kEstimate = 2, kConfig = 4 };

struct Commands {
  std::uint8_t bits = 0;
  constexpr Commands() = default;
  constexpr Commands(Command command) : bits(static_cast<std::uint8_t>(command)) {}  // NOLINT
  constexpr bool has(Command command) const {
    return (bits & static_cast<std::uint8_t>(command)) != 0;
  }
};
constexpr Commands operator|(Commands set, Command command) {
  set.bits |= static_cast<std::uint8_t>(command);
  return set;
}
constexpr Commands operator|(Command a, Command b) { return Commands(a) | b; }

std::string_view name_of(Command command);  // "train", "estimate", "config"

// A value's type as Hugging Face's parser reads it. A bool flag alone means True and also takes
// True/False (1/0, yes/no) as the next word or after "=". kBoolOrString (5.x's `str | bool`): a
// string field that also takes what a bool flag takes, stored as "True" or "False".
enum class FlagType { kBool, kInt, kFloat, kString, kBoolOrString };
std::string_view name_of(FlagType type);  // "bool", "int", "float", "str", "str or bool"

// What zero does with a flag that is given.
enum class Disposition {
  kImplemented,            // the value changes the run as its help says
  kAcceptedWithoutEffect,  // accepted for command lines written for Hugging Face; `reason` says
                           // why it has no counterpart in zero (noted when given)
  kRefused,                // a usage error when given, with `reason`: why, and the alternative
};
std::string_view name_of(Disposition disposition);

// Where the name comes from: a Hugging Face dataclass, DeepSpeed's launcher, or zero itself.
enum class Origin {
  kTrainingArguments,        // transformers.TrainingArguments
  kModelArguments,           // run_clm.py's ModelArguments
  kDataArguments,            // run_clm.py's DataTrainingArguments
  kClassificationArguments,  // run_classification.py's DataTrainingArguments
  kDeepSpeedLauncher,        // the `deepspeed` launcher's flags
  kZero,                     // zero's own
};
std::string_view name_of(Origin origin);

// The groups of `zero train --help`, in the order printed.
enum class Section { kModel, kData, kClassification, kTraining, kOwn };
inline constexpr int kNumSections = 5;
std::string_view title_of(Section section);  // "Model (run_clm ModelArguments)", ...

// Hugging Face's default for a version, as Python's repr writes it ("8", "5e-05", "'linear'",
// "False", "None"); kAbsent where that version has no such field, kRequired where it has no
// default. Flags of run_clm/run_classification hold the script's default in both.
inline constexpr std::string_view kAbsent = "";
inline constexpr std::string_view kRequired = "(required)";
struct HfDefaults {
  std::string_view transformers_4_46 = kAbsent;
  std::string_view transformers_5 = kAbsent;
};

// Where the parsed values land: TrainingArguments for the Hugging Face flags (its member
// initialisers are the defaults), each command's own struct for the others.
struct FlagValues {
  TrainingArguments training;
  TrainCommandArguments train;
  EstimateArguments estimate;
  ConfigArguments config;

  template <typename Owner>
  Owner& of() {
    if constexpr (std::is_same_v<Owner, TrainingArguments>) return training;
    if constexpr (std::is_same_v<Owner, TrainCommandArguments>) return train;
    if constexpr (std::is_same_v<Owner, EstimateArguments>) return estimate;
    if constexpr (std::is_same_v<Owner, ConfigArguments>) return config;
  }
  template <typename Owner>
  const Owner& of() const {
    return const_cast<FlagValues*>(this)->of<Owner>();
  }
};

// A flag's field: a member of one of FlagValues' structs, of one of the types the parser stores.
// bool fields take True/False (and so do the std::string fields of kBoolOrString rows);
// std::vector<std::string> fields take one value (a file, or several comma-separated) and stay
// empty for ""; IntervalStrategy fields take "no", "steps" or "epoch". std::monostate: a flag
// without a field (accepted without effect, or refused).
template <typename... Owners>
using FieldOf =
    std::variant<std::monostate, bool Owners::*..., int Owners::*..., std::int64_t Owners::*...,
                 std::uint64_t Owners::*..., double Owners::*..., std::string Owners::*...,
                 std::vector<std::string> Owners::*..., IntervalStrategy Owners::*...>;
using FlagField =
    FieldOf<TrainingArguments, TrainCommandArguments, EstimateArguments, ConfigArguments>;

// The owner and value type of a member pointer: MemberOf<double TrainingArguments::*>.
template <typename Member>
struct MemberOf;
template <typename Owner, typename Value>
struct MemberOf<Value Owner::*> {
  using owner = Owner;
  using value = Value;
};

// One row of the table.
struct Flag {
  std::string_view name = {};                    // "--name" on the command line
  std::array<std::string_view, 2> aliases = {};  // other spellings (old names), "" unused
  FlagType type = FlagType::kString;
  FlagField field = {};  // where the value lands; its C++ type agrees with `type`
  Commands commands = {};
  Origin origin = Origin::kZero;
  Section section = Section::kOwn;  // its group in `zero train --help`
  HfDefaults hf_default = {};
  Disposition disposition = Disposition::kImplemented;
  std::string_view reason = {};  // for kAcceptedWithoutEffect and kRefused
  // --help prints "(=default)"; false where the default is a sentinel the help text explains.
  bool show_default = false;
  // The values zero honours, '|'-separated as Python's repr writes them ("False", "'steps'",
  // "0", "''"). Empty: every value (a kRefused row: none). For kImplemented and
  // kAcceptedWithoutEffect rows another value is refused with `refusal`; for a kRefused row these
  // values are accepted silently (they ask for what zero does anyway, usually Hugging Face's
  // default) and the others get `reason`.
  std::string_view accepts = {};
  std::string_view refusal = {};  // why a value outside `accepts` is refused, and the alternative
  std::string_view help = {};
  // The help in `zero estimate` / `zero config` where it differs from `help` there ("": `help`).
  std::string_view estimate_help = {};
  std::string_view config_help = {};
};

// The table, in the order `--help` lists the flags: flags.cc's rows (the flags zero had first),
// then flags_hugging_face.cc's (the rest of TrainingArguments, run_clm and run_classification).
std::span<const Flag> flag_table();

// Whether `value` (as Python's repr writes it: "True", "0", "'steps'") is one of `flag.accepts`;
// true when the row accepts every value. Numbers compare by value ("0" is "0.0").
bool accepts_value(const Flag& flag, std::string_view value);

// The row whose name or alias is `name`; nullptr if none.
const Flag* find_flag(std::string_view name);

// The help text of `flag` in `command`.
std::string_view help_in(const Flag& flag, Command command);

// zero's default for `flag`: the member initialiser of its field as Python's repr would write it
// ("8", "5e-05", "'linear'", "False", "''", "[]"); "None" for a flag without a field.
std::string default_text(const Flag& flag);

// The FlagType a field of this C++ type has.
FlagType type_of(const FlagField& field);

// docs/flags.md: the table as Markdown, one table per --help section (`zero flags` prints it).
std::string flags_markdown();

namespace detail {
// flags_hugging_face.cc's rows: the TrainingArguments fields and run_clm/run_classification
// arguments added for issue 23, most accepted without effect or refused with a reason.
std::span<const Flag> hugging_face_flags();
}  // namespace detail

}  // namespace zero::train
