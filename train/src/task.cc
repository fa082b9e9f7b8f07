// make_task: the one place that chooses the task a run trains (task.h).
#include "task.h"

#include "classification_task.h"
#include "lm_task.h"
#include "prepare.h"

namespace zero::train::detail {

std::unique_ptr<Task> make_task(const TaskContext& context) {
  if (context.prepared.classification) return std::make_unique<ClassificationTask>(context);
  return std::make_unique<LmTask>(context);
}

}  // namespace zero::train::detail
