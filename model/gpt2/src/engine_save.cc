// The final model from the engine, gathered and written one unit at a time.
#include "zero/gpt2/engine_save.h"

#include <exception>
#include <vector>

#include "zero/core/allocator.h"
#include "zero/core/device_context.h"
#include "zero/gpt2/classifier.h"

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

// Runs `save` on rank 0 with a UnitSource that gathers `units` in order; other ranks gather the
// same units. Should rank 0 fail part-way, it gathers the rest before rethrowing, so every rank
// completes the same collectives.
template <typename Save>
void save_gathered(Engine& engine, const std::vector<UnitId>& units, Save save) {
  if (engine.rank() != 0) {
    for (const UnitId unit : units) engine.gather(unit).release();
    return;
  }
  std::size_t gathered = 0;
  try {
    save([&](int unit, const UnitSink& sink) {
      const GatheredUnit values = engine.gather(units[static_cast<std::size_t>(unit)]);
      gathered = static_cast<std::size_t>(unit) + 1;
      const Buffer copy = host_copy(engine, values);
      sink(host_values(values, copy), values.dtype());
    });
  } catch (...) {
    const std::exception_ptr failure = std::current_exception();
    for (; gathered < units.size(); ++gathered) engine.gather(units[gathered]).release();
    std::rethrow_exception(failure);
  }
}

}  // namespace

void save_hf_checkpoint(EngineModel& model, const std::filesystem::path& folder,
                        SaveOptions options) {
  save_gathered(model.engine(), model.units(), [&](const UnitSource& source) {
    save_hf_checkpoint(model.config(), source, folder, options);
  });
}

void save_classifier_checkpoint(EngineClassifier& model, const std::filesystem::path& folder) {
  Engine& engine = model.engine();
  std::vector<float> score;
  {
    const GatheredUnit gathered = engine.gather(model.score_unit());
    if (engine.rank() == 0) {
      score.resize(
          static_cast<std::size_t>(model.head_config().num_labels * model.config().n_embd));
      const Buffer copy = host_copy(engine, gathered);
      convert(host_values(gathered, copy), gathered.dtype(), score.data(), DType::kFloat32,
              score.size());
    }
  }
  const std::vector<UnitId> body(model.units().begin(), model.units().end() - 1);
  save_gathered(engine, body, [&](const UnitSource& source) {
    save_classifier_checkpoint(model.config(), model.head_config(), source, score, folder);
  });
}

}  // namespace zero::gpt2
