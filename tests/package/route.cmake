# One packaging route (tests/package/CMakeLists.txt): builds the consumer project against metagrad
# the way ROUTE says, runs it, and prints its line, which the test matches.
#   cmake -DROUTE=find_package|subdirectory|fetchcontent|pkg-config -DWORK=<dir>
#         [-DPREFIX=<install prefix>] [-DLIBDIR=<its library folder, relative>]
#         [-DSOURCE=<metagrad source dir>] [-DTARGET=<metagrad target>] [-DPC=<pkg-config name>]
#         [-DCUDA=ON] -P route.cmake
# With CUDA=ON it builds only the .cu consumer of metagrad::cuda and fails if nvcc warns.
cmake_minimum_required(VERSION 3.25)
set(consumer "${CMAKE_CURRENT_LIST_DIR}/consumer")
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
  set(last_output "${out}${err}" PARENT_SCOPE)
endfunction()

if(ROUTE STREQUAL "pkg-config")
  # What a Makefile user writes: the flags from metagrad.pc, nothing else.
  if(NOT PC)
    set(PC metagrad)
  endif()
  set(ENV{PKG_CONFIG_PATH} "${PREFIX}/${LIBDIR}/pkgconfig")
  execute_process(COMMAND pkg-config --cflags --libs ${PC} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config does not find ${PC} in ${PREFIX}/${LIBDIR}/pkgconfig")
  endif()
  separate_arguments(flags UNIX_COMMAND "${flags}")
  run(c++ "${consumer}/main.cpp" -o "${WORK}/consumer" ${flags})
else()
  set(args -S "${consumer}" -B "${WORK}/build" -G Ninja -DMETAGRAD_ROUTE=${ROUTE})
  if(PREFIX)
    list(APPEND args "-DCMAKE_PREFIX_PATH=${PREFIX}")
  endif()
  if(SOURCE)
    list(APPEND args "-DMETAGRAD_SOURCE_DIR=${SOURCE}")
  endif()
  if(TARGET)
    list(APPEND args "-DMETAGRAD_CONSUMER_TARGET=${TARGET}")
  endif()
  if(CUDA)
    # PTX only, the device compiler at -O0: a compile check, at half the time
    list(APPEND args -DMETAGRAD_CONSUMER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-virtual
         "-DCMAKE_CUDA_FLAGS=-Xcicc -O0")
    if(NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
      list(APPEND args -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
    endif()
  endif()
  run(${CMAKE_COMMAND} ${args})
  if(CUDA)
    run(${CMAKE_COMMAND} --build "${WORK}/build" --target cuda_consumer)
    if(last_output MATCHES "[Ww]arning")
      message(FATAL_ERROR "nvcc printed warnings compiling the metagrad::cuda consumer")
    endif()
    message(STATUS "metagrad::cuda consumer compiled without warnings")
    return()
  endif()
  run(${CMAKE_COMMAND} --build "${WORK}/build" --target consumer)
  file(RENAME "${WORK}/build/consumer" "${WORK}/consumer")
endif()
# libmetagrad.so of a prefix outside the loader's folders is found as a user's shell would find it
if(PREFIX)
  set(ENV{LD_LIBRARY_PATH} "${PREFIX}/${LIBDIR}")
endif()
run("${WORK}/consumer")
