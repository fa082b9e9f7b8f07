# zero::warnings: the warning flags every zero target compiles with (an interface target, so no
# global flag is edited). CUDA: ptxas fails the build when a kernel spills registers to local
# memory (ZERO_CUDA_PTXAS_CHECKS; tests/cuda_build checks that the flags still catch a planted
# spill, so a toolkit whose ptxas stops reporting fails the test instead of silently passing).
set(ZERO_CUDA_PTXAS_CHECKS "-Xptxas=-warn-spills,-Werror")
add_library(zero_warnings INTERFACE)
add_library(zero::warnings ALIAS zero_warnings)
target_compile_options(zero_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                             -Wno-unused-parameter>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall ${ZERO_CUDA_PTXAS_CHECKS}>)
install(TARGETS zero_warnings EXPORT zeroTargets)
