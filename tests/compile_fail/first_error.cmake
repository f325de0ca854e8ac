# cmake -DBUILD_DIR=<dir> -DTARGET=<target> -DMATCH=<regex> -P first_error.cmake
# Builds a target that must not compile; passes when the compiler's first error contains MATCH
# (a compile-time misuse fails with one sentence, and that sentence is the first error).
cmake_minimum_required(VERSION 3.25)
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${TARGET}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
string(APPEND out "${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "${TARGET} compiled, but it must not")
endif()
string(REGEX MATCH "[^\n]*error: [^\n]*" first "${out}")
if(NOT first MATCHES "${MATCH}")
  message(FATAL_ERROR "the first error of ${TARGET} is not the sentence \"${MATCH}\":\n${first}")
endif()
message(STATUS "first error: ${first}")
