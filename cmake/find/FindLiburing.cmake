# liburing (liburing-dev): Liburing::liburing, for zero::offload's NVMe swap store. No pkg-config.
include(${CMAKE_CURRENT_LIST_DIR}/ZeroFindLibrary.cmake)
zero_find_library(Liburing TARGET Liburing::liburing LIBRARY uring HEADER liburing.h)
