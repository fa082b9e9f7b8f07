// The resident peak and time of loading a Hugging Face GPT-2 checkpoint into a ZeRO engine's
// partitions, per rank: `stream` (what zero train does: gpt2::load_hf_partitions, each rank reading
// its partition of each tensor through the mapped files) against `whole` (the load before it, kept
// here as the baseline: every rank reads each weight file whole into memory, builds the whole fp32
// model and copies its shards out). The engine (AdamW, fp32, the given stage) and a one-row
// micro-batch are built first; VmHWM is then reset (/proc/self/clear_refs) and read after the load.
// Prints per rank: resident before the load, peak during it, the rise, seconds.
// Run by hand, never as a test (a checkpoint: save_pretrained of transformers' GPT2LMHeadModel):
//   export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
//   export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_vader_single_copy_mechanism=none
//   OMP_NUM_THREADS=1 mpirun --oversubscribe --bind-to none -np 2 \
//     build/benchmarks/hf_load_bench FOLDER --stage 3 --method stream
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zero/checkpoint/safetensors.h"
#include "zero/comm/communicator.h"
#include "zero/core/allocator.h"
#include "zero/core/error.h"
#include "zero/core/memory_ledger.h"
#include "zero/engine/engine.h"
#include "zero/factory/engine_factory.h"
#include "zero/gpt2/checkpoint_hf.h"
#include "zero/gpt2/engine_model.h"
#include "zero/gpt2/hf_weights.h"
#include "zero/gpt2/model.h"

namespace {

namespace fs = std::filesystem;

double status_mib(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.starts_with(field)) return std::stod(line.substr(std::strlen(field))) / 1024.0;
  return 0.0;
}

// The load before streaming: each file read whole, the whole model built, its shards copied out.
void load_whole(zero::gpt2::EngineModel& model, const fs::path& folder) {
  zero::MemoryLedger ledger;
  zero::HostAllocator allocator(ledger);
  zero::gpt2::GPT2Model whole(model.config(), allocator);
  std::map<std::string, float*> places;
  for (int u = 0; u < whole.num_units(); ++u)
    for (const zero::TensorSlot& slot : whole.params(u).layout().slots())
      places[zero::gpt2::hf_tensor_name(whole.units()[u], slot.name)] =
          whole.param_data(u) + slot.offset_elements;
  for (const fs::path& file : zero::gpt2::hf_weight_files(folder)) {
    const zero::SafetensorsReader reader(file, /*load_data=*/true);
    for (const zero::SafetensorsTensor& tensor : reader.tensors()) {
      const std::string name =
          tensor.name.starts_with("transformer.") ? tensor.name : "transformer." + tensor.name;
      const auto place = places.find(name);
      if (place != places.end()) reader.read_float(tensor.name, place->second);
    }
  }
  zero::Engine& engine = model.engine();
  for (zero::ShardState& shard : engine.shard_states()) {
    const zero::UnitId id = engine.unit(shard.unit);
    int u = 0;
    while (model.units()[static_cast<std::size_t>(u)] != id) ++u;
    const float* source = whole.param_data(u);
    std::copy(source + shard.range.begin, source + shard.range.end, shard.params.begin());
  }
  engine.refresh_params();
}

int run(zero::Communicator& comm, const fs::path& folder, int stage, const std::string& method) {
  ZERO_CHECK(method == "stream" || method == "whole", "--method is stream or whole, not ", method);
  const zero::gpt2::GPT2Config config = zero::gpt2::load_hf_config(folder);
  zero::EngineOptions options;
  options.stage = stage;
  std::unique_ptr<zero::Engine> engine = zero::make_engine(options, comm);
  zero::MemoryLedger ledger;
  zero::HostAllocator activations(ledger);
  zero::gpt2::EngineModel model(*engine, config, 1, 8, 1, activations);
  engine->average_across_ranks(0.0);
  std::ofstream("/proc/self/clear_refs") << "5";
  const double before = status_mib("VmRSS:");
  const auto start = std::chrono::steady_clock::now();
  if (method == "stream") {
    const zero::gpt2::HFWeights weights(folder, config);
    zero::gpt2::load_hf_partitions(*engine, model.units(), weights);
  } else {
    load_whole(model, folder);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double peak = status_mib("VmHWM:");
  float mine[4] = {static_cast<float>(before), static_cast<float>(peak),
                   static_cast<float>(peak - before), static_cast<float>(seconds)};
  std::vector<float> all(4 * static_cast<std::size_t>(comm.world_size()));
  comm.all_gather(mine, all.data(), 4, zero::DType::kFloat32, "load peaks");
  comm.synchronize();  // the collective runs on the communicator's stream
  if (comm.rank() == 0) {
    std::printf("%s, stage %d, %d ranks, %s:\n", folder.string().c_str(), stage, comm.world_size(),
                method.c_str());
    for (int r = 0; r < comm.world_size(); ++r) {
      const float* row = all.data() + 4 * r;
      std::printf(
          "  rank %d: resident %.1f MiB before the load, peak %.1f MiB during it "
          "(+%.1f MiB), %.2f s\n",
          r, row[0], row[1], row[2], row[3]);
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::printf("usage: %s FOLDER [--stage N (3)] [--method stream|whole (stream)]\n", argv[0]);
    return argc < 2 ? 2 : 0;
  }
  int stage = 3;
  std::string method = "stream";
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--stage")
      stage = std::stoi(argv[i + 1]);
    else if (flag == "--method")
      method = argv[i + 1];
    else {
      std::fprintf(stderr, "hf_load_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  int exit_code = 0;
  std::unique_ptr<zero::Communicator> comm;
  try {
    comm = zero::make_communicator(zero::DeviceKind::kCpu);
    exit_code = run(*comm, argv[1], stage, method);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "[rank %d] hf_load_bench: %s\n", comm ? comm->rank() : 0, error.what());
    std::fflush(stderr);
    zero::abort_job(1);
  }
  comm.reset();
  zero::finalize_communication();
  return exit_code;
}
