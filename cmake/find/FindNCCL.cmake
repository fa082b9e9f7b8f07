# NCCL (beside the CUDA toolkit, or NCCL_ROOT): NCCL::nccl, for zero::cuda's communicator. Looks
# beside the toolkit CUDAToolkit found first.
include(${CMAKE_CURRENT_LIST_DIR}/ZeroFindLibrary.cmake)
zero_find_library(NCCL TARGET NCCL::nccl LIBRARY nccl HEADER nccl.h
                  HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_ROOT}
                        ${CUDAToolkit_LIBRARY_DIR}/.. ${CUDAToolkit_INCLUDE_DIRS}/..)
