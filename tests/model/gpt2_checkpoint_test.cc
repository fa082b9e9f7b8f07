// Safetensors reader/writer (round trip, dtypes, malformed files) and Hugging Face checkpoints
// (save -> load -> save bit-identical, sharded with an index, fp16/bf16 storage, clear errors).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>

#include "../common/test_data.h"
#include "../common/tiny_gpt2.h"
#include "zero/checkpoint/safetensors.h"
#include "zero/core/error.h"
#include "zero/gpt2/checkpoint_hf.h"

namespace zero::gpt2 {
namespace {

using testing::error_of;
using testing::read_bytes;

namespace fs = std::filesystem;

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream stream(path, std::ios::binary | std::ios::trunc);
  stream.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A file with the given header text and `data_bytes` zero bytes of data.
void write_raw(const fs::path& path, const std::string& header, std::size_t data_bytes,
               std::uint64_t size_field = 0) {
  std::string bytes(8, '\0');
  const std::uint64_t size = size_field != 0 ? size_field : header.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(size >> (8 * i));
  write_bytes(path, bytes + header + std::string(data_bytes, '\0'));
}

class Safetensors : public ::testing::Test {
 protected:
  fs::path folder_ = testing::scratch_dir("gpt2_safetensors");
  void TearDown() override { fs::remove_all(folder_); }
};

TEST_F(Safetensors, RoundTripAllDtypes) {
  SafetensorsWriter writer;
  const std::vector<float> values = {1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, 65504.0f};
  writer.add_float("a.f32", DType::kFloat32, {2, 3}, values.data());
  writer.add_float("a.f16", DType::kFloat16, {6}, values.data());
  writer.add_float("a.bf16", DType::kBFloat16, {3, 2}, values.data());
  const std::vector<std::int32_t> ints = {1, -2, 3};
  writer.add("i32", SafetensorsDType::kI32, {3}, ints.data(), 12);
  writer.add("empty", SafetensorsDType::kF32, {0, 4}, nullptr, 0);
  writer.set_metadata("format", "pt");
  writer.write(folder_ / "t.safetensors");

  const SafetensorsReader reader(folder_ / "t.safetensors");
  EXPECT_EQ(reader.metadata().at("format"), "pt");
  EXPECT_EQ(reader.read_float("a.f32"), values);
  const auto f16 = reader.read_float("a.f16");
  const auto bf16 = reader.read_float("a.bf16");
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_NEAR(f16[i], values[i], std::abs(values[i]) * 1e-3);
    EXPECT_NEAR(bf16[i], values[i], std::abs(values[i]) * 1e-2);
  }
  EXPECT_EQ(reader.read_int("i32"), (std::vector<std::int64_t>{1, -2, 3}));
  EXPECT_EQ(reader.tensor("empty").num_elements(), 0u);
  EXPECT_NE(error_of([&] { reader.tensor("nope"); }).find("has no tensor 'nope'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { reader.read_float("i32"); }).find("not a floating-point"),
            std::string::npos);
  // Header is padded to a multiple of 8 bytes.
  const std::string bytes = read_bytes(folder_ / "t.safetensors");
  std::uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);
  EXPECT_EQ(header_size % 8, 0u);
  EXPECT_NE(error_of([&] {
              writer.add_float("a.f32", DType::kFloat32, {1}, values.data());
            }).find("added twice"),
            std::string::npos);
}

TEST_F(Safetensors, MalformedFilesGiveClearErrors) {
  const fs::path file = folder_ / "bad.safetensors";
  write_bytes(file, "abc");
  EXPECT_NE(error_of([&] { SafetensorsReader{file}; }).find("truncated"), std::string::npos);

  write_raw(file, "{}", 0, std::uint64_t(1) << 40);
  EXPECT_NE(error_of([&] { SafetensorsReader{file}; }).find("exceeds"), std::string::npos);

  write_raw(file, "{}", 0, 1000);
  EXPECT_NE(error_of([&] { SafetensorsReader{file}; }).find("truncated"), std::string::npos);

  write_raw(file, "{not json", 0);
  EXPECT_NE(error_of([&] { SafetensorsReader{file}; }).find("not valid JSON"), std::string::npos);

  write_raw(file, R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8);
  std::string message = error_of([&] { SafetensorsReader{file}; });
  EXPECT_NE(message.find("past the data section"), std::string::npos) << message;

  write_raw(file, R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,12]}})", 16);
  message = error_of([&] { SafetensorsReader{file}; });
  EXPECT_NE(message.find("need 16"), std::string::npos) << message;

  write_raw(file, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 16);
  message = error_of([&] { SafetensorsReader{file}; });
  EXPECT_NE(message.find("inconsistent"), std::string::npos) << message;

  write_raw(
      file,
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      16);
  message = error_of([&] { SafetensorsReader{file}; });
  EXPECT_NE(message.find("overlap"), std::string::npos) << message;

  write_raw(file, R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", 8);
  message = error_of([&] { SafetensorsReader{file}; });
  EXPECT_NE(message.find("unsupported dtype 'Q4'"), std::string::npos) << message;

  write_raw(file, R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8);
  message = error_of([&] { SafetensorsReader{file}; });
  EXPECT_NE(message.find("bad dimension"), std::string::npos) << message;
}

