# Routes compilation through ccache when it is installed and ZERO_USE_CCACHE is on.
if(ZERO_USE_CCACHE)
  find_program(ZERO_CCACHE_PROGRAM ccache)
  if(ZERO_CCACHE_PROGRAM)
    set(CMAKE_CXX_COMPILER_LAUNCHER ${ZERO_CCACHE_PROGRAM})
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${ZERO_CCACHE_PROGRAM})
    message(STATUS "zero: compiling through ${ZERO_CCACHE_PROGRAM}")
  endif()
endif()
