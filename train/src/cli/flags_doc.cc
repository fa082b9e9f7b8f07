// docs/flags.md from the flag table: one Markdown table per `zero train --help` section, then the
// flags only `zero estimate` / `zero config` take. `zero flags` prints it; tools_flags_doc checks
// the checked-in file equals it.
#include <sstream>

#include "zero/train/flags.h"

namespace zero::train {

namespace {

// Text for a table cell: '|' escaped, newlines as spaces.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

std::string code(std::string_view text) {
  if (text.empty()) return "";
  return "`" + cell(text) + "`";
}

std::string commands_of(const Flag& flag) {
  std::string out;
  for (Command command : {Command::kTrain, Command::kEstimate, Command::kConfig})
    if (flag.commands.has(command))
      out += (out.empty() ? "" : ", ") + std::string(name_of(command));
  return out;
}

std::string hf_default_of(const Flag& flag) {
  const HfDefaults& hf = flag.hf_default;
  if (hf.transformers_4_46 == kAbsent && hf.transformers_5 == kAbsent) return "";
  if (hf.transformers_4_46 == hf.transformers_5) return code(hf.transformers_4_46);
  const std::string old_one =
      hf.transformers_4_46 == kAbsent ? "(absent)" : code(hf.transformers_4_46);
  const std::string new_one = hf.transformers_5 == kAbsent ? "(absent)" : code(hf.transformers_5);
  return "4.46: " + old_one + "<br>5.x: " + new_one;
}

std::string what_of(const Flag& flag, Command command) {
  std::string text;
  switch (flag.disposition) {
    case Disposition::kImplemented: text = std::string(help_in(flag, command)); break;
    case Disposition::kAcceptedWithoutEffect:
      text = "no effect: " + std::string(flag.reason);
      break;
    case Disposition::kRefused: text = "refused: " + std::string(flag.reason); break;
  }
  if (!flag.accepts.empty()) {
    text += flag.disposition == Disposition::kRefused ? " (accepted: " : " (values: ";
    std::string values(flag.accepts);
    for (char& c : values)
      if (c == '|') c = ',';
    text += values + ")";
    if (!flag.refusal.empty()) text += "; another value is refused: " + std::string(flag.refusal);
  }
  return cell(text);
}

void row(std::ostringstream& out, const Flag& flag, Command command) {
  std::string names = "`--" + std::string(flag.name) + "`";
  for (std::string_view alias : flag.aliases)
    if (!alias.empty()) names += "<br>`--" + std::string(alias) + "`";
  // A row without a field holds no value of zero's: "-".
  const std::string zero_default =
      std::holds_alternative<std::monostate>(flag.field) ? "-" : code(default_text(flag));
  out << "| " << names << " | " << name_of(flag.type) << " | " << zero_default << " | "
      << hf_default_of(flag) << " | " << name_of(flag.disposition) << " | " << commands_of(flag)
      << " | " << what_of(flag, command) << " |\n";
}

constexpr std::string_view kHeader =
    "| Flag | Type | zero's default | Hugging Face's default | Disposition | Commands | What zero "
    "does |\n|---|---|---|---|---|---|---|\n";

}  // namespace

std::string flags_markdown() {
  std::ostringstream out;
  out << "# Flags of `zero train`, `zero estimate` and `zero config`\n\n"
      << "Generated from the flag table (`train/src/cli/flags.cc`, "
         "`train/src/cli/flags_hugging_face.cc`) by `zero flags`; do not edit: `tools_flags_doc` "
         "fails when this file differs from "
         "`zero flags`' output.\n\n"
      << "Every flag also takes its dashed spelling (`--local-rank` for `--local_rank`), as "
         "Hugging Face's parser does. A bool flag alone means True and takes True/False (1/0, "
         "yes/no) after a space or `=`. Dispositions: *implemented* (the value changes the run), "
         "*accepted without effect* (noted at start, with the reason), *refused* (a usage error "
         "naming the reason and the alternative; the values listed as accepted ask for what zero "
         "does anyway). Hugging Face's defaults are transformers 4.46.3's and 5.x's (checked "
         "against 5.24.0) where they differ; zero takes the newer.\n\n"
      << "A value written in the `--deepspeed` config wins over a flag that was not given (the "
         "start log names it); a given flag that contradicts it is an error naming both; "
         "\"auto\" takes the flag, given or defaulted.\n";
  for (int s = 0; s < kNumSections; ++s) {
    const auto section = static_cast<Section>(s);
    out << "\n## " << title_of(section) << "\n\n" << kHeader;
    for (const Flag& flag : flag_table())
      if (flag.commands.has(Command::kTrain) && flag.section == section)
        row(out, flag, Command::kTrain);
  }
  for (Command command : {Command::kEstimate, Command::kConfig}) {
    out << "\n## `zero " << name_of(command) << "`'s own\n\n" << kHeader;
    for (const Flag& flag : flag_table())
      if (flag.commands.has(command) && !flag.commands.has(Command::kTrain))
        row(out, flag, command);
  }
  return out.str();
}

}  // namespace zero::train
