# Installs headers, libraries and tools, and a CMake package config so that
# `find_package(PPC)` gives other projects the exported ppc:: targets.
include(CMakePackageConfigHelpers)
include(GNUInstallDirs)

get_property(ppc_exports GLOBAL PROPERTY PPC_EXPORTS)
install(TARGETS ${ppc_exports}
  EXPORT PPCTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/ppc DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.td")
install(DIRECTORY ${PROJECT_BINARY_DIR}/include/ppc DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.inc" PATTERN "Version.h")

set(PPC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ppc)
install(EXPORT PPCTargets NAMESPACE ppc:: DESTINATION ${PPC_CMAKE_DIR})
configure_package_config_file(cmake/PPCConfig.cmake.in
  ${PROJECT_BINARY_DIR}/PPCConfig.cmake INSTALL_DESTINATION ${PPC_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/PPCConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/PPCConfig.cmake
  ${PROJECT_BINARY_DIR}/PPCConfigVersion.cmake DESTINATION ${PPC_CMAKE_DIR})
