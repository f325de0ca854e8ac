# What `cmake --install` writes, and the Debian package `cpack` makes from it:
#   include/metagrad/...                  the three header roots (include/, detail/, cuda/) merged
#   share/cmake/metagrad/                 the package config: find_package(metagrad 0.2 CONFIG)
#                                         gives metagrad::metagrad, and COMPONENTS cuda
#                                         metagrad::cuda
#   share/pkgconfig/metagrad.pc           for pkg-config (the core)
# metagrad is header-only, so everything is architecture-independent (share/, a Debian package
# of architecture "all").
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(metagrad_cmake_dir "${CMAKE_INSTALL_DATADIR}/cmake/metagrad")

install(TARGETS metagrad EXPORT metagrad-targets FILE_SET HEADERS)
install(TARGETS metagrad_cuda EXPORT metagrad-cuda-targets FILE_SET HEADERS)
install(EXPORT metagrad-targets NAMESPACE metagrad:: DESTINATION "${metagrad_cmake_dir}")
install(EXPORT metagrad-cuda-targets NAMESPACE metagrad:: DESTINATION "${metagrad_cmake_dir}")

configure_package_config_file(cmake/metagrad-config.cmake.in
  "${PROJECT_BINARY_DIR}/metagrad-config.cmake" INSTALL_DESTINATION "${metagrad_cmake_dir}")
# Compatibility: while the major version is 0, a minor version may break the API, so a request
# for 0.2 accepts 0.2.x only (SameMinorVersion); from 1.0 on, SameMajorVersion.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/metagrad-config-version.cmake"
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES "${PROJECT_BINARY_DIR}/metagrad-config.cmake"
              "${PROJECT_BINARY_DIR}/metagrad-config-version.cmake"
              cmake/arch.cmake
        DESTINATION "${metagrad_cmake_dir}")

configure_file(cmake/metagrad.pc.in "${PROJECT_BINARY_DIR}/metagrad.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/metagrad.pc" DESTINATION "${CMAKE_INSTALL_DATADIR}/pkgconfig")

# cpack -G DEB: metagrad-dev_<version>_all.deb, installing into /usr.
if(PROJECT_IS_TOP_LEVEL)
  set(CPACK_GENERATOR DEB)
  set(CPACK_PACKAGE_NAME metagrad-dev)
  set(CPACK_PACKAGE_VENDOR metagrad)
  set(CPACK_PACKAGE_CONTACT "metagrad developers <metagrad@localhost>")
  set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "header-only automatic differentiation for C++20")
  set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
  set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE all)
  set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
  set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libxtensor-dev (>= 0.24), libxsimd-dev, xtl-dev, libopenblas-dev")
  include(CPack)
endif()
