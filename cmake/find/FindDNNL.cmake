# oneDNN (libdnnl-dev): DNNL::dnnl, for zero::gpt2's bf16 GEMMs. A module rather than oneDNN's own
# config, which needs OpenCL's headers for a library zero uses on the CPU only.
include(${CMAKE_CURRENT_LIST_DIR}/ZeroFindLibrary.cmake)
zero_find_library(DNNL TARGET DNNL::dnnl LIBRARY dnnl HEADER oneapi/dnnl/dnnl.hpp)
