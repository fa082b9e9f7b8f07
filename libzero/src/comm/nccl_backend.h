// The NCCL communicator as make_nccl_communicator reaches it: nccl_communicator.cc's factory,
// registered with the CUDA device layer by zero::cuda (cuda_registration.cc), so zero::core links
// no NCCL. Without it make_nccl_communicator says what to link.
#pragma once

#include <memory>

#include "zero/comm/communicator.h"

namespace zero::detail {

using NcclFactory = std::unique_ptr<Communicator> (*)(int device, NcclBootstrap bootstrap,
                                                      const GlooRendezvous& rendezvous,
                                                      CommOptions options);

// Called once, during static initialisation, by the program's copy of zero::cuda.
void register_nccl_factory(NcclFactory factory);

// nccl_communicator.cc's communicator (zero::cuda), what make_nccl_communicator runs.
std::unique_ptr<Communicator> make_nccl_runtime_communicator(int device, NcclBootstrap bootstrap,
                                                             const GlooRendezvous& rendezvous,
                                                             CommOptions options);

}  // namespace zero::detail
