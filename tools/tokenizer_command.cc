// `zero tokenizer train|encode|decode`: train a byte-level BPE, print a file's ids as Hugging Face
// gives them, decode ids.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <vector>

#include "commands.h"
#include "zero/core/error.h"
#include "zero/core/suggest.h"
#include "zero/text/bpe_trainer.h"
#include "zero/text/tokenizer.h"
#include "zero/train/cli.h"

namespace zero::cli {
namespace {

constexpr std::string_view kSummary =
    "Usage: zero tokenizer <train|encode|decode> [options]\n\n"
    "  train   learn a byte-level BPE (GPT-2's pre-tokenizer) from text files; writes vocab.json\n"
    "          and merges.txt\n"
    "  encode  print the token ids of a file (or stdin), separated by spaces: Hugging Face's\n"
    "          tokenizer(text) ids (added tokens recognised, the file's bos/eos added)\n"
    "  decode  turn ids (whitespace-separated, from a file or stdin) back into text\n"
    "\nRun 'zero tokenizer <subcommand> --help' for its options.\n";

std::string read_input(const std::vector<std::string>& files) {
  std::ostringstream buffer;
  if (files.empty() || files.front() == "-") {
    buffer << std::cin.rdbuf();
  } else {
    std::ifstream stream(files.front(), std::ios::binary);
    ZERO_CHECK(stream.good(), "cannot open input file '", files.front(), "'");
    buffer << stream.rdbuf();
  }
  return buffer.str();
}

int run_train(std::span<char* const> args) {
  po::options_description options("Options");
  std::size_t vocab_size = 0;
  std::uint64_t min_frequency = 2;
  std::string output;
  options.add_options()("help,h", "print this help")(
      "vocab_size", po::value(&vocab_size)->required(),
      "tokens in the vocabulary: 256 bytes + merges + <|endoftext|>")(
      "min_frequency", po::value(&min_frequency)->default_value(2),
      "stop when the most frequent pair occurs fewer times")(
      "output", po::value(&output)->required(), "folder to write vocab.json and merges.txt to")(
      "files", po::value<std::vector<std::string>>()->multitoken(), "training text (.txt, .jsonl)");
  po::positional_options_description positional;
  positional.add("files", -1);
  for (char* const word : args)
    if (std::string_view(word) == "--help" || std::string_view(word) == "-h") {
      std::cout << usage("tokenizer train", "Learns a byte-level BPE vocabulary from text files.",
                         options);
      return 0;
    }
  const auto variables = parse(args, options, &positional);
  ZERO_CHECK(variables.count("files"), "no training files given");
  stop_if_parse_only();
  std::vector<std::filesystem::path> files;
  for (const auto& file : variables["files"].as<std::vector<std::string>>())
    files.emplace_back(file);
  text::BpeTrainer trainer({vocab_size, min_frequency, true});
  trainer.add_files(files);
  const text::BpeVocabulary vocabulary = trainer.train();
  text::save_vocab_and_merges(vocabulary, output);
  std::cerr << "zero tokenizer train: " << vocabulary.tokens.size() << " tokens, "
            << vocabulary.merges.size() << " merges from " << trainer.num_distinct_words()
            << " distinct words -> " << output << "/vocab.json, merges.txt\n";
  return 0;
}

int run_codec(std::span<char* const> args, bool encode) {
  po::options_description options("Options");
  std::string tokenizer_name;
  bool special = true;
  bool add_special_tokens = true;
  options.add_options()("help,h", "print this help")(
      "tokenizer_name", po::value(&tokenizer_name)->required(),
      "folder with tokenizer.json, vocab.json + merges.txt or encoder.json + vocab.bpe")(
      "special", po::value(&special)->default_value(true)->implicit_value(true),
      "encode: added tokens written in the text (<|endoftext|>, <s>) become their ids, as in "
      "Hugging Face and run_clm; false: they are ordinary text")(
      "add_special_tokens",
      po::value(&add_special_tokens)->default_value(true)->implicit_value(true),
      "encode: add the ids the tokenizer.json's post_processor puts around each text (Llama's "
      "bos), as Hugging Face's add_special_tokens")(
      "lines",
      "encode: each line (split at \\n, which is dropped) separately, one line of ids each")(
      "files", po::value<std::vector<std::string>>(), "input file (default: stdin)");
  po::positional_options_description positional;
  positional.add("files", 1);
  for (char* const word : args)
    if (std::string_view(word) == "--help" || std::string_view(word) == "-h") {
      std::cout << usage(encode ? "tokenizer encode" : "tokenizer decode",
                         encode ? "Prints the token ids of FILE (or stdin)."
                                : "Prints the text of the token ids in FILE (or stdin).",
                         options);
      return 0;
    }
  const auto variables = parse(args, options, &positional);
  stop_if_parse_only();
  std::vector<std::string> files;
  if (variables.count("files")) files = variables["files"].as<std::vector<std::string>>();
  const text::Tokenizer tokenizer = text::Tokenizer::load(tokenizer_name);
  const std::string input = read_input(files);
  if (encode) {
    const auto recognize = special ? text::SpecialTokens::kRecognize : text::SpecialTokens::kAsText;
    const auto add =
        add_special_tokens ? text::AddSpecialTokens::kYes : text::AddSpecialTokens::kNo;
    auto print = [&](std::string_view piece) {
      const auto ids = tokenizer.encode(piece, recognize, add);
      std::string line;
      for (std::size_t i = 0; i < ids.size(); ++i) {
        if (i) line.push_back(' ');
        line += std::to_string(ids[i]);
      }
      std::cout << line << "\n";
    };
    if (!variables.count("lines")) {
      print(input);
      return 0;
    }
    std::string_view rest = input;
    while (true) {
      const std::size_t newline = rest.find('\n');
      print(rest.substr(0, newline));
      if (newline == std::string_view::npos) break;
      rest.remove_prefix(newline + 1);
    }
    return 0;
  }
  std::vector<text::TokenId> ids;
  std::istringstream stream(input);
  std::string word;
  while (stream >> word) {
    std::size_t used = 0;
    unsigned long value = 0;
    try {
      value = std::stoul(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    ZERO_CHECK(used == word.size(), "'", word, "' is not a token id");
    ids.push_back(static_cast<text::TokenId>(value));
  }
  const std::string text = tokenizer.decode(ids);
  std::cout.write(text.data(), static_cast<std::streamsize>(text.size()));
  std::cout.flush();
  return 0;
}

}  // namespace

int run_tokenizer(std::span<char* const> args) {
  if (args.empty() || std::string_view(args[0]) == "--help" || std::string_view(args[0]) == "-h") {
    std::cout << kSummary;
    return args.empty() ? 2 : 0;
  }
  const std::string_view sub = args[0];
  const auto rest = args.subspan(1);
  if (sub == "train") return run_train(rest);
  if (sub == "encode") return run_codec(rest, true);
  if (sub == "decode") return run_codec(rest, false);
  const std::vector<std::string_view> names = {"train", "encode", "decode"};
  std::string message = "unknown subcommand '" + std::string(sub) + "'";
  if (auto nearest = nearest_name(sub, names)) message += "; did you mean '" + *nearest + "'?";
  throw UsageError{message + " (train, encode or decode)"};
}

}  // namespace zero::cli
