# Finds Python's development files and nanobind for the Python module (bindings/python), included
# by the root CMakeLists.txt before its ZERO_BUILD_PYTHON option, whose default is what it found.
# Sets ZERO_NANOBIND_FOUND (nanobind and NumPy's headers found) and ZERO_NUMPY_INCLUDE_DIR.
#
# The interpreter: Python_EXECUTABLE when given (scikit-build-core gives its own); else the build
# venv scripts/setup.sh makes (${ZERO_PY_VENV:-$HOME/.cache/zero/py-venv}: Debian's python3 with
# nanobind, scikit-build-core, pytest and numpy); else the first python3 found. nanobind comes
# from that interpreter (`python -m nanobind --cmake_dir`) unless nanobind_DIR is given.
set(ZERO_NANOBIND_FOUND OFF)
if(NOT DEFINED Python_EXECUTABLE)
  if(DEFINED ENV{ZERO_PY_VENV})
    set(zero_py_venv "$ENV{ZERO_PY_VENV}")
  elseif(DEFINED ENV{HOME})
    set(zero_py_venv "$ENV{HOME}/.cache/zero/py-venv")
  endif()
  if(zero_py_venv AND EXISTS "${zero_py_venv}/bin/python3")
    set(Python_EXECUTABLE "${zero_py_venv}/bin/python3" CACHE FILEPATH "Python of the module")
  endif()
endif()
find_package(Python 3.9 COMPONENTS Interpreter Development.Module QUIET)
if(Python_FOUND)
  if(NOT nanobind_DIR)
    execute_process(COMMAND "${Python_EXECUTABLE}" -m nanobind --cmake_dir
                    OUTPUT_VARIABLE zero_nanobind_dir OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE zero_nanobind_status ERROR_QUIET)
    if(zero_nanobind_status EQUAL 0)
      set(nanobind_DIR "${zero_nanobind_dir}" CACHE PATH "nanobind's CMake folder")
    endif()
  endif()
  find_package(nanobind CONFIG QUIET)
  # NumPy's C API: the tokenizer's arrays are made over the C++ buffers directly.
  execute_process(COMMAND "${Python_EXECUTABLE}" -c "import numpy; print(numpy.get_include())"
                  OUTPUT_VARIABLE ZERO_NUMPY_INCLUDE_DIR OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE zero_numpy_status ERROR_QUIET)
  if(nanobind_FOUND AND zero_numpy_status EQUAL 0)
    set(ZERO_NANOBIND_FOUND ON)
  endif()
endif()
if(ZERO_NANOBIND_FOUND)
  message(STATUS "zero: Python module with nanobind ${nanobind_VERSION} for ${Python_EXECUTABLE}")
else()
  message(STATUS "zero: no Python module (needs python3-dev, nanobind and numpy: scripts/setup.sh)")
endif()
