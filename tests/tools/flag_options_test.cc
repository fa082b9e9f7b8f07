// The commands' options from the flag table (zero/train/flag_options.h): every row an option of the
// commands it names, the flags `zero train` and `zero estimate` share read the same way, bools,
// aliases, "given", and the usage errors.
#include "zero/train/flag_options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace zero::cli {
namespace {

using train::Command;
using train::Flag;

// Parses `words` as `command`'s arguments.
void parse_words(CommandFlags& flags, std::vector<std::string> words) {
  std::vector<char*> pointers;
  for (std::string& word : words) pointers.push_back(word.data());
  flags.parse(pointers);
}

// A value unlike the flag's default, as a command line writes it.
std::string other_value(const Flag& flag) {
  switch (flag.type) {
    case train::FlagType::kBool: return default_text(flag) == "True" ? "False" : "True";
    case train::FlagType::kInt: return "3";
    case train::FlagType::kFloat: return "0.25";
    case train::FlagType::kString: return "other";
    case train::FlagType::kBoolOrString: return "all";
  }
  return "";
}

// The field of `flag` in `a` and `b` hold the same value.
bool same_field(const Flag& flag, train::FlagValues& a, train::FlagValues& b) {
  return std::visit(
      [&](auto member) {
        using Member = decltype(member);
        if constexpr (std::is_same_v<Member, std::monostate>) {
          return true;
        } else {
          using Owner = typename train::MemberOf<Member>::owner;
          return a.of<Owner>().*member == b.of<Owner>().*member;
        }
      },
      flag.field);
}

TEST(CommandFlags, EveryRowIsAnOptionOfTheCommandsItNames) {
  for (Command command : {Command::kTrain, Command::kEstimate, Command::kConfig}) {
    const CommandFlags flags(command);
    EXPECT_NE(flags.options().find_nothrow("help", false), nullptr);
    for (const Flag& flag : train::flag_table()) {
      const bool listed = flags.options().find_nothrow(std::string(flag.name), false) != nullptr;
      EXPECT_EQ(listed, flag.commands.has(command)) << name_of(command) << " --" << flag.name;
    }
  }
}

TEST(CommandFlags, TrainAndEstimateReadTheFlagsTheyShareAlike) {
  int shared = 0;
  for (const Flag& flag : train::flag_table()) {
    if (!flag.commands.has(Command::kTrain) || !flag.commands.has(Command::kEstimate)) continue;
    SCOPED_TRACE(std::string(flag.name));
    ++shared;
    CommandFlags train_flags(Command::kTrain), estimate_flags(Command::kEstimate);
    EXPECT_EQ(train_flags.options().find(std::string(flag.name), false).format_parameter(),
              estimate_flags.options().find(std::string(flag.name), false).format_parameter())
        << "the same default shown";
    const std::vector<std::string> words = {"--" + std::string(flag.name), other_value(flag)};
    parse_words(train_flags, words);
    parse_words(estimate_flags, words);
    EXPECT_TRUE(train_flags.given(flag.name));
    EXPECT_TRUE(estimate_flags.given(flag.name));
    EXPECT_TRUE(same_field(flag, train_flags.values(), estimate_flags.values()));
    train::FlagValues defaults;
    EXPECT_FALSE(same_field(flag, train_flags.values(), defaults)) << "the value did not land";
  }
  // the model (with the Hub cache's --cache_dir and --model_revision), batch, precision,
  // checkpointing (--gradient_checkpointing, --recompute_blocks), config and device (--use_cpu)
  // flags
  EXPECT_EQ(shared, 14);
}

TEST(CommandFlags, BoolFlagsTakeTrueAndFalseInEveryCommand) {
  for (Command command : {Command::kTrain, Command::kEstimate, Command::kConfig}) {
    CommandFlags alone(command), false_word(command), equals(command);
    parse_words(alone, {"--bf16"});
    parse_words(false_word, {"--bf16", "False"});
    parse_words(equals, {"--bf16=yes"});
    EXPECT_TRUE(alone.values().training.bf16);
    EXPECT_FALSE(false_word.values().training.bf16);
    EXPECT_TRUE(false_word.given("bf16"));
    EXPECT_TRUE(equals.values().training.bf16);
  }
  CommandFlags flags(Command::kTrain);
  try {
    parse_words(flags, {"--do_train=maybe"});
    ADD_FAILURE() << "no error";
  } catch (const UsageError& error) {
    EXPECT_EQ(error.message, "--do_train: expected True or False, got 'maybe'");
  }
}

// 5.x's include_num_input_tokens_seen (str | bool): its strings as the next word or after "=",
// True/False as a bool flag takes them, alone True; another word refused with the choices.
TEST(CommandFlags, StringOrBoolFlagsTakeTheirStringsAndBools) {
  auto parsed = [](std::vector<std::string> words) {
    CommandFlags flags(Command::kTrain);
    parse_words(flags, std::move(words));
    return flags.values().training.include_num_input_tokens_seen;
  };
  EXPECT_EQ(parsed({}), "no");
  EXPECT_EQ(parsed({"--include_num_input_tokens_seen"}), "True");
  EXPECT_EQ(parsed({"--include_num_input_tokens_seen", "non_padding", "--do_train"}),
            "non_padding");
  EXPECT_EQ(parsed({"--include_num_input_tokens_seen=all"}), "all");
  EXPECT_EQ(parsed({"--include_num_input_tokens_seen", "no"}), "no") << "a string first";
  EXPECT_EQ(parsed({"--include_num_input_tokens_seen", "0"}), "False") << "a bool word";
  EXPECT_EQ(parsed({"--include-num-input-tokens-seen", "yes"}), "True");
  CommandFlags flags(Command::kTrain);
  try {
    parse_words(flags, {"--include_num_input_tokens_seen=some"});
    ADD_FAILURE() << "no error";
  } catch (const UsageError& error) {
    EXPECT_EQ(error.message,
              "--include_num_input_tokens_seen 'some': 5.x takes all (or True), "
              "non_padding or no (or False)");
  }
}

// 5.x's --warmup_steps below 1 is a fraction of the total steps; 4.46's integers still parse.
TEST(CommandFlags, WarmupStepsTakesAFraction) {
  CommandFlags fraction(Command::kTrain), steps(Command::kTrain);
  parse_words(fraction, {"--warmup_steps", "0.1"});
  parse_words(steps, {"--warmup_steps", "30"});
  EXPECT_EQ(fraction.values().training.warmup_steps, 0.1);
  EXPECT_EQ(train::warmup_steps_for(fraction.values().training, 95), 10) << "ceil(9.5)";
  EXPECT_EQ(train::warmup_steps_for(steps.values().training, 95), 30);
}

TEST(CommandFlags, AFlagGivenTwiceTakesItsLastValueAsArgparseDoes) {
  CommandFlags flags(Command::kTrain);
  // scripts/demo.sh's own --max_steps 300, then the user's --max_steps 50.
  parse_words(flags, {"--max_steps", "300", "--learning_rate", "3e-3", "--do_train", "True",
                      "--max_steps=50", "--learning_rate", "1e-4"});
  EXPECT_EQ(flags.values().training.max_steps, 50);
  EXPECT_EQ(flags.values().training.learning_rate, 1e-4);
  EXPECT_TRUE(flags.values().training.do_train);
  CommandFlags estimate(Command::kEstimate);
  parse_words(estimate,
              {"--per_device_train_batch_size", "4", "--per_device_train_batch_size", "2"});
  EXPECT_EQ(estimate.values().training.per_device_train_batch_size, 2);
  CommandFlags bad(Command::kTrain);
  try {
    parse_words(bad, {"--max_steps", "many", "--max_steps", "5"});
    ADD_FAILURE() << "an earlier bad value is still an error";
  } catch (const UsageError& error) {
    EXPECT_NE(error.message.find("max_steps"), std::string::npos) << error.message;
  }
}

TEST(CommandFlags, AnAliasLandsInItsFlagsField) {
  CommandFlags flags(Command::kTrain);
  parse_words(flags, {"--evaluation_strategy", "steps", "--train_file", "a.txt"});
  EXPECT_EQ(flags.values().training.eval_strategy, train::IntervalStrategy::kSteps);
  EXPECT_TRUE(flags.given("eval_strategy"));
  EXPECT_EQ(flags.values().training.train_files, std::vector<std::string>{"a.txt"});
  EXPECT_FALSE(flags.given("save_strategy"));
  EXPECT_FALSE(flags.given("learning_rate")) << "defaulted is not given";
}

TEST(CommandFlags, UsageErrorsNameTheFlag) {
  CommandFlags typo(Command::kTrain);
  try {
    parse_words(typo, {"--learning_rat", "1"});
    ADD_FAILURE() << "no error";
  } catch (const UsageError& error) {
    EXPECT_EQ(error.message, "unknown option '--learning_rat'; did you mean --learning_rate?");
  }
  CommandFlags strategy(Command::kTrain);
  try {
    parse_words(strategy, {"--save_strategy", "often"});
    ADD_FAILURE() << "no error";
  } catch (const UsageError& error) {
    EXPECT_EQ(error.message,
              "--eval_strategy/--save_strategy: 'often' is not a strategy (no, steps or epoch)");
  }
}

TEST(CommandFlags, ConfigShowsNoDefaultsWhereTrainDoes) {
  const CommandFlags train_flags(Command::kTrain), config_flags(Command::kConfig);
  EXPECT_EQ(train_flags.options().find("per_device_train_batch_size", false).format_parameter(),
            "arg (=8)");
  EXPECT_EQ(config_flags.options().find("per_device_train_batch_size", false).format_parameter(),
            "arg");
}

// The message of the UsageError parsing `words` as `zero train`'s arguments throws ("" if none).
std::string usage_error_of(std::vector<std::string> words) {
  CommandFlags flags(Command::kTrain);
  try {
    parse_words(flags, std::move(words));
  } catch (const UsageError& error) {
    return error.message;
  }
  return "";
}

// torch.distributed.launch passes --local-rank=N (torch >= 2) or --local_rank=N (older); Hugging
// Face's parser takes the dashed spelling of every flag.
TEST(CommandFlags, LocalRankAndDashedSpellings) {
  for (const char* word : {"--local-rank=3", "--local_rank=3"}) {
    CommandFlags flags(Command::kTrain);
    parse_words(flags, {word});
    EXPECT_EQ(flags.values().training.local_rank, 3) << word;
    EXPECT_TRUE(flags.given("local_rank"));
  }
  CommandFlags dashed(Command::kTrain);
  parse_words(dashed, {"--per-device-train-batch-size", "4", "--do-train"});
  EXPECT_EQ(dashed.values().training.per_device_train_batch_size, 4);
  EXPECT_TRUE(dashed.values().training.do_train);
  const std::vector<std::string> given = dashed.given_names();
  EXPECT_EQ(given, (std::vector<std::string>{"do_train", "per_device_train_batch_size"}));
}

// A row's `accepts`: HF's default value of a refused flag passes silently, another value is
// refused with the reason; an accepted-without-effect flag is noted; an implemented flag refuses
// the values zero cannot honour.
TEST(CommandFlags, ValuesOutsideARowsAcceptsAreRefusedWithTheReason) {
  CommandFlags flags(Command::kTrain);
  parse_words(flags, {"--push_to_hub", "False", "--fsdp", "", "--eval_on_start", "False",
                      "--dataloader_pin_memory", "--optim", "sgd", "--report_to", "none"});
  ASSERT_EQ(flags.notes().size(), 2u);
  EXPECT_EQ(flags.notes()[0], "--push_to_hub has no effect: nothing is uploaded");
  EXPECT_EQ(flags.notes()[1].rfind("--dataloader_pin_memory has no effect: ", 0), 0u)
      << flags.notes()[1];
  EXPECT_EQ(flags.values().training.optim, "sgd");
  EXPECT_NE(
      usage_error_of({"--push_to_hub", "True"}).find("--push_to_hub True: zero uploads nothing"),
      std::string::npos);
  EXPECT_NE(usage_error_of({"--fsdp", "full_shard"}).find("use --deepspeed"), std::string::npos);
  EXPECT_NE(usage_error_of({"--neftune_noise_alpha", "5"}).find("no NEFTune"), std::string::npos);
  EXPECT_EQ(usage_error_of({"--label_smoothing_factor", "0.1"}), "") << "implemented";
  EXPECT_EQ(usage_error_of({"--eval_on_start"}), "") << "implemented: the training loop's";
  EXPECT_EQ(usage_error_of({"--optim", "adafactor"}),
            "--optim 'adafactor': zero supports adamw_torch, adamw_torch_fused, adamw_hf (AdamW) "
            "and sgd; or give the DeepSpeed config an \"optimizer\" section");
  EXPECT_NE(usage_error_of({"--report_to", "wandb"}).find("TensorBoard only"), std::string::npos);
  EXPECT_NE(usage_error_of({"--save_safetensors", "False"}).find("safetensors only"),
            std::string::npos);
  EXPECT_NE(usage_error_of({"--torch_dtype", "int8"}).find("not a dtype"), std::string::npos);
  EXPECT_EQ(usage_error_of({"--torch_dtype", "bfloat16", "--label_smoothing_factor", "0.0",
                            "--model_type", "gpt2", "--no_cuda"}),
            "");
  EXPECT_NE(usage_error_of({"--train_split_name", "fit"}).find("--train_file"), std::string::npos);
  EXPECT_NE(usage_error_of({"--train_sampling_strategy", "shuffled"}).find("sequential"),
            std::string::npos);
}

// Every name of the table is an option of `zero train`: Hugging Face's command lines start.
TEST(CommandFlags, EveryHuggingFaceRowIsAcceptedByTrain) {
  int rows = 0;
  for (const Flag& flag : train::flag_table()) {
    if (flag.origin == train::Origin::kZero || flag.origin == train::Origin::kDeepSpeedLauncher)
      continue;
    EXPECT_TRUE(flag.commands.has(Command::kTrain)) << "--" << flag.name;
    ++rows;
  }
  EXPECT_GE(rows, 150);
}

// A value `flag` takes: its first accepted one (unquoted), else one of its type.
std::string value_for(const Flag& flag) {
  if (!flag.accepts.empty()) {
    std::string first(flag.accepts.substr(0, flag.accepts.find('|')));
    if (first.size() >= 2 && first.front() == '\'') first = first.substr(1, first.size() - 2);
    return first;
  }
  if (std::holds_alternative<train::IntervalStrategy train::TrainingArguments::*>(flag.field))
    return "no";
  return other_value(flag);
}

// Each Hugging Face name (and alias) given on `zero train`'s command line does what its row says:
// implemented lands, accepted without effect is noted with its reason, refused is refused with
// its reason unless the value is one it accepts.
TEST(CommandFlags, EveryHuggingFaceRowParsesWithItsDisposition) {
  int rows = 0;
  for (const Flag& flag : train::flag_table()) {
    if (flag.origin == train::Origin::kZero || flag.origin == train::Origin::kDeepSpeedLauncher)
      continue;
    for (std::string_view spelling : {flag.name, flag.aliases[0], flag.aliases[1]}) {
      if (spelling.empty()) continue;
      SCOPED_TRACE("--" + std::string(spelling));
      ++rows;
      const std::string value = value_for(flag);
      CommandFlags flags(Command::kTrain);
      std::string error;
      try {
        parse_words(flags, {"--" + std::string(spelling), value});
      } catch (const UsageError& usage) {
        error = usage.message;
      }
      const bool refused = flag.disposition == train::Disposition::kRefused && flag.accepts.empty();
      if (refused) {
        EXPECT_NE(error.find(std::string(flag.reason)), std::string::npos) << error;
        continue;
      }
      ASSERT_EQ(error, "") << value;
      EXPECT_TRUE(flags.given(flag.name));
      const bool noted = flag.disposition == train::Disposition::kAcceptedWithoutEffect;
      ASSERT_EQ(flags.notes().size(), noted ? 1u : 0u);
      if (noted) {
        EXPECT_EQ(flags.notes()[0],
                  "--" + std::string(spelling) + " has no effect: " + std::string(flag.reason));
      }
    }
  }
  EXPECT_GE(rows, 160);
}

}  // namespace
}  // namespace zero::cli
