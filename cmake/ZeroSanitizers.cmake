# ZERO_SANITIZE: every zero target (libraries, tools, tests) compiled and linked with sanitizers,
# for scripts/sanitize.sh (docs/reliability.md "Sanitizers"); empty (the default): none.
#   address,undefined  AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer; no
#                      recovery from undefined behaviour, so a finding fails its test
#   thread             ThreadSanitizer. GCC's libgomp is not instrumented, so the tests run with
#                      one OpenMP thread (ZERO_TEST_CORES 1, cmake/ZeroTesting.cmake): a parallel
#                      region then runs on its calling thread and no synchronisation TSan cannot
#                      see orders our memory; the threads under test are zero's own (stream
#                      workers, communicator, watchdog, swap I/O), which TSan sees whole.
# Sanitized code is 2-15x slower, so the sanitizer trees build without CUDA, the benchmarks and the
# Python module (scripts/sanitize.sh), and run a chosen subset of the tests.
set(ZERO_SANITIZE "" CACHE STRING "Sanitizers for every target: address,undefined or thread")
if(ZERO_SANITIZE)
  if(NOT ZERO_SANITIZE MATCHES "^(address,undefined|address|undefined|thread)$")
    message(FATAL_ERROR "ZERO_SANITIZE='${ZERO_SANITIZE}': use address,undefined or thread")
  endif()
  set(zero_sanitize_flags -fsanitize=${ZERO_SANITIZE} -fno-omit-frame-pointer)
  if(ZERO_SANITIZE MATCHES "undefined")
    list(APPEND zero_sanitize_flags -fno-sanitize-recover=undefined)
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${zero_sanitize_flags}>")
  add_link_options(${zero_sanitize_flags})
  message(STATUS "zero: sanitizers ${ZERO_SANITIZE}")
endif()
