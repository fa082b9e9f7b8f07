// The final model from the engine, gathered and written one unit at a time.
#include "zero/gpt2/engine_save.h"

#include <cstddef>
#include <exception>
#include <span>
#include <vector>

#include "zero/core/allocator.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"
#include "zero/engine/state_policy.h"
#include "zero/gpt2/classifier.h"
#include "zero/gpt2/family.h"

namespace zero::gpt2 {

namespace {

// Where the model does not run on the host (CUDA, the CPU backend's asynchronous mode) a gathered
// unit is device memory the gather may still be writing: its values are copied to host memory on
// the compute stream and awaited. On the host the unit is read in place (empty Buffer).
Buffer host_copy(Engine& engine, const GatheredUnit& unit) {
  DeviceContext& context = engine.context();
  if (context.model_runs_on_host()) return {};
  const std::size_t bytes = unit.layout().num_elements() * size_of(unit.dtype());
  Buffer host = context.allocator(MemorySpace::kHost).allocate(bytes, MemoryCategory::kWorkspace);
  context.copy(context.compute_stream(), unit.raw(), host.data(), bytes);
  context.compute_stream().synchronize();
  return host;
}
const void* host_values(const GatheredUnit& unit, const Buffer& copy) {
  return copy.allocated() ? copy.data() : unit.raw();
}

// What a save in `saved` dtype writes of a unit: an fp32 save of 16-bit training the fp32 master
// (Engine::gather_master, never the 16-bit copy widened), else the gathered parameters (a 16-bit
// save of 16-bit training: the parameters the model computes with, as DeepSpeed saves its
// module's 16-bit weights). All ranks call it for the same units in the same order; on rank 0
// `use` gets values in host memory and their dtype, other ranks only take part in the
// collectives.
bool saves_master(const Engine& engine, DType saved) {
  return saved == DType::kFloat32 && state_policy(engine.options()).master_weights;
}

template <typename Use>
void with_saved_values(Engine& engine, UnitId unit, DType saved, Use use) {
  if (saves_master(engine, saved)) {
    const Buffer master = engine.gather_master(unit);
    if (engine.rank() == 0) use(master.data(), DType::kFloat32);
    return;
  }
  const GatheredUnit values = engine.gather(unit);
  if (engine.rank() != 0) return;
  const Buffer copy = host_copy(engine, values);
  use(host_values(values, copy), values.dtype());
}

// Runs `save` on rank 0 with a UnitSource that gathers `units` in order; other ranks gather the
// same units. Should rank 0 fail part-way, it gathers the rest before rethrowing, so every rank
// completes the same collectives.
template <typename Save>
void save_gathered(Engine& engine, std::span<const UnitId> units, DType saved, Save save) {
  if (engine.rank() != 0) {
    gather_saved_units(engine, units, saved);
    return;
  }
  std::size_t gathered = 0;
  try {
    save([&](int unit, const UnitSink& sink) {
      gathered = static_cast<std::size_t>(unit) + 1;
      with_saved_values(engine, units[static_cast<std::size_t>(unit)], saved, sink);
    });
  } catch (...) {
    const std::exception_ptr failure = std::current_exception();
    gather_saved_units(engine, {units.begin() + static_cast<std::ptrdiff_t>(gathered), units.end()},
                       saved);
    std::rethrow_exception(failure);
  }
}

}  // namespace

void gather_saved_units(Engine& engine, std::span<const UnitId> units, DType saved) {
  for (const UnitId unit : units) with_saved_values(engine, unit, saved, [](const void*, DType) {});
}

void save_hf_checkpoint(Engine& engine, std::span<const UnitId> units, const GPT2Config& config,
                        const std::filesystem::path& folder, SaveOptions options) {
  ZERO_CHECK(units.size() == gpt2_units(config).size(), "saving ", folder.string(), ": ",
             units.size(), " units given, a ", name_of(config.family), " of ", config.n_layer,
             " layers has ", gpt2_units(config).size());
  save_gathered(engine, units, options.dtype, [&](const UnitSource& source) {
    save_hf_checkpoint(config, source, folder, options);
  });
}

void save_hf_checkpoint(EngineModel& model, const std::filesystem::path& folder,
                        SaveOptions options) {
  save_hf_checkpoint(model.engine(), model.units(), model.config(), folder, options);
}

void save_classifier_checkpoint(EngineClassifier& model, const std::filesystem::path& folder,
                                SaveOptions options) {
  Engine& engine = model.engine();
  std::vector<float> score;
  with_saved_values(
      engine, model.score_unit(), options.dtype, [&](const void* values, DType dtype) {
        score.resize(
            static_cast<std::size_t>(model.head_config().num_labels * model.config().n_embd));
        convert(values, dtype, score.data(), DType::kFloat32, score.size());
      });
  const std::vector<UnitId> body(model.units().begin(), model.units().end() - 1);
  save_gathered(engine, body, options.dtype, [&](const UnitSource& source) {
    save_classifier_checkpoint(model.config(), model.head_config(), source, score, folder, options);
  });
}

}  // namespace zero::gpt2
