#include "run/rank_device.h"

#include <string>

#include "zero/core/cpu_context.h"
#include "zero/core/device.h"
#include "zero/core/error.h"
#include "zero/core/launch.h"

namespace zero::train::detail {

std::unique_ptr<DeviceContext> make_rank_device_context(const TrainingArguments& arguments,
                                                        const Communicator& communicator,
                                                        const RunOptions& options) {
  const Device chosen = choose_device(arguments.use_cpu).device;
  std::unique_ptr<DeviceContext> context = options.make_device_context
                                               ? options.make_device_context(chosen)
                                               : make_device_context(chosen);
  ZERO_CHECK(context != nullptr && context->device() == chosen,
             "zero::train: RunOptions::make_device_context returned ",
             context ? "a context on " + context->device().to_string() : std::string("no context"),
             " for ", chosen.to_string());
  ZERO_CHECK(communicator.buffers() == chosen.kind, "zero::train: the model runs on ",
             chosen.to_string(), " but the communicator (", communicator.backend(),
             ") takes buffers of another kind of memory; make it with ",
             "make_communicator(DeviceKind::", chosen.kind == DeviceKind::kCpu ? "kCpu" : "kCuda",
             ")");
  return context;
}

}  // namespace zero::train::detail
