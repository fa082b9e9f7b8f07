# zero::warnings: the warning flags every zero target compiles with (an interface target, so no
# global flag is edited).
add_library(zero_warnings INTERFACE)
add_library(zero::warnings ALIAS zero_warnings)
target_compile_options(zero_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                             -Wno-unused-parameter>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall>)
install(TARGETS zero_warnings EXPORT zeroTargets)
