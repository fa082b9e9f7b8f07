# Test registration helpers. Every test executable is GoogleTest; labels say what it needs:
#   unit   CPU only, always runs
#   mpi    runs under mpirun at 2 and 4 ranks (zero_add_mpi_test)
#   cuda   needs a GPU; the test skips itself (GTEST_SKIP) when no device is present
#   golden compares with a PyTorch / DeepSpeed / Hugging Face reference run by ZERO_PYTHON;
#          skips when what it needs is not importable
# Skips are visible under every label: the GoogleTest mains (tests/common/gtest_main.cc,
# mpi_main.cc) exit with ZERO_TEST_SKIP_CODE when a case skipped and none failed, and every test
# has SKIP_RETURN_CODE set, so ctest reports it as Skipped, never Passed. scripts/test.sh lists
# the skipped tests; under CI=true any skipped test not labelled cuda fails the run.
find_package(GTest QUIET)
if(NOT GTest_FOUND)
  message(FATAL_ERROR "GoogleTest not found: install libgtest-dev (scripts/setup.sh) or configure with -DZERO_BUILD_TESTS=OFF")
endif()
include(GoogleTest)

# Ranks × threads must fit the machine: each rank gets max(1, cores / ranks) OpenMP threads.
cmake_host_system_information(RESULT ZERO_TEST_CORES QUERY NUMBER_OF_PHYSICAL_CORES)
if(NOT ZERO_TEST_CORES OR ZERO_TEST_CORES LESS 1 OR ZERO_SANITIZE STREQUAL "thread")
  set(ZERO_TEST_CORES 1)  # ThreadSanitizer: one OpenMP thread (cmake/ZeroSanitizers.cmake)
endif()
# Real data for tests (tokenizer files, corpora, DeepSpeed configs) lives beside the checkout in
# ../shared/data when present; tests read ZERO_SHARED_DATA and skip cleanly when it is absent.
set(ZERO_SHARED_DATA_DIR "${PROJECT_SOURCE_DIR}/../shared/data" CACHE PATH "Shared test data folder")
# The golden tests' Python: the private venv scripts/setup_venv.sh makes (Debian's python3 and its
# python3-torch, plus datasets, tokenizers and deepspeed), else Debian's python3 (whose golden
# tests then skip what they cannot import); pyenv shims earlier on PATH carry no torch.
if(DEFINED ENV{ZERO_VENV})
  set(ZERO_VENV_DIR "$ENV{ZERO_VENV}")
else()
  set(ZERO_VENV_DIR "$ENV{HOME}/.cache/zero/venv")
endif()
# A build folder configured before the venv existed cached /usr/bin/python3: the venv replaces it.
if(EXISTS "${ZERO_VENV_DIR}/bin/python3" AND (NOT ZERO_PYTHON OR ZERO_PYTHON STREQUAL "/usr/bin/python3"))
  set(ZERO_PYTHON "${ZERO_VENV_DIR}/bin/python3" CACHE FILEPATH "Python of the golden tests" FORCE)
elseif(NOT ZERO_PYTHON)
  find_program(ZERO_PYTHON NAMES python3 HINTS /usr/bin NO_DEFAULT_PATH)
  if(NOT ZERO_PYTHON)
    find_program(ZERO_PYTHON python3)
  endif()
endif()
set(ZERO_TEST_SKIP_CODE 77)  # kSkipExitCode in tests/common/skip_status.h
set(ZERO_TEST_ENV "ZERO_SOURCE_DIR=${PROJECT_SOURCE_DIR};ZERO_SHARED_DATA=${ZERO_SHARED_DATA_DIR};ZERO_PYTHON=${ZERO_PYTHON}")

set(ZERO_MPI_TEST_RANKS 2 4 CACHE STRING "World sizes every mpi test runs at")
set(ZERO_MPIEXEC_EXTRA_FLAGS "--oversubscribe;--allow-run-as-root;--bind-to;none"
    CACHE STRING "Flags mpirun gets in tests (OpenMPI)")
