# The instruction set of the programs that link metagrad::metagrad (Note [Instruction set] in
# detail/metagrad/core/isa.hpp). metagrad's fused loops are instantiated in the user's own
# translation units, so they run with the instruction set those are compiled for: SSE2 under
# the compilers' defaults, AVX2 and FMA with -march=x86-64-v3 (4.5x faster on the 1e6-element
# loss of benchmarks/fused_sum.cpp). METAGRAD_ARCH:
#   auto    -march=x86-64-v3 when the building machine has it (AVX2, FMA, BMI2), the
#           compiler is GCC or Clang on x86-64, not cross-compiling, and the user's own flags
#           name no -march; otherwise nothing
#   none    nothing: the compiler's default, or the user's own flags (a portable binary)
#   <arch>  -march=<arch>, e.g. native or x86-64-v2
# A program built for an instruction set checks before main that its CPU has it, and stops with
# a message naming METAGRAD_ARCH instead of an illegal instruction.
set(METAGRAD_ARCH "auto" CACHE STRING
    "Instruction set of programs linking metagrad::metagrad: auto, none, or an -march value")

function(metagrad_resolve_arch out)
  set(arch "${METAGRAD_ARCH}")
  if(arch STREQUAL "auto")
    set(arch "")
    string(TOUPPER "${CMAKE_BUILD_TYPE}" config)
    set(user_flags "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${config}}")
    if(user_flags MATCHES "-march=|-mcpu=|-mavx|-msse|/arch:")
      set(why "the compiler flags choose one")
    elseif(CMAKE_CROSSCOMPILING OR NOT CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$"
           OR NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
      set(why "not a native x86-64 build with GCC or Clang")
    else()
      include(CheckCXXSourceRuns)
      include(CMakePushCheckState)
      cmake_push_check_state(RESET)
      set(CMAKE_REQUIRED_QUIET ON)
      check_cxx_source_runs([=[
int main() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                 __builtin_cpu_supports("bmi2") ? 0 : 1;
}]=] METAGRAD_BUILD_MACHINE_HAS_X86_64_V3)
      set(CMAKE_REQUIRED_FLAGS -march=x86-64-v3)
      check_cxx_source_runs("int main() { return 0; }" METAGRAD_COMPILER_HAS_X86_64_V3)
      cmake_pop_check_state()
      if(METAGRAD_BUILD_MACHINE_HAS_X86_64_V3 AND METAGRAD_COMPILER_HAS_X86_64_V3)
        set(arch x86-64-v3)
        set(why "this machine has AVX2 and FMA; -DMETAGRAD_ARCH=none for a binary that runs on any x86-64")
      else()
        set(why "this machine or compiler lacks x86-64-v3")
      endif()
    endif()
  elseif(arch MATCHES "^(none|NONE|OFF|off)?$")
    set(arch "")
    set(why "METAGRAD_ARCH=none")
  else()
    set(why "METAGRAD_ARCH=${arch}")
  endif()
  if(arch)
    message(STATUS "metagrad: programs linking metagrad::metagrad compile with -march=${arch} (${why})")
  elseif(why STREQUAL "the compiler flags choose one")
    message(STATUS "metagrad: metagrad::metagrad adds no -march (${why})")
  else()
    # Users must not be several times slower without being told (README, "Compiler flags").
    message(NOTICE "metagrad: metagrad::metagrad adds no -march (${why}): its SIMD loops run "
                   "with the compiler's default instruction set (SSE2 on x86-64), 4.5 times "
                   "slower than -march=x86-64-v3 on the loss of benchmarks/fused_sum.cpp. Set "
                   "METAGRAD_ARCH (x86-64-v3, native) or -march in CMAKE_CXX_FLAGS where the "
                   "program runs on such CPUs.")
  endif()
  set(${out} "${arch}" PARENT_SCOPE)
endfunction()
