// What the checkpoint library tests share: a scratch folder, training the tiny engine stack over
// thread ranks (tests/engine/test_model.h) and saving it, an error's message.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "../engine/test_model.h"
#include "zero/checkpoint/zero_checkpoint.h"
#include "zero/comm/thread_communicator.h"

namespace zero::testing {

namespace fs = std::filesystem;

// An empty folder under the temporary directory, unique to this process and `name`.
inline fs::path scratch(const std::string& name) {
  const fs::path path = fs::temp_directory_path() /
                        ("zero_checkpoint_test_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(path);
  fs::create_directories(path);
  return path;
}

// Steps [first, first + count) of the tiny stack, each rank on its rows of a 24-row batch.
inline void train_range(Engine& engine, TinyStack& model, Communicator& comm, int first,
                        int count) {
  const int rows = 24 / comm.world_size();
  for (int step = first; step < first + count; ++step) {
    model.micro_step(engine, make_batch({}, step, comm.rank() * rows, rows));
    engine.step();
  }
}

// Trains `steps` at (stage, world) and saves root/checkpoint-<steps>.
inline void train_and_save(const fs::path& root, int stage, int world, int steps) {
  run_ranks(world, [&](Communicator& comm) {
    std::unique_ptr<Engine> engine = make_engine(parity_options(stage, 1), comm);
    TinyStack model;
    model.register_units(*engine);
    train_range(*engine, model, comm, 0, steps);
    checkpoint::CheckpointSave save(comm, root, "checkpoint-" + std::to_string(steps));
    save.write_engine(*engine);
    save.commit();
  });
}

// The zero::Error `call` throws, or "(no error)".
inline std::string message_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

}  // namespace zero::testing
