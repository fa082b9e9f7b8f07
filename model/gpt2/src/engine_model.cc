// EngineModel: GPT-2's units registered with zero::Engine and one micro-step over them.
#include "zero/gpt2/engine_model.h"

#include <algorithm>
#include <cstddef>
#include <span>

#include "zero/core/error.h"
#include "zero/gpt2/family.h"

namespace zero::gpt2 {
std::vector<UnitId> EngineModel::register_units(Engine& engine, const GPT2Config& config,
                                                const std::vector<UnitSpec>& specs,
                                                std::uint64_t seed) {
  std::vector<UnitId> units;
  units.reserve(specs.size());
  for (const UnitSpec& spec : specs) {
    // The initialiser owns copies: the engine keeps it and may outlive this model.
    // Any range of the unit: each rank generates only what it holds.
    const RangeInitFunction init = [config, spec, seed](ElementRange range,
                                                        std::span<float> values) {
      init_unit_range(config, spec, seed, range, values.data());
    };
    units.push_back(engine.register_unit(spec.name, spec.tensors, init));
  }
  engine.initialize();
  return units;
}

EngineModel::EngineModel(Engine& engine, const GPT2Config& config, std::int64_t rows,
                         std::int64_t seq_len, std::uint64_t seed, Allocator& activations,
                         ComputeOptions options)
    : engine_(engine),
      config_(config),
      specs_(gpt2_units(config)),
      units_(register_units(engine, config_, specs_, seed)),
      compute_(config_, rows, seq_len, engine.context(), activations,
               with_engine_dtype(options, engine)) {}

void EngineModel::forward(GatheredUnit& norm, GatheredUnit& wte) {
  const UnitId embeddings = units_[embeddings_unit()];
  {
    const GatheredUnit params = engine_.gather(embeddings);
    compute_.forward_embeddings(params_of(params));
  }
  for (int layer = 0; layer < static_cast<int>(config_.n_layer); ++layer) {
    const GatheredUnit params = engine_.gather(units_[block_unit(layer)]);
    compute_.forward_block(layer, params_of(params));
  }
  norm = engine_.gather(units_[final_norm_unit(config_)]);  // then wte, on every rank
  // The head's weight: the tied embeddings, gathered again; untied (the Llama family's
  // lm_head.weight), it is in the final unit.
  if (config_.tie_word_embeddings) wte = engine_.gather(embeddings);
  compute_.forward_head(params_of(norm), params_of(config_.tie_word_embeddings ? wte : norm));
}

double EngineModel::train_micro_step(std::span<const int> tokens, std::span<const int> targets,
                                     DropoutKey dropout) {
  const UnitId embeddings = units_[embeddings_unit()];
  const UnitId final_norm = units_[final_norm_unit(config_)];
  compute_.set_inputs(tokens, targets, dropout);
  {
    GatheredUnit norm, wte;
    forward(norm, wte);
    // d(micro-batch mean loss) × the engine's loss scale (1 in fp32).
    const auto scale = static_cast<float>(engine_.loss_scale() /
                                          static_cast<double>(compute_.num_counted_targets()));
    const bool tied = config_.tie_word_embeddings;
    const UnitData norm_grads = grads_of(engine_.grads(final_norm));
    compute_.backward_head(params_of(norm), params_of(tied ? wte : norm), norm_grads,
                           tied ? grads_of(engine_.grads(embeddings)) : norm_grads, scale);
    wte.release();
    norm.release();
  }
  engine_.reduce_grads(final_norm);
  for (int layer = static_cast<int>(config_.n_layer) - 1; layer >= 0; --layer) {
    const UnitId unit = units_[block_unit(layer)];
    {
      const GatheredUnit params = engine_.gather(unit);
      compute_.backward_block(layer, params_of(params), grads_of(engine_.grads(unit)));
    }
    engine_.reduce_grads(unit);
  }
  {
    const GatheredUnit params = engine_.gather(embeddings);
    compute_.backward_embeddings(params_of(params), grads_of(engine_.grads(embeddings)));
  }
  engine_.reduce_grads(embeddings);
  return compute_.loss();
}

double EngineModel::eval_loss(std::span<const int> tokens, std::span<const int> targets) {
  compute_.set_inputs(tokens, targets);  // no dropout
  GatheredUnit norm, wte;
  forward(norm, wte);
  wte.release();
  norm.release();
  return compute_.loss();
}

void load_hf_partitions(Engine& engine, std::span<const UnitId> body_units,
                        const HFWeights& weights, std::span<const UnitId> extra_units) {
  const std::vector<UnitSpec> specs = gpt2_units(weights.config());
  ZERO_CHECK(body_units.size() == specs.size(), "loading ", weights.folder().string(), ": ",
             body_units.size(), " body units given, a ", name_of(weights.config().family), " of ",
             weights.config().n_layer, " layers has ", specs.size());
  // Straight into the engine's states (with NVMe offload one sub-group's slot at a time); the
  // optimizer state and the tensors the checkpoint lacks keep their values.
  engine.fill_shard_states(
      [&](ShardState& shard) {
        const UnitId id = engine.unit(shard.unit);
        const FlatLayout& layout = engine.layout(id);
        const auto body = std::find(body_units.begin(), body_units.end(), id);
        const bool extra =
            std::find(extra_units.begin(), extra_units.end(), id) != extra_units.end();
        if (body == body_units.end() && !extra) return;
        // Device-resident states (ShardState::space) are written through pinned pieces that
        // start with their current values (the tensors the checkpoint lacks keep them).
        engine.write_shard_values(
            shard.params, shard.space, extra, [&](std::size_t offset, std::span<float> piece) {
              const ElementRange range{shard.range.begin + offset,
                                       shard.range.begin + offset + piece.size()};
              if (body != body_units.end()) {
                weights.read_unit(specs[static_cast<std::size_t>(body - body_units.begin())],
                                  layout, range, piece.data());
                return;
              }
              for (const TensorSlot& slot : layout.slots()) {
                const ElementRange overlap = intersect(slot.range(), range);
                if (overlap.empty() || !weights.contains(slot.name)) continue;
                weights.read(
                    slot.name,
                    {overlap.begin - slot.offset_elements, overlap.end - slot.offset_elements},
                    piece.data() + (overlap.begin - range.begin));
              }
            });
      },
      Engine::ShardFill::kSomeElements);
  engine.refresh_params();
}

}  // namespace zero::gpt2
