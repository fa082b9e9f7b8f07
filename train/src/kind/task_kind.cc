// task_kind: the one place that chooses the task a run trains (task_kind.h).
#include "kind/task_kind.h"

#include <string>

#include "zero/core/error.h"

namespace zero::train::detail {

const TaskKind& task_kind(std::string_view name) {
  for (const TaskKind* kind : {&lm_task_kind(), &classification_task_kind()})
    if (kind->name() == name) return *kind;
  throw Error("--task '" + std::string(name) +
              "' is not a task (causal-lm or text-classification)");
}

}  // namespace zero::train::detail