set(ZERO_MPI_TEST_ENV
    "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_btl=self,vader,tcp;OMPI_MCA_btl_vader_single_copy_mechanism=none;OMPI_MCA_rmaps_base_oversubscribe=1")

# Every test of the calling folder gets a Hugging Face home of its own,
# HF_HOME=<the folder's build dir>/hf_home/<test>: zero's token cache (the datasets cache's
# zero_tokens), datasets' and the Hub's caches then land in the test's folder, never in
# ~/.cache/huggingface or beside shared data, and one test's cache never feeds another. Call it
# first in each tests/ folder's CMakeLists.txt: it runs when the folder's file has been read, so
# it sees every test the file adds.
function(zero_isolate_test_caches)
  cmake_language(DEFER CALL _zero_set_test_homes)
endfunction()
function(_zero_set_test_homes)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(test IN LISTS tests)
    set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT
                 "HF_HOME=${CMAKE_CURRENT_BINARY_DIR}/hf_home/${test}")
  endforeach()
endfunction()

# A test program is one *_test.cc file and is named after it: the ctest name is the file's stem
# (plus _np<N> for each world size of an mpi test, or a suffix naming a second run of the same
# program under another environment), so `ctest -R STEM` finds what a file holds and a failing
# ctest names its file. Helpers (kernel_emulator.cc, ...) may join as further sources.
function(_zero_check_test_name name sources)
  set(stems "")
  foreach(source IN LISTS sources)
    get_filename_component(stem "${source}" NAME_WE)
    if(stem MATCHES "_test$")
      list(APPEND stems ${stem})
    endif()
  endforeach()
  if(NOT stems STREQUAL name)
    message(FATAL_ERROR "test ${name}: a test program is one *_test.cc file named after it "
                        "(ctest name = file stem); its *_test sources: '${stems}'")
  endif()
endfunction()

# Every test program of a CUDA build has the CUDA backend (zero::cuda, registered before main), as
# a trainer on GPUs links it; its tests skip without a device.
function(_zero_link_test_backends target)
  if(ZERO_WITH_CUDA_ENABLED)
    target_link_libraries(${target} PRIVATE zero::cuda)
  endif()
endfunction()

# zero_add_test(NAME <name> SOURCES <src...> [LIBS <lib...>] [LABELS <label...>] [TIMEOUT s])
# A GoogleTest executable with gtest_main, run as one ctest entry; NAME is its source's stem.
function(zero_add_test)
  cmake_parse_arguments(ARG "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  _zero_check_test_name(${ARG_NAME} "${ARG_SOURCES}")
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_executable(${ARG_NAME} ${ARG_SOURCES} ${PROJECT_SOURCE_DIR}/tests/common/gtest_main.cc)
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_LIBS} GTest::gtest zero::warnings)
  _zero_link_test_backends(${ARG_NAME})
  add_test(NAME ${ARG_NAME} COMMAND ${ARG_NAME})
  set_tests_properties(${ARG_NAME} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
                       SKIP_RETURN_CODE ${ZERO_TEST_SKIP_CODE}
                       ENVIRONMENT "OMP_NUM_THREADS=${ZERO_TEST_CORES};${ZERO_TEST_ENV}")
endfunction()

