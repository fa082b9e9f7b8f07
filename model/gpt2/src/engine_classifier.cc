// EngineClassifier: the decoder's units (without an LM head) and the score unit on zero::Engine,
// one micro-step over them.
#include "zero/gpt2/engine_classifier.h"

#include "zero/gpt2/engine_model.h"

namespace zero::gpt2 {

std::vector<UnitId> EngineClassifier::register_units(Engine& engine, const GPT2Config& config,
                                                     const ClassifierConfig& head,
                                                     const std::vector<UnitSpec>& specs,
                                                     std::uint64_t seed) {
  std::vector<UnitId> units;
  // Any range of a unit: each rank generates only what it holds.
  for (const UnitSpec& spec : specs) {
    const RangeInitFunction init = [config, spec, seed](ElementRange range,
                                                        std::span<float> values) {
      init_unit_range(config, spec, seed, range, values.data());
    };
    units.push_back(engine.register_unit(spec.name, spec.tensors, init));
  }
  const RangeInitFunction score = [config, seed](ElementRange range, std::span<float> values) {
    init_score_range(config, seed, range, values.data());
  };
  units.push_back(engine.register_unit(kScoreUnitName, score_tensors(config, head), score));
  engine.initialize();
  return units;
}

EngineClassifier::EngineClassifier(Engine& engine, const GPT2Config& config,
                                   const ClassifierConfig& head, std::int64_t rows,
                                   std::int64_t seq_len, std::uint64_t seed, Allocator& activations,
                                   ComputeOptions options)
    : engine_(engine),
      config_(classifier_body(config)),
      head_config_(head),
      specs_(gpt2_units(config_)),
      units_(register_units(engine, config_, head_config_, specs_, seed)),
      compute_(config_, rows, seq_len, engine.context(), activations,
               with_engine_dtype(options, engine)),
      head_(config_, head_config_, rows, seq_len, activations, engine.param_dtype()) {}

void EngineClassifier::forward_body() {
  {
    const GatheredUnit params = engine_.gather(units_[embeddings_unit()]);
    compute_.forward_embeddings(params_of(params));
  }
  for (int layer = 0; layer < static_cast<int>(config_.n_layer); ++layer) {
    const GatheredUnit params = engine_.gather(units_[block_unit(layer)]);
    compute_.forward_block(layer, params_of(params));
  }
}

template <typename Labels>
double EngineClassifier::train_step(std::span<const int> tokens, Labels labels,
                                    DropoutKey dropout) {
  const UnitId final_norm = units_[final_norm_unit(config_)];
  compute_.set_inputs(tokens, {}, dropout);
  forward_body();
  {
    GatheredUnit norm = engine_.gather(final_norm);  // then score, on every rank
    GatheredUnit score = engine_.gather(score_unit());
    head_.forward(compute_, tokens, labels, params_of(norm), params_of(score));
    const double counted = static_cast<double>(head_.num_counted());
    const auto scale = static_cast<float>(counted > 0 ? engine_.loss_scale() / counted : 0.0);
    head_.backward(compute_, params_of(norm), params_of(score), grads_of(engine_.grads(final_norm)),
                   grads_of(engine_.grads(score_unit())), scale);
    score.release();
    norm.release();
  }
  engine_.reduce_grads(score_unit());
  engine_.reduce_grads(final_norm);
  for (int layer = static_cast<int>(config_.n_layer) - 1; layer >= 0; --layer) {
    const UnitId unit = units_[block_unit(layer)];
    {
      const GatheredUnit params = engine_.gather(unit);
      compute_.backward_block(layer, params_of(params), grads_of(engine_.grads(unit)));
    }
    engine_.reduce_grads(unit);
  }
  const UnitId embeddings = units_[embeddings_unit()];
  {
    const GatheredUnit params = engine_.gather(embeddings);
    compute_.backward_embeddings(params_of(params), grads_of(engine_.grads(embeddings)));
  }
  engine_.reduce_grads(embeddings);
  return head_.loss();
}

template <typename Labels>
double EngineClassifier::evaluate_labels(std::span<const int> tokens, Labels labels) {
  compute_.set_inputs(tokens, {});  // no dropout
  forward_body();
  GatheredUnit norm = engine_.gather(units_[final_norm_unit(config_)]);
  GatheredUnit score = engine_.gather(score_unit());
  head_.forward(compute_, tokens, labels, params_of(norm), params_of(score));
  score.release();
  norm.release();
  return head_.loss();
}

double EngineClassifier::train_micro_step(std::span<const int> tokens, std::span<const int> labels,
                                          DropoutKey dropout) {
  return train_step(tokens, labels, dropout);
}

double EngineClassifier::train_micro_step(std::span<const int> tokens,
                                          std::span<const float> targets, DropoutKey dropout) {
  return train_step(tokens, targets, dropout);
}

double EngineClassifier::evaluate(std::span<const int> tokens, std::span<const int> labels) {
  return evaluate_labels(tokens, labels);
}

double EngineClassifier::evaluate(std::span<const int> tokens, std::span<const float> targets) {
  return evaluate_labels(tokens, targets);
}

}  // namespace zero::gpt2