// The shapes below ({61, 16}, {16, 48}) and the shard count follow from these sizes.
constexpr TinySizes kSizes{
    .vocab_size = 61, .n_positions = 8, .n_embd = 16, .n_layer = 2, .n_head = 2};

class HFCheckpoint : public Safetensors {
 protected:
  MemoryLedger ledger_;
  HostAllocator allocator_{ledger_};
};

void expect_same_params(const GPT2Model& a, const GPT2Model& b) {
  ASSERT_EQ(a.num_units(), b.num_units());
  for (int u = 0; u < a.num_units(); ++u)
    ASSERT_EQ(std::memcmp(a.params(u).data(), b.params(u).data(), a.params(u).size_bytes()), 0)
        << a.units()[u].name;
}

TEST_F(HFCheckpoint, SaveLoadSaveIsBitIdentical) {
  GPT2Model model(tiny_config(kSizes), allocator_);
  model.init(11);
  save_hf_checkpoint(model, folder_ / "a");
  GPT2Model loaded = load_hf_model(folder_ / "a", allocator_);
  expect_same_params(model, loaded);
  save_hf_checkpoint(loaded, folder_ / "b");
  EXPECT_EQ(read_bytes(folder_ / "a" / "model.safetensors"),
            read_bytes(folder_ / "b" / "model.safetensors"));
  EXPECT_EQ(read_bytes(folder_ / "a" / "config.json"), read_bytes(folder_ / "b" / "config.json"));
  const SafetensorsReader reader(folder_ / "a" / "model.safetensors");
  EXPECT_EQ(reader.tensor("transformer.wte.weight").shape, (std::vector<std::int64_t>{61, 16}));
  EXPECT_EQ(reader.tensor("transformer.h.1.attn.c_attn.weight").shape,
            (std::vector<std::int64_t>{16, 48}));
  EXPECT_EQ(reader.metadata().at("format"), "pt");
}

TEST_F(HFCheckpoint, ShardedWithIndex) {
  GPT2Model model(tiny_config(kSizes), allocator_);
  model.init(12);
  save_hf_checkpoint(model, folder_ / "s", {.max_shard_bytes = 8192});
  EXPECT_TRUE(fs::exists(folder_ / "s" / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(folder_ / "s" / "model.safetensors"));
  int shards = 0;
  for (const auto& entry : fs::directory_iterator(folder_ / "s"))
    shards += entry.path().filename().string().starts_with("model-00") ? 1 : 0;
  EXPECT_GT(shards, 2);
  const std::string first = "model-00001-of-" +
                            std::string(5 - std::to_string(shards).size(), '0') +
                            std::to_string(shards) + ".safetensors";
  EXPECT_TRUE(fs::exists(folder_ / "s" / first)) << first;
  GPT2Model loaded = load_hf_model(folder_ / "s", allocator_);
  expect_same_params(model, loaded);
}

TEST_F(HFCheckpoint, HalfPrecisionStorage) {
  GPT2Model model(tiny_config(kSizes), allocator_);
  model.init(13);
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    save_hf_checkpoint(model, folder_ / "h", {.dtype = dtype});
    GPT2Model loaded = load_hf_model(folder_ / "h", allocator_);
    for (int u = 0; u < model.num_units(); ++u)
      for (std::size_t i = 0; i < model.params(u).layout().num_elements(); ++i) {
        const float expected = model.param_data(u)[i];
        ASSERT_NEAR(loaded.param_data(u)[i], expected, std::abs(expected) * 1e-2 + 1e-6);
      }
    // A half-precision checkpoint saved again in the same dtype is bit-identical.
    save_hf_checkpoint(loaded, folder_ / "h2", {.dtype = dtype});
    EXPECT_EQ(read_bytes(folder_ / "h" / "model.safetensors"),
              read_bytes(folder_ / "h2" / "model.safetensors"));
  }
}

