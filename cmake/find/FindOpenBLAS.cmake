# OpenBLAS (libopenblas-dev): OpenBLAS::OpenBLAS with cblas.h, for zero::gpt2's CPU GEMMs.
include(${CMAKE_CURRENT_LIST_DIR}/ZeroFindLibrary.cmake)
zero_find_library(OpenBLAS TARGET OpenBLAS::OpenBLAS LIBRARY openblas HEADER cblas.h
                  PATH_SUFFIXES openblas x86_64-linux-gnu)
