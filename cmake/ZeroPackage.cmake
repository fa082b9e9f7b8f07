# Exports the zero::* targets as a CMake package: find_package(zero) in an install tree.
include(CMakePackageConfigHelpers)
set(ZERO_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/zero)
install(EXPORT zeroTargets NAMESPACE zero:: DESTINATION ${ZERO_INSTALL_CMAKEDIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/zeroConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/zeroConfig.cmake INSTALL_DESTINATION ${ZERO_INSTALL_CMAKEDIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/zeroConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/zeroConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/zeroConfigVersion.cmake
  DESTINATION ${ZERO_INSTALL_CMAKEDIR})
