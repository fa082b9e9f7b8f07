// run_clm's datasets: the validation split by percentage and group_texts' fixed-length blocks.
#include "zero/text/lm_dataset.h"

#include <sstream>

#include "zero/core/error.h"
#include "zero/core/logging.h"

namespace zero::text {

namespace fs = std::filesystem;

BlockDataset::BlockDataset(std::shared_ptr<const TokenStream> stream,
                           std::vector<std::uint64_t> block_starts, std::size_t block_size)
    : stream_(std::move(stream)), starts_(std::move(block_starts)), block_size_(block_size) {
  ZERO_CHECK(block_size_ > 0, "block_size must be positive");
  for (std::uint64_t start : starts_)
    ZERO_CHECK(start + block_size_ <= stream_->tokens().size(), "block at token ", start,
               " runs past the stream's ", stream_->tokens().size(), " tokens");
}

std::span<const TokenId> BlockDataset::block(std::size_t index) const {
  ZERO_CHECK(index < starts_.size(), "block ", index, " of a dataset of ", starts_.size());
  return stream_->tokens().subspan(starts_[index], block_size_);
}

BlockDataset group_texts(std::shared_ptr<const TokenStream> stream, std::size_t first_example,
                         std::size_t last_example, std::size_t block_size,
                         std::size_t group_examples) {
  ZERO_CHECK(block_size > 0, "block_size must be positive");
  ZERO_CHECK(first_example <= last_example && last_example <= stream->num_examples(),
             "example range [", first_example, ", ", last_example, ") outside the stream's ",
             stream->num_examples(), " examples");
  const auto offsets = stream->example_offsets();
  const std::size_t group =
      group_examples == 0 ? std::max<std::size_t>(1, last_example - first_example) : group_examples;
  std::vector<std::uint64_t> starts;
  for (std::size_t begin = first_example; begin < last_example; begin += group) {
    const std::size_t end = std::min(last_example, begin + group);
    const std::uint64_t first_token = offsets[begin];
    const std::uint64_t num_blocks = (offsets[end] - first_token) / block_size;
    for (std::uint64_t b = 0; b < num_blocks; ++b) starts.push_back(first_token + b * block_size);
  }
  return BlockDataset(std::move(stream), std::move(starts), block_size);
}

std::size_t percent_boundary(std::size_t num_examples, int percent) {
  ZERO_CHECK(percent >= 0 && percent <= 100,
             "validation_split_percentage must be in [0, 100], got ", percent);
  const std::uint64_t scaled =
      static_cast<std::uint64_t>(num_examples) * static_cast<unsigned>(percent);
  auto quotient = static_cast<std::size_t>(scaled / 100);
  const auto remainder = static_cast<unsigned>(scaled % 100);
  if (remainder > 50 || (remainder == 50 && quotient % 2 == 1)) ++quotient;
  return quotient;
}

namespace {

std::string describe(const std::vector<fs::path>& files) {
  std::ostringstream out;
  for (std::size_t i = 0; i < files.size(); ++i) out << (i ? ", " : "") << files[i].string();
  return out.str();
}

void require_blocks(const BlockDataset& blocks, const TokenStream& stream, std::string_view data,
                    const char* split, std::size_t block_size) {
  ZERO_CHECK(
      blocks.size() > 0, "the ", split, " data (", data, ") is shorter than one ",
      "block: ", stream.tokens().size(), " tokens in ", stream.num_examples(),
      " examples give no full block of block_size ", block_size,
      " (group_texts drops each group's remainder); use a smaller --block_size or more text");
}

}  // namespace

LmDatasets split_lm_datasets(std::shared_ptr<const TokenStream> train,
                             std::shared_ptr<const TokenStream> validation,
                             const DataArguments& arguments, std::string_view train_name,
                             std::string_view validation_name) {
  ZERO_CHECK(train != nullptr, "no train data given");
  LmDatasets datasets;
  if (validation != nullptr) {
    datasets.train = group_texts(train, 0, train->num_examples(), arguments.block_size,
                                 arguments.group_examples);
    datasets.validation = group_texts(validation, 0, validation->num_examples(),
                                      arguments.block_size, arguments.group_examples);
    require_blocks(datasets.validation, *validation, validation_name, "validation",
                   arguments.block_size);
  } else {
    const std::size_t boundary =
        percent_boundary(train->num_examples(), arguments.validation_split_percentage);
    datasets.validation =
        group_texts(train, 0, boundary, arguments.block_size, arguments.group_examples);
    datasets.train = group_texts(train, boundary, train->num_examples(), arguments.block_size,
                                 arguments.group_examples);
    if (arguments.validation_split_percentage > 0 && datasets.validation.size() == 0)
      log_warning("the validation split (first ", arguments.validation_split_percentage,
                  "% = ", boundary, " examples) has no full block of ", arguments.block_size,
                  " tokens");
  }
  require_blocks(datasets.train, *train, train_name, "train", arguments.block_size);
  log_info("data: ", datasets.train.size(), " train blocks and ", datasets.validation.size(),
           " validation blocks of ", arguments.block_size, " tokens");
  return datasets;
}

LmDatasets load_lm_datasets(const Tokenizer& tokenizer, const DataArguments& arguments) {
  ZERO_CHECK(!arguments.train_files.empty(), "no train files given (--train_file)");
  auto load = [&](const std::vector<fs::path>& files) {
    return std::make_shared<const TokenStream>(load_token_stream(
        files, tokenizer, arguments.cache_dir, arguments.tokenize, arguments.overwrite_cache));
  };
  auto train = load(arguments.train_files);  // before the validation files, as run_clm
  auto validation = arguments.validation_files.empty() ? nullptr : load(arguments.validation_files);
  return split_lm_datasets(std::move(train), std::move(validation), arguments,
                           describe(arguments.train_files), describe(arguments.validation_files));
}

}  // namespace zero::text
