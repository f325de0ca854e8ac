# Makes the Debian package with cpack and unpacks it into a temporary root, as `dpkg -x` does for
# a user without root (tests/package/CMakeLists.txt). Checks the file name and the dependencies it
# declares.
#   cmake -DBINARY_DIR=<metagrad build> -DOUT=<dir> -DVERSION=<x.y.z> -P deb.cmake
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE "${OUT}")
execute_process(COMMAND cpack -G DEB --config "${BINARY_DIR}/CPackConfig.cmake" -B "${OUT}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cpack failed: ${out}${err}")
endif()
execute_process(COMMAND dpkg --print-architecture OUTPUT_VARIABLE arch
                OUTPUT_STRIP_TRAILING_WHITESPACE)
set(deb "${OUT}/metagrad-dev_${VERSION}_${arch}.deb")
if(NOT EXISTS "${deb}")
  file(GLOB made "${OUT}/*.deb")
  message(FATAL_ERROR "expected ${deb}; cpack made: ${made}")
endif()
execute_process(COMMAND dpkg-deb -f "${deb}" Package Version Architecture Depends
                OUTPUT_VARIABLE fields RESULT_VARIABLE rc)
message(STATUS "${fields}")
foreach(dep libxtensor-dev libxsimd-dev xtl-dev libopenblas-dev)
  if(NOT fields MATCHES "${dep}")
    message(FATAL_ERROR "the package does not depend on ${dep}: ${fields}")
  endif()
endforeach()
execute_process(COMMAND dpkg -x "${deb}" "${OUT}/root" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT EXISTS "${OUT}/root/usr/lib/cmake/metagrad/metagrad-config.cmake"
   OR NOT EXISTS "${OUT}/root/usr/lib/libmetagrad.a")
  message(FATAL_ERROR "dpkg -x did not unpack the package config and the library into "
                      "${OUT}/root/usr/lib")
endif()
message(STATUS "metagrad-dev_${VERSION}_${arch}.deb unpacked into ${OUT}/root")
