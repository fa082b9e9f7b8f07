// The final model from the engine, gathered and written one unit at a time.
#include "zero/gpt2/engine_save.h"

#include <exception>
#include <vector>

#include "zero/gpt2/classifier.h"

namespace zero::gpt2 {

namespace {

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
      sink(values.raw(), values.dtype());
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
      convert(gathered.raw(), gathered.dtype(), score.data(), DType::kFloat32, score.size());
    }
  }
  const std::vector<UnitId> body(model.units().begin(), model.units().end() - 1);
  save_gathered(engine, body, [&](const UnitSource& source) {
    save_classifier_checkpoint(model.config(), model.head_config(), source, score, folder);
  });
}

}  // namespace zero::gpt2
