// C++ results as Python dicts (fields by name; absent optionals left out).
#pragma once

#include <nanobind/nanobind.h>

#include "zero/train/trainer.h"

namespace zero::python {

// A LogEntry under trainer_state.json's log_history keys (absent values left out).
nanobind::dict log_entry_dict(const train::LogEntry& entry);

// TrainResult: global_step, epoch, train_loss, eval_loss, ..., log_history (a list of dicts),
// preempted, test_report (text-classification: sklearn's output_dict layout, as JSON text) and,
// with --dry_run, plan (each rank's plan as JSON text).
nanobind::dict train_result_dict(const train::TrainResult& result);

}  // namespace zero::python
