# What `cmake --install` writes, and the Debian package `cpack` makes from it:
#   include/metagrad/...                  the three header roots (include/, detail/, cuda/) merged
#   lib/<arch>/libmetagrad.so.*, .a       the compiled runtime core (shared and static)
#   lib/<arch>/cmake/metagrad/            the package config: find_package(metagrad 0.3 CONFIG)
#                                         gives metagrad::metagrad (shared), metagrad::static,
#                                         metagrad::header_only, and COMPONENTS cuda metagrad::cuda
#                                         (and metagrad::device, libmetagrad_device, where it was
#                                         built for CUDA)
#   lib/<arch>/pkgconfig/metagrad.pc      for pkg-config: the library (--libs: -lmetagrad)
#   lib/<arch>/pkgconfig/metagrad-header-only.pc   the header-only mode
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(metagrad_cmake_dir "${CMAKE_INSTALL_LIBDIR}/cmake/metagrad")

install(TARGETS metagrad_common metagrad_header_only ${metagrad_library_targets}
        EXPORT metagrad-targets FILE_SET HEADERS)
install(TARGETS metagrad_cuda EXPORT metagrad-cuda-targets FILE_SET HEADERS)
if(TARGET metagrad_device AND METAGRAD_DEVICE_SYSTEM STREQUAL "CUDA")  # the prebuilt backend
  install(TARGETS metagrad_device EXPORT metagrad-cuda-targets)
endif()
install(EXPORT metagrad-targets NAMESPACE metagrad:: DESTINATION "${metagrad_cmake_dir}")
install(EXPORT metagrad-cuda-targets NAMESPACE metagrad:: DESTINATION "${metagrad_cmake_dir}")

configure_package_config_file(cmake/metagrad-config.cmake.in
  "${PROJECT_BINARY_DIR}/metagrad-config.cmake" INSTALL_DESTINATION "${metagrad_cmake_dir}")
# Compatibility: while the major version is 0, a minor version may break the API, so a request
# for 0.2 accepts 0.2.x only (SameMinorVersion); from 1.0 on, SameMajorVersion.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/metagrad-config-version.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/metagrad-config.cmake"
              "${PROJECT_BINARY_DIR}/metagrad-config-version.cmake"
              cmake/arch.cmake
        DESTINATION "${metagrad_cmake_dir}")

if(METAGRAD_HEADER_ONLY)
  set(metagrad_pc_libs "")
  set(metagrad_pc_cflags "-DMETAGRAD_HEADER_ONLY")
else()
  set(metagrad_pc_libs "-L\${libdir} -lmetagrad")
  set(metagrad_pc_cflags "")
endif()
file(RELATIVE_PATH metagrad_pc_prefix "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
string(REGEX REPLACE "/$" "" metagrad_pc_prefix "${metagrad_pc_prefix}")
configure_file(cmake/metagrad.pc.in "${PROJECT_BINARY_DIR}/metagrad.pc" @ONLY)
configure_file(cmake/metagrad-header-only.pc.in "${PROJECT_BINARY_DIR}/metagrad-header-only.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/metagrad.pc" "${PROJECT_BINARY_DIR}/metagrad-header-only.pc"
        DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")

# cpack -G DEB: metagrad-dev_<version>_<arch>.deb, installing into /usr.
if(PROJECT_IS_TOP_LEVEL)
  set(CPACK_GENERATOR DEB)
  set(CPACK_PACKAGE_NAME metagrad-dev)
  set(CPACK_PACKAGE_VENDOR metagrad)
  set(CPACK_PACKAGE_CONTACT "metagrad developers <metagrad@localhost>")
  set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "automatic differentiation for C++20")
  set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
  set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
  set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libxtensor-dev (>= 0.24), libxsimd-dev, xtl-dev, libopenblas-dev")
  include(CPack)
endif()
