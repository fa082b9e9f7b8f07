// make_task: the Task that trains each TaskKind (task.h).
#include "task/task.h"

#include "kind/prepared.h"
#include "task/classification_task.h"
#include "task/lm_task.h"
#include "zero/core/error.h"

namespace zero::train::detail {

std::unique_ptr<Task> make_task(const TaskContext& context) {
  const TaskKind* kind = context.prepared.task;
  if (kind == &lm_task_kind()) return std::make_unique<LmTask>(context);
  if (kind == &classification_task_kind()) return std::make_unique<ClassificationTask>(context);
  ZERO_THROW("no Task trains --task ", kind->name());
}

}  // namespace zero::train::detail
