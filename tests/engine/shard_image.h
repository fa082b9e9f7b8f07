// A rank's shard states as plain values, as a checkpoint holds them: taken from an engine after
// some steps (Engine::shard_states(), read from wherever the states live) and put into a fresh
// engine, whose run must then continue as the uninterrupted one (engine_offload_state_test,
// engine_offload_test).
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "zero/engine/engine.h"

namespace zero::testing {

// unit -> [params, optimizer state k...]
using ShardImage = std::map<std::string, std::vector<std::vector<float>>>;

inline ShardImage take_shard_image(Engine& engine) {
  ShardImage image;
  for (const ShardState& shard : engine.shard_states()) {
    auto& values = image[shard.unit];
    values.emplace_back(shard.params.begin(), shard.params.end());
    for (const auto& [name, state] : shard.optimizer_state)
      values.emplace_back(state.begin(), state.end());
  }
  return image;
}

inline void put_shard_image(Engine& engine, const ShardImage& image) {
  for (ShardState& shard : engine.shard_states()) {
    const auto& values = image.at(shard.unit);
    std::copy(values[0].begin(), values[0].end(), shard.params.begin());
    for (std::size_t k = 0; k < shard.optimizer_state.size(); ++k)
      std::copy(values[k + 1].begin(), values[k + 1].end(),
                shard.optimizer_state[k].second.begin());
  }
}

}  // namespace zero::testing