# zero_add_mpi_test(NAME <name> [TARGET <target>] SOURCES <src...> [LIBS <lib...>]
#                   [LABELS <label...>] [TIMEOUT s])
# A GoogleTest executable with the MPI main (tests/common/mpi_main.cc), registered once per world
# size in ZERO_MPI_TEST_RANKS as <name>_np<N>, each rank limited to max(1, cores / N) threads.
# NAME is its source's stem; TARGET (default NAME) names the executable where the same source is
# also built with gtest_main (nccl_communicator_test at world 1 and under mpirun).
function(zero_add_mpi_test)
  cmake_parse_arguments(ARG "" "NAME;TARGET;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT ZERO_WITH_MPI)
    return()
  endif()
  _zero_check_test_name(${ARG_NAME} "${ARG_SOURCES}")
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  if(NOT ARG_TARGET)
    set(ARG_TARGET ${ARG_NAME})
  endif()
  add_executable(${ARG_TARGET} ${ARG_SOURCES} ${PROJECT_SOURCE_DIR}/tests/common/mpi_main.cc)
  target_link_libraries(${ARG_TARGET} PRIVATE ${ARG_LIBS} zero::core MPI::MPI_CXX GTest::gtest
                                              zero::warnings)
  _zero_link_test_backends(${ARG_TARGET})
  foreach(ranks IN LISTS ZERO_MPI_TEST_RANKS)
    math(EXPR threads "${ZERO_TEST_CORES} / ${ranks}")
    if(threads LESS 1)
      set(threads 1)
    endif()
    add_test(NAME ${ARG_NAME}_np${ranks}
             COMMAND ${MPIEXEC_EXECUTABLE} ${ZERO_MPIEXEC_EXTRA_FLAGS} ${MPIEXEC_NUMPROC_FLAG} ${ranks}
                     ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${ARG_TARGET}> ${MPIEXEC_POSTFLAGS})
    set_tests_properties(${ARG_NAME}_np${ranks} PROPERTIES
      LABELS "mpi;${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT} PROCESSORS ${ranks}
      SKIP_RETURN_CODE ${ZERO_TEST_SKIP_CODE}
      ENVIRONMENT "${ZERO_MPI_TEST_ENV};OMP_NUM_THREADS=${threads};${ZERO_TEST_ENV}")
    # Under ASan: whole allocation stacks, so that tests/sanitizers/lsan.supp can name the
    # OpenMPI entry point a leak was allocated in (OpenMPI has no frame pointers); only here,
    # since the slow unwinder costs every malloc (4x the CPU time of trainer_device_test).
    if(ZERO_SANITIZE MATCHES "address")
      set_property(TEST ${ARG_NAME}_np${ranks} PROPERTY ENVIRONMENT_MODIFICATION
                   "LSAN_OPTIONS=string_append::fast_unwind_on_malloc=0")
    endif()
  endforeach()
endfunction()

# zero_add_output_test(NAME <name> EXIT <code> PASS <regex> COMMAND <command...>)
# A test that passes on its output: PASS_REGULAR_EXPRESSION alone makes ctest ignore the exit
# status, so a run that crashes after printing what the regex wants would pass. The command runs
# under tests/common/expect_exit.sh, and the regex must be followed by its line saying the command
# exited with <code>. Other properties (labels, timeout, environment) are set by the caller. The
# test check_output_tests (tests/common/check_output_tests.py) fails on a PASS_REGULAR_EXPRESSION
# or WILL_FAIL test registered otherwise.
function(zero_add_output_test)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "NAME;EXIT;PASS" "COMMAND")
  if(NOT ARG_EXIT MATCHES "^[0-9]+$" OR NOT ARG_PASS OR NOT ARG_COMMAND)
    message(FATAL_ERROR "zero_add_output_test(${ARG_NAME}): needs EXIT <code>, PASS <regex> and COMMAND")
  endif()
  add_test(NAME ${ARG_NAME}
           COMMAND sh ${PROJECT_SOURCE_DIR}/tests/common/expect_exit.sh ${ARG_EXIT} ${ARG_COMMAND})
  # The property is a list of alternatives: a ';' of the regex must not split it.
  string(REPLACE ";" "[;]" pass "${ARG_PASS}")
  set_tests_properties(${ARG_NAME} PROPERTIES PASS_REGULAR_EXPRESSION
                       "(${pass}).*expect_exit: exit status ${ARG_EXIT} as expected")
endfunction()