TEST_F(HFCheckpoint, AcceptsGPT2ModelNamesAndReportsProblems) {
  GPT2Model model(tiny_config(kSizes), allocator_);
  model.init(14);
  save_hf_checkpoint(model, folder_ / "a");
  // Rewrite with GPT2Model names (no "transformer." prefix), an attn.bias buffer and lm_head.
  const SafetensorsReader original(folder_ / "a" / "model.safetensors");
  SafetensorsWriter renamed, missing, wrong_shape, extra;
  for (const SafetensorsTensor& tensor : original.tensors()) {
    const std::size_t bytes = tensor.end - tensor.begin;
    renamed.add(tensor.name.substr(std::strlen("transformer.")), tensor.dtype, tensor.shape,
                original.data(tensor), bytes);
    extra.add(tensor.name, tensor.dtype, tensor.shape, original.data(tensor), bytes);
    if (tensor.name == "transformer.ln_f.bias") continue;
    missing.add(tensor.name, tensor.dtype, tensor.shape, original.data(tensor), bytes);
    if (tensor.name == "transformer.wpe.weight") {
      std::vector<std::int64_t> shape = {tensor.shape[1], tensor.shape[0]};
      wrong_shape.add(tensor.name, tensor.dtype, shape, original.data(tensor), bytes);
    } else {
      wrong_shape.add(tensor.name, tensor.dtype, tensor.shape, original.data(tensor), bytes);
    }
  }
  const std::vector<float> mask(64, 1.0f);
  renamed.add_float("h.0.attn.bias", DType::kFloat32, {1, 1, 8, 8}, mask.data());
  renamed.add("lm_head.weight", SafetensorsDType::kF32,
              original.tensor("transformer.wte.weight").shape,
              original.data(original.tensor("transformer.wte.weight")),
              original.tensor("transformer.wte.weight").end -
                  original.tensor("transformer.wte.weight").begin);
  extra.add_float("transformer.h.7.mlp.c_fc.bias", DType::kFloat32, {4}, mask.data());

  auto with_weights = [&](const SafetensorsWriter& writer, const char* name) {
    fs::create_directories(folder_ / name);
    fs::copy_file(folder_ / "a" / "config.json", folder_ / name / "config.json");
    writer.write(folder_ / name / "model.safetensors");
    return folder_ / name;
  };
  GPT2Model loaded = load_hf_model(with_weights(renamed, "renamed"), allocator_);
  expect_same_params(model, loaded);
  std::string message =
      error_of([&] { load_hf_model(with_weights(missing, "missing"), allocator_); });
  EXPECT_NE(message.find("lacks tensor 'transformer.ln_f.bias'"), std::string::npos) << message;
  message = error_of([&] { load_hf_model(with_weights(wrong_shape, "shape"), allocator_); });
  EXPECT_NE(message.find("has shape (16, 8), the config needs (8, 16)"), std::string::npos)
      << message;
  message = error_of([&] { load_hf_model(with_weights(extra, "extra"), allocator_); });
  EXPECT_NE(message.find("unexpected tensor 'transformer.h.7.mlp.c_fc.bias'"), std::string::npos)
      << message;
  message = error_of([&] { load_hf_model(folder_ / "nothing", allocator_); });
  EXPECT_NE(message.find("config"), std::string::npos) << message;
}

}  // namespace
}  // namespace zero::gpt2
