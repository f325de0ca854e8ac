# The Thrust backend on the CPU for the tests: the target metagrad_thrust_cpu (Thrust with the CPP
# or OMP device system, METAGRAD_THRUST_DEVICE), when METAGRAD_THRUST_TESTS is on and CCCL is
# found. Included by tests/CMakeLists.txt before the test directories: the op table (tests/ops)
# and the Thrust tests (tests/thrust) both use it.
if(NOT METAGRAD_THRUST_TESTS)
  return()
endif()

if(NOT CCCL_FOUND)  # found (or not) by the top-level CMakeLists.txt
  message(STATUS "metagrad: CCCL (Thrust) not found: the Thrust tests are skipped "
                 "(install the CUDA toolkit, or set CCCL_DIR)")
  return()
endif()

if(METAGRAD_THRUST_DEVICE STREQUAL "OMP")
  find_package(OpenMP COMPONENTS CXX)
  if(NOT TARGET OpenMP::OpenMP_CXX)
    message(FATAL_ERROR "metagrad: METAGRAD_THRUST_DEVICE=OMP needs OpenMP for C++ (g++ with libgomp)")
  endif()
  thrust_set_OMP_target(OpenMP::OpenMP_CXX)
elseif(NOT METAGRAD_THRUST_DEVICE STREQUAL "CPP")
  message(FATAL_ERROR "metagrad: METAGRAD_THRUST_DEVICE must be CPP or OMP, not '${METAGRAD_THRUST_DEVICE}'")
endif()
if(NOT TARGET metagrad_thrust_cpu)
  thrust_create_target(metagrad_thrust_cpu HOST CPP DEVICE ${METAGRAD_THRUST_DEVICE})
endif()
