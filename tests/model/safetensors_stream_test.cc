// The streaming safetensors writer (header up front, tensors appended in order, fsync + rename)
// and the Hugging Face model saved one unit at a time: the same bytes as the whole-buffer
// algorithm (each file built in memory, header + data), single, sharded and 16-bit, for the LM
// and the classifier; bad use and failed writes named.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>

#include "../common/test_data.h"
#include "../common/tiny_gpt2.h"
#include "zero/checkpoint/safetensors.h"
#include "zero/core/error.h"
#include "zero/gpt2/checkpoint_hf.h"
#include "zero/gpt2/classifier.h"

namespace zero::gpt2 {
namespace {

using testing::error_of;
using testing::read_bytes;

namespace fs = std::filesystem;

std::string in_memory_bytes(const SafetensorsWriter& writer) {
  const std::vector<std::byte>& data = writer.data_bytes();
  return writer.header_bytes() +
         std::string(reinterpret_cast<const char*>(data.data()), data.size());
}

class StreamWriter : public ::testing::Test {
 protected:
  fs::path folder_ = testing::scratch_dir("safetensors_stream");
  void TearDown() override { fs::remove_all(folder_); }
};

TEST_F(StreamWriter, PiecesInHeaderOrderGiveTheWholeBufferBytes) {
  std::vector<float> big(700'000);  // over the staging chunk: written past the buffer
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i) * 0.25f - 3.0f;
  const std::vector<float> small = {1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, 65504.0f};
  SafetensorsWriter whole;
  whole.add_float("small", DType::kFloat32, {2, 3}, small.data());
  whole.add("empty", SafetensorsDType::kF32, {0, 4}, nullptr, 0);
  whole.add_float("big.bf16", DType::kBFloat16, {700, 1000}, big.data());
  whole.add_float("big", DType::kFloat32, {700'000}, big.data());
  whole.add_float("half", DType::kFloat16, {6}, small.data());
  whole.set_metadata("format", "pt");

  SafetensorsStreamWriter stream(folder_ / "s.safetensors",
                                 {{"small", SafetensorsDType::kF32, {2, 3}},
                                  {"empty", SafetensorsDType::kF32, {0, 4}},
                                  {"big.bf16", SafetensorsDType::kBF16, {700, 1000}},
                                  {"big", SafetensorsDType::kF32, {700'000}},
                                  {"half", SafetensorsDType::kF16, {6}}},
                                 {{"format", "pt"}});
  stream.write("small", small.data(), 8);  // in pieces
  stream.write("small", small.data() + 2, 16);
  stream.write_converted("big.bf16", big.data(), DType::kFloat32, 300'000);
  stream.write_converted("big.bf16", big.data() + 300'000, DType::kFloat32, 400'000);
  stream.write_converted("big", big.data(), DType::kFloat32, big.size());
  stream.write_converted("half", small.data(), DType::kFloat32, small.size());
  EXPECT_FALSE(fs::exists(folder_ / "s.safetensors"));  // visible only when finished
  stream.finish();
  EXPECT_EQ(stream.file_size_bytes(), fs::file_size(folder_ / "s.safetensors"));
  EXPECT_FALSE(fs::exists(folder_ / "s.safetensors.tmp"));
  EXPECT_EQ(read_bytes(folder_ / "s.safetensors"), in_memory_bytes(whole));
  whole.write(folder_ / "w.safetensors");  // the whole-buffer writer goes through the stream
  EXPECT_EQ(read_bytes(folder_ / "w.safetensors"), in_memory_bytes(whole));
}

TEST_F(StreamWriter, MisuseIsNamedAndAnUnfinishedFileLeavesTheOldOne) {
  const fs::path path = folder_ / "m.safetensors";
  { std::ofstream(path) << "old"; }
  const std::vector<float> values(8, 1.0f);
  {
    SafetensorsStreamWriter stream(
        path, {{"a", SafetensorsDType::kF32, {4}}, {"b", SafetensorsDType::kF32, {4}}});
    EXPECT_NE(error_of([&] {
                stream.write("b", values.data(), 16);
              }).find("tensor 'b' written while 'a' (header position 0) is incomplete"),
              std::string::npos);
    EXPECT_NE(error_of([&] {
                stream.write("a", values.data(), 20);
              }).find("tensor 'a' given 20 bytes, its dtype and shape hold 16"),
              std::string::npos);
    stream.write("a", values.data(), 16);
    EXPECT_NE(error_of([&] {
                stream.finish();
              }).find("finished with tensor 'b' at 0 of 16 bytes (1 of 2 tensors incomplete)"),
              std::string::npos);
    EXPECT_TRUE(fs::exists(path.string() + ".tmp"));
  }
  EXPECT_FALSE(fs::exists(path.string() + ".tmp"));  // removed by the destructor
  EXPECT_EQ(read_bytes(path), "old");
  EXPECT_NE(error_of([&] {
              SafetensorsStreamWriter(
                  path, {{"a", SafetensorsDType::kF32, {4}}, {"a", SafetensorsDType::kF32, {4}}});
            }).find("tensor 'a' added twice"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              SafetensorsStreamWriter(folder_ / "no" / "x.safetensors", {});
            }).find("cannot create safetensors file"),
            std::string::npos);
}

// A write the filesystem refuses (here the file-size limit) names the file and the byte range.
TEST_F(StreamWriter, FailedWriteNamesTheFileAndByteRange) {
  struct rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = signal(SIGXFSZ, SIG_IGN);
  struct rlimit limited = saved;
  limited.rlim_cur = 1 << 20;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limited), 0);
  const std::vector<float> values(1 << 19);  // 2 MiB
  std::string error;
  {
    SafetensorsStreamWriter stream(folder_ / "f.safetensors",
                                   {{"x", SafetensorsDType::kF32, {1 << 19}}});
    error = error_of([&] { stream.write("x", values.data(), values.size() * 4); });
  }
  setrlimit(RLIMIT_FSIZE, &saved);
  signal(SIGXFSZ, old_handler);
  EXPECT_NE(error.find("f.safetensors.tmp failed"), std::string::npos) << error;
  EXPECT_NE(error.find("writing bytes ["), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(folder_ / "f.safetensors"));
  EXPECT_FALSE(fs::exists(folder_ / "f.safetensors.tmp"));
}

// The files save_hf_checkpoint writes, each built whole in memory: huggingface_hub's split (a
// tensor larger than max_shard_bytes alone in a shard numbered when met; else a new shard when the
// next tensor would take the current one past the limit), model.safetensors for one shard.
std::map<std::string, std::string> whole_buffer_files(const GPT2Model& model, SaveOptions options,
                                                      const std::vector<float>& score = {},
                                                      std::int64_t labels = 0) {
  std::vector<SafetensorsWriter> shards;
  std::vector<std::vector<std::string>> names;
  SafetensorsWriter current;
  std::vector<std::string> current_names;
  auto close_current = [&] {
    if (current_names.empty()) return;
    shards.push_back(std::move(current));
    names.push_back(std::move(current_names));
    current = SafetensorsWriter();
    current_names.clear();
  };
  auto add = [&](const std::string& name, std::vector<std::int64_t> shape, const float* values) {
    std::size_t count = 1;
    for (std::int64_t dimension : shape) count *= static_cast<std::size_t>(dimension);
    const std::size_t bytes = count * size_of(options.dtype);
    const std::size_t limit = options.max_shard_bytes;
    if (limit > 0 && bytes > limit) {
      shards.emplace_back().add_float(name, options.dtype, shape, values);
      names.push_back({name});
      return;
    }
    if (limit > 0 && current.data_size_bytes() + bytes > limit) close_current();
    current.add_float(name, options.dtype, shape, values);
    current_names.push_back(name);
  };
  for (int u = 0; u < model.num_units(); ++u)
    for (const TensorSlot& slot : model.params(u).layout().slots()) {
      std::vector<std::int64_t> shape = slot.shape;
      if (slot.name == "wte.weight") shape[0] = model.config().vocab_size;
      add(hf_tensor_name(model.units()[u], slot.name), shape,
          model.param_data(u) + slot.offset_elements);
    }
  if (!score.empty()) add(kScoreTensorName, {labels, model.config().n_embd}, score.data());
  close_current();
  std::map<std::string, std::string> files;
  if (shards.size() == 1) {
    shards[0].set_metadata("format", "pt");
    files["model.safetensors"] = in_memory_bytes(shards[0]);
    return files;
  }
  nlohmann::json index;  // keys sorted, as save_pretrained's json.dumps(sort_keys=True)
  std::size_t total = 0;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    char file[64];
    std::snprintf(file, sizeof(file), "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    shards[i].set_metadata("format", "pt");
    files[file] = in_memory_bytes(shards[i]);
    total += shards[i].data_size_bytes();
    for (const std::string& name : names[i]) index["weight_map"][name] = file;
  }
  index["metadata"]["total_size"] = total;
  files["model.safetensors.index.json"] = index.dump(2) + "\n";
  return files;
}

class StreamedModel : public ::testing::Test {
 protected:
  fs::path folder_ = testing::scratch_dir("hf_streamed");
  void TearDown() override { fs::remove_all(folder_); }
  MemoryLedger ledger_;
  HostAllocator allocator_{ledger_};
};

void expect_files(const fs::path& folder, const std::map<std::string, std::string>& expected) {
  std::size_t weight_files = 0;
  for (const auto& entry : fs::directory_iterator(folder))
    weight_files += entry.path().filename() != "config.json" ? 1 : 0;
  EXPECT_EQ(weight_files, expected.size()) << folder;
  for (const auto& [name, bytes] : expected)
    EXPECT_TRUE(read_bytes(folder / name) == bytes) << folder / name;
}

TEST_F(StreamedModel, UnitByUnitGivesTheWholeBufferFiles) {
  GPT2Model model(tiny_config(), allocator_);
  model.init(21);
  int asked = 0;
  const UnitSource source = [&](int unit, const UnitSink& sink) {
    EXPECT_EQ(unit, asked++);  // in order, once each
    const std::vector<float> copy(model.param_data(unit),
                                  model.param_data(unit) + model.units()[unit].num_elements());
    sink(copy.data(), DType::kFloat32);  // valid only during the call
  };
  for (const SaveOptions options :
       {SaveOptions{}, SaveOptions{.max_shard_bytes = 0}, SaveOptions{.max_shard_bytes = 8192},
        SaveOptions{.dtype = DType::kBFloat16, .max_shard_bytes = 4096},
        SaveOptions{.dtype = DType::kFloat16}}) {
    const fs::path folder =
        folder_ / std::to_string(options.max_shard_bytes + 7 * static_cast<int>(options.dtype));
    asked = 0;
    save_hf_checkpoint(model.config(), source, folder, options);
    EXPECT_EQ(asked, model.num_units());
    expect_files(folder, whole_buffer_files(model, options));
    save_hf_checkpoint(model, folder / "whole", options);
    fs::remove(folder / "whole" / "config.json");
    expect_files(folder / "whole", whole_buffer_files(model, options));
  }
}

// 16-bit units (the engine's compute copy) widened on the way equal the fp32 model holding the
// widened values.
TEST_F(StreamedModel, SixteenBitUnitsEqualTheirWidenedModel) {
  GPT2Model model(tiny_config(), allocator_);
  model.init(22);
  std::vector<std::vector<std::uint16_t>> narrow(static_cast<std::size_t>(model.num_units()));
  for (int u = 0; u < model.num_units(); ++u) {
    const std::size_t count = model.units()[u].num_elements();
    narrow[u].resize(count);
    convert(model.param_data(u), DType::kFloat32, narrow[u].data(), DType::kBFloat16, count);
    convert(narrow[u].data(), DType::kBFloat16, model.param_data(u), DType::kFloat32, count);
  }
  save_hf_checkpoint(
      model.config(),
      [&](int unit, const UnitSink& sink) { sink(narrow[unit].data(), DType::kBFloat16); },
      folder_ / "bf16");
  expect_files(folder_ / "bf16", whole_buffer_files(model, {}));
}

TEST_F(StreamedModel, ClassifierAndBadSources) {
  GPT2Model model(tiny_config(), allocator_);
  model.init(23);
  ClassifierConfig head;
  head.num_labels = 3;
  head.pad_token_id = 0;
  std::vector<float> score(3 * 24);
  for (std::size_t i = 0; i < score.size(); ++i) score[i] = 0.01f * static_cast<float>(i);
  save_classifier_checkpoint(model, head, score, folder_ / "c");
  expect_files(folder_ / "c", whole_buffer_files(model, {}, score, 3));
  EXPECT_NE(error_of([&] {
              save_hf_checkpoint(
                  model.config(), [](int, const UnitSink&) {}, folder_ / "none");
            }).find("the unit source gave no values for unit 'embeddings'"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(folder_ / "none" / "model.safetensors"));
  EXPECT_FALSE(fs::exists(folder_ / "none" / "model.safetensors.tmp"));
}

}  // namespace
}  // namespace zero::gpt2
