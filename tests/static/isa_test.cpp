// The instruction set of the build (Note [Instruction set]): what metagrad::metagrad carries
// (METAGRAD_ARCH, cmake/arch.cmake) and the check every program runs before main.
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include <metagrad/core/isa.hpp>

#if MG_ISA_CHECK

namespace {

using mg::detail::cpu_features;

constexpr cpu_features all{
    .sse4_2 = true, .avx = true, .avx2 = true, .fma = true, .bmi2 = true, .avx512f = true};

bool has_x86_64_v3(const cpu_features& c) { return c.avx && c.avx2 && c.fma && c.bmi2; }

// What CMake decided: METAGRAD_ARCH and the -march it resolved to (tests/static/CMakeLists.txt).
const std::string arch_option = MG_TEST_ARCH_OPTION, arch_resolved = MG_TEST_ARCH_RESOLVED;

}  // namespace

TEST(InstructionSet, TheTargetCarriesX86_64_V3WhereTheMachineHasIt) {
  // METAGRAD_ARCH=auto on a machine with AVX2 and FMA must compile this file for them.
  if (arch_option == "auto" && has_x86_64_v3(mg::detail::this_cpu())) {
    EXPECT_EQ(arch_resolved, "x86-64-v3");
  }
  if (arch_resolved == "x86-64-v3") {
#if !defined(__AVX2__) || !defined(__FMA__)
    ADD_FAILURE() << "METAGRAD_ARCH resolved to x86-64-v3 but this file was compiled without it";
#endif
  }
}

TEST(InstructionSet, ThisProgramPassedItsOwnCheck) {
  EXPECT_TRUE(mg::detail::instruction_set_checked);
  EXPECT_EQ(mg::detail::missing_feature(mg::detail::this_cpu()), nullptr);
}

TEST(InstructionSet, AMissingFeatureIsNamed) {
  EXPECT_EQ(mg::detail::missing_feature(all), nullptr);
  cpu_features no_avx2 = all;
  no_avx2.avx2 = false;
  const char* missing = mg::detail::missing_feature(no_avx2);
#if defined(__AVX2__)
  ASSERT_NE(missing, nullptr);
  EXPECT_STREQ(missing, "AVX2");
#else
  EXPECT_EQ(missing, nullptr);  // compiled without AVX2: a CPU without it runs this program
#endif
  cpu_features no_fma = all;
  no_fma.fma = false;
#if defined(__FMA__)
  EXPECT_STREQ(mg::detail::missing_feature(no_fma), "FMA");
#else
  EXPECT_EQ(mg::detail::missing_feature(no_fma), nullptr);
#endif
}

#if defined(__AVX2__)
TEST(InstructionSetDeathTest, ACpuWithoutTheFeatureStopsWithTheFix) {
  cpu_features old_cpu = all;
  old_cpu.avx2 = false;
  EXPECT_DEATH(mg::detail::check_instruction_set(old_cpu),
               "metagrad: this program was compiled for CPUs with AVX2 .*METAGRAD_ARCH=none");
}
#endif

#endif  // MG_ISA_CHECK
