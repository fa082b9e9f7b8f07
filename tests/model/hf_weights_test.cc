// Streaming Hugging Face loads (zero/gpt2/hf_weights.h): a sharded checkpoint as transformers'
// save_pretrained(max_shard_size="200KB") writes it (tests/golden/hf_sharded_reference.py) loads
// bit for bit as the single file; any range of any unit reads as the whole load's slice; a missing
// shard, a missing tensor, a shape mismatch and a truncated file name the file and the tensor;
// reading through the mapping keeps the resident peak to one chunk (VmHWM). Where torch or
// transformers is absent the checkpoints come from zero's own writer: the reader's cases still
// run, and the case that reads transformers' files skips, naming what is missing (a skip fails
// CI: scripts/test.sh).
#include "zero/gpt2/hf_weights.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "../common/golden.h"
#include "../common/test_data.h"
#include "../common/tiny_gpt2.h"
#include "zero/checkpoint/safetensors.h"
#include "zero/core/error.h"
#include "zero/gpt2/checkpoint_hf.h"

namespace zero::gpt2 {
namespace {

using testing::error_of;
namespace fs = std::filesystem;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The checkpoints are written once for the suite (the script imports torch and transformers);
// each test breaks copies of them.
class HFWeightsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    folder_ = testing::scratch_dir("hf_weights");
    const int status =
        testing::run_golden_script("hf_sharded_reference.py", "--out \"" + folder_.string() + "\"");
    ASSERT_TRUE(status == 0 || status == 3) << "hf_sharded_reference.py exited " << status;
    written_by_transformers_ = status == 0;
    if (status == 3) {  // no torch/transformers: the same shapes, through our own writer
      const GPT2Config config = tiny_config(
          {.vocab_size = 250, .n_positions = 32, .n_embd = 64, .n_layer = 3, .n_head = 4});
      MemoryLedger ledger;
      HostAllocator allocator(ledger);
      GPT2Model model(config, allocator);
      model.init(5);
      save_hf_checkpoint(model, folder_ / "single");
      save_hf_checkpoint(model, folder_ / "sharded", {.max_shard_bytes = 200'000});
    }
    std::printf("  checkpoints written by %s\n",
                status == 0 ? "transformers' save_pretrained" : "zero's writer");
  }
  static void TearDownTestSuite() { fs::remove_all(folder_); }

  // A copy of the sharded checkpoint to break.
  static fs::path copy_sharded(const std::string& name) {
    fs::copy(folder_ / "sharded", folder_ / name);
    return folder_ / name;
  }

  static inline fs::path folder_;
  static inline bool written_by_transformers_ = false;
  MemoryLedger ledger_;
  HostAllocator allocator_{ledger_};
};

std::vector<std::string> shard_names(const fs::path& folder) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(folder))
    if (entry.path().filename().string().starts_with("model-"))
      names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST_F(HFWeightsTest, ShardedLoadEqualsTheSingleFileBitForBit) {
  if (!written_by_transformers_)
    GTEST_SKIP() << "torch/transformers not importable by ZERO_PYTHON (hf_sharded_reference.py "
                    "exit 3): transformers' sharded files were not read (the other cases ran on "
                    "zero's writer)";
  EXPECT_GE(shard_names(folder_ / "sharded").size(), 3u);
  EXPECT_TRUE(fs::exists(folder_ / "sharded" / "model.safetensors.index.json"));
  const GPT2Model single = load_hf_model(folder_ / "single", allocator_);
  const GPT2Model sharded = load_hf_model(folder_ / "sharded", allocator_);
  ASSERT_EQ(single.num_units(), sharded.num_units());
  for (int u = 0; u < single.num_units(); ++u) {
    ASSERT_EQ(std::memcmp(single.params(u).data(), sharded.params(u).data(),
                          single.params(u).size_bytes()),
              0)
        << single.units()[u].name;
  }
  // Not all zero or constant: the load read real values.
  const float* wte = single.param_data(0);
  EXPECT_NE(wte[0], wte[1]);
  EXPECT_EQ(HFWeights(folder_ / "sharded", single.config()).files().size(),
            shard_names(folder_ / "sharded").size());
}

// Every rank's shard of every unit, at several world sizes, reads as that slice of the whole
// load (wte's padded rows and the layout's tail padding zero).
TEST_F(HFWeightsTest, AnyRangeReadsAsTheWholeLoadsSlice) {
  const GPT2Model whole = load_hf_model(folder_ / "single", allocator_);
  const HFWeights weights(folder_ / "sharded", whole.config());
  for (int world : {1, 2, 3, 7, 64}) {  // at 64 ranks some shards hold only wte's padded rows
    for (int u = 0; u < whole.num_units(); ++u) {
      const FlatLayout layout(whole.units()[u].tensors, world, 16);
      for (int rank = 0; rank < world; ++rank) {
        const ElementRange range = layout.shard(rank);
        std::vector<float> values(range.size(), -1.0f);
        weights.read_unit(whole.units()[u], layout, range, values.data());
        for (std::size_t i = range.begin; i < range.end; ++i) {
          const float expected = i < layout.num_elements() ? whole.param_data(u)[i] : 0.0f;
          ASSERT_EQ(std::memcmp(&values[i - range.begin], &expected, 4), 0)
              << whole.units()[u].name << " world " << world << " rank " << rank << " element "
              << i;
        }
      }
    }
  }
}

// Rewrites <folder>/<shard> through `edit` (name, shape, bytes of each tensor; false drops it).
using TensorEdit = std::function<bool(const std::string& name, std::vector<std::int64_t>& shape)>;
void rewrite_shard(const fs::path& path, const TensorEdit& edit) {
  const SafetensorsReader original(path);
  SafetensorsWriter writer;
  for (const SafetensorsTensor& tensor : original.tensors()) {
    std::vector<std::int64_t> shape = tensor.shape;
    if (!edit(tensor.name, shape)) continue;
    writer.add(tensor.name, tensor.dtype, shape, original.data(tensor), tensor.end - tensor.begin);
  }
  writer.set_metadata("format", "pt");
  writer.write(path);
}

TEST_F(HFWeightsTest, BrokenShardsNameTheFileAndTheTensor) {
  const GPT2Config config = load_hf_config(folder_ / "sharded");
  const std::string second = shard_names(folder_ / "sharded")[1];
  const SafetensorsReader header(folder_ / "sharded" / second, false);
  const std::string tensor = header.tensors()[0].name;
  const std::string matrix =  // a tensor whose shape reversed is another shape
      std::find_if(header.tensors().begin(), header.tensors().end(),
                   [](const SafetensorsTensor& t) { return t.shape.size() == 2; })
          ->name;

  // A shard the index lists is missing.
  fs::path broken = copy_sharded("missing_shard");
  fs::remove(broken / second);
  std::string message = error_of([&] { HFWeights{broken, config}; });
  EXPECT_TRUE(contains(message, "model.safetensors.index.json lists shard '" + second + "'") &&
              contains(message, "does not exist") && contains(message, "(holding tensor '"))
      << message;

  // A tensor the index puts in a shard is not there.
  broken = copy_sharded("missing_tensor");
  rewrite_shard(broken / second, [&](const std::string& name, auto&) { return name != tensor; });
  message = error_of([&] { HFWeights{broken, config}; });
  EXPECT_TRUE(contains(message, "puts tensor '" + tensor + "' in " + (broken / second).string()) &&
              contains(message, "has no such tensor"))
      << message;
  // ... nor in the index: the checkpoint lacks it.
  {
    std::ifstream in(broken / "model.safetensors.index.json");
    std::string index((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::size_t line = index.find("\"" + tensor + "\"");
    ASSERT_NE(line, std::string::npos);
    index.erase(line, index.find('\n', line) + 1 - line);
    std::ofstream(broken / "model.safetensors.index.json") << index;
  }
  message = error_of([&] { HFWeights{broken, config}; });
  EXPECT_TRUE(contains(message, "lacks tensor '" + tensor + "'") &&
              contains(message, "model.safetensors.index.json"))
      << message;

  // A shape the config does not give.
  broken = copy_sharded("wrong_shape");
  rewrite_shard(broken / second, [&](const std::string& name, std::vector<std::int64_t>& shape) {
    if (name == matrix) std::reverse(shape.begin(), shape.end());
    return true;
  });
  message = error_of([&] { HFWeights{broken, config}; });
  EXPECT_TRUE(
      contains(message, (broken / second).string() + ": tensor '" + matrix + "' has shape") &&
      contains(message, "the config needs"))
      << message;

  // A truncated shard: its last tensor runs past the end of the file.
  broken = copy_sharded("truncated");
  const fs::path shard = broken / second;
  const SafetensorsReader whole(shard, false);
  const auto last = std::max_element(
      whole.tensors().begin(), whole.tensors().end(),
      [](const SafetensorsTensor& a, const SafetensorsTensor& b) { return a.end < b.end; });
  fs::resize_file(shard, fs::file_size(shard) - 100);
  message = error_of([&] { HFWeights{broken, config}; });
  EXPECT_TRUE(contains(message, shard.string()) &&
              contains(message, "tensor '" + last->name + "'") && contains(message, "truncated"))
      << message;
}

std::size_t status_kib(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.starts_with(field)) return std::stoul(line.substr(std::strlen(field)));
  return 0;
}

// The resident peak while reading a 48 MiB tensor through the mapping grows by at most one
// chunk of mapped pages, not the tensor (VmHWM reset through /proc/self/clear_refs).
TEST(SafetensorsStreaming, ReadingThroughTheMappingKeepsTheResidentPeakToOneChunk) {
  const fs::path folder = testing::scratch_dir("safetensors_streaming");
  const std::size_t count = 12u << 20;  // 48 MiB of fp32
  {
    std::vector<float> values(count);
    for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<float>(i % 1000) * 0.5f;
    SafetensorsStreamWriter writer(folder / "big.safetensors",
                                   {{"big", SafetensorsDType::kF32, {4, 3 << 20}}});
    writer.write("big", values.data(), count * sizeof(float));
    writer.finish();
  }
  std::vector<float> out(count, 1.0f);  // touched before the peak is reset
  const SafetensorsReader reader(folder / "big.safetensors", /*load_data=*/false);
  if (!(std::ofstream("/proc/self/clear_refs") << "5").flush()) {
    fs::remove_all(folder);
    GTEST_SKIP() << "cannot reset VmHWM through /proc/self/clear_refs";
  }
  const std::size_t before_kib = status_kib("VmRSS:");
  reader.read_float(reader.tensor("big"), 0, count, out.data());
  const std::size_t peak_kib = status_kib("VmHWM:");
  const std::size_t growth = (peak_kib - std::min(peak_kib, before_kib)) << 10;
  std::printf("  resident peak growth reading %zu MiB: %.1f MiB (chunk %zu MiB)\n", count * 4 >> 20,
              growth / 1048576.0, SafetensorsReader::kStreamChunkBytes >> 20);
  EXPECT_LE(growth, SafetensorsReader::kStreamChunkBytes + (4u << 20));
  for (std::size_t i = 0; i < count; i += 4093)
    ASSERT_EQ(out[i], static_cast<float>(i % 1000) * 0.5f) << i;
  // A range inside the tensor, converted from the same mapping.
  std::vector<float> part(1000);
  reader.read_float(reader.tensor("big"), 123'456, part.size(), part.data());
  for (std::size_t i = 0; i < part.size(); ++i)
    ASSERT_EQ(part[i], static_cast<float>((123'456 + i) % 1000) * 0.5f);
  EXPECT_TRUE(
      contains(error_of([&] { reader.read_float(reader.tensor("big"), count, 1, out.data()); }),
               "outside tensor 'big'"));
  fs::remove_all(folder);
}

}  // namespace
}  // namespace zero::gpt2
