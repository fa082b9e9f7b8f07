# Exports the zero::* targets as a relocatable CMake package: find_package(zero [COMPONENTS ...])
# in an install tree, wherever it is moved (docs/packaging.md). Each export set is a component;
# the exported targets name imported targets (CUDA::cudart, Liburing::liburing, ...), never a
# library path of the build machine, and the consumer's zeroConfig.cmake finds, on its own
# machine, only the dependencies of the components it asks for. Included before the folders, which
# record what their targets link (zero_package_dependency); zero_install_package() at the end.
include(CMakePackageConfigHelpers)
set(ZERO_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/zero)

# The components, each one export set, in an order where each needs only earlier ones:
#   core  zero::core, zero::optim, zero::offload, zero::factory (always loaded)
#   text  zero::text                cuda   zero::cuda (zero::core_cuda, zero::optim_cuda)
#   gpt2  zero::gpt2 (and cuda in a CUDA build)    train  zero::train (gpt2, text)
set(ZERO_PACKAGE_COMPONENTS core text cuda gpt2 train)
set(ZERO_PACKAGE_EXPORT_core zeroTargets)
set(ZERO_PACKAGE_EXPORT_text zeroTextTargets)
set(ZERO_PACKAGE_EXPORT_cuda zeroCudaTargets)
set(ZERO_PACKAGE_EXPORT_gpt2 zeroGpt2Targets)
set(ZERO_PACKAGE_EXPORT_train zeroTrainTargets)

# zero_package_dependency(<component> <package> [find_package arguments...])
# Records that <component>'s targets link a target of <package>: its zeroConfig.cmake calls
# find_dependency(<package> <arguments>) (or, for an optional component, find_package QUIET)
# before it imports them. A component named as <package> ("component:cuda") is one it needs.
function(zero_package_dependency component package)
  set_property(GLOBAL APPEND PROPERTY ZERO_PACKAGE_DEPENDENCIES_${component} ${package})
  set_property(GLOBAL PROPERTY ZERO_PACKAGE_ARGUMENTS_${component}_${package} "${ARGN}")
endfunction()

# Writes zeroConfig.cmake (from zeroConfig.cmake.in, with each component's dependencies as the
# folders recorded them), the version file and the find modules into the install tree.
function(zero_install_package)
  set(code "")
  set(built "")
  foreach(component IN LISTS ZERO_PACKAGE_COMPONENTS)
    get_property(exported GLOBAL PROPERTY ZERO_PACKAGE_BUILT_${component})
    if(NOT exported)
      continue()
    endif()
    list(APPEND built ${component})
    install(EXPORT ${ZERO_PACKAGE_EXPORT_${component}} NAMESPACE zero::
            DESTINATION ${ZERO_INSTALL_CMAKEDIR})
    get_property(packages GLOBAL PROPERTY ZERO_PACKAGE_DEPENDENCIES_${component})
    string(APPEND code "set(_zero_export_${component} ${ZERO_PACKAGE_EXPORT_${component}})\n"
                       "set(_zero_dependencies_${component} ${packages})\n")
    foreach(package IN LISTS packages)
      get_property(arguments GLOBAL PROPERTY ZERO_PACKAGE_ARGUMENTS_${component}_${package})
      string(APPEND code "set(_zero_arguments_${component}_${package} ${arguments})\n")
    endforeach()
  endforeach()
  set(ZERO_PACKAGE_BUILT_COMPONENTS "${built}")
  set(ZERO_PACKAGE_COMPONENT_CODE "${code}")
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/zeroConfig.cmake.in
    ${PROJECT_BINARY_DIR}/zeroConfig.cmake INSTALL_DESTINATION ${ZERO_INSTALL_CMAKEDIR})
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/zeroConfigVersion.cmake
    VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/zeroConfig.cmake ${PROJECT_BINARY_DIR}/zeroConfigVersion.cmake
          DESTINATION ${ZERO_INSTALL_CMAKEDIR})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/cmake/find DESTINATION ${ZERO_INSTALL_CMAKEDIR})
endfunction()

# zero_package_export(<component>): <component>'s export set has targets in this build.
function(zero_package_export component)
  set_property(GLOBAL PROPERTY ZERO_PACKAGE_BUILT_${component} ON)
endfunction()
