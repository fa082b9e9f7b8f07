# zero_find_library(<Package> TARGET <name> LIBRARY <names...> [HEADER <file>] [HINTS <dirs...>]
#                   [PATH_SUFFIXES <suffixes...>])
# What zero's find modules (this folder, installed beside zeroConfig.cmake) share: find_library and
# find_path into the cache variables <Package>_LIBRARY and <Package>_INCLUDE_DIR (set them to
# choose another copy), <Package>_FOUND through find_package_handle_standard_args, and an imported
# target <name> holding them, so the exported zero::* targets name a target that each machine
# resolves for itself, never the build machine's paths.
include(FindPackageHandleStandardArgs)

macro(zero_find_library package)
  cmake_parse_arguments(_zfl "" "TARGET;HEADER" "LIBRARY;HINTS;PATH_SUFFIXES" ${ARGN})
  find_library(${package}_LIBRARY NAMES ${_zfl_LIBRARY} HINTS ${_zfl_HINTS}
               PATH_SUFFIXES lib lib64 ${_zfl_PATH_SUFFIXES})
  set(_zfl_required ${package}_LIBRARY)
  if(_zfl_HEADER)
    find_path(${package}_INCLUDE_DIR NAMES ${_zfl_HEADER} HINTS ${_zfl_HINTS}
              PATH_SUFFIXES include ${_zfl_PATH_SUFFIXES})
    list(APPEND _zfl_required ${package}_INCLUDE_DIR)
  endif()
  find_package_handle_standard_args(${package} REQUIRED_VARS ${_zfl_required})
  if(${package}_FOUND AND NOT TARGET ${_zfl_TARGET})
    add_library(${_zfl_TARGET} UNKNOWN IMPORTED)
    set_target_properties(${_zfl_TARGET} PROPERTIES IMPORTED_LOCATION "${${package}_LIBRARY}")
    if(_zfl_HEADER)
      set_target_properties(${_zfl_TARGET} PROPERTIES
                            INTERFACE_INCLUDE_DIRECTORIES "${${package}_INCLUDE_DIR}")
    endif()
  endif()
  mark_as_advanced(${package}_LIBRARY ${package}_INCLUDE_DIR)
endmacro()
