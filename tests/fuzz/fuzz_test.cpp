// The fuzzer's fixed seed set, run by CTest (RC_PARAMS in tests/fuzz/CMakeLists.txt gives the
// seed and the number of programs): random programs through every engine and invariant
// (properties.hpp), shrunk by RapidCheck to a small program when one fails. Then: every op of
// docs/ops.md was reached.
#include <fstream>
#include <regex>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "fuzz/generate.hpp"
#include "fuzz/run.hpp"

namespace {

mg_fuzz::coverage& reached() {
  static mg_fuzz::coverage c;
  return c;
}

}  // namespace

RC_GTEST_PROP(Fuzz, RandomProgramsKeepEveryInvariant, ()) {
  const auto raw = *mg_fuzz::raw_programs();
  const auto l = mg_fuzz::lower(raw);
  reached().add(l.p);
  const auto f = mg_fuzz::failure_of(raw);
  if (f) RC_FAIL(*f);
}

// Every op row of docs/ops.md (its first code span) and every in-place op was reached.
TEST(Fuzz, TheSeedSetReachesEveryOpOfTheDocs) {
  std::ifstream in(MG_FUZZ_OPS_MD);
  ASSERT_TRUE(in) << MG_FUZZ_OPS_MD;
  std::set<std::string> rows;
  const std::regex row(R"(^\| `([^`]+)`)");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) rows.insert(m[1]);
  }
  ASSERT_GT(rows.size(), 60u);
  const auto& c = reached();
  std::cout << c.report();
  for (const auto& r : rows) {
    if (r == "x.to(device)" && !mg_fuzz::device_available()) continue;
    EXPECT_TRUE(c.docs.count(r)) << "docs/ops.md's op " << r << " was not reached";
  }
  for (int i = 0; i < mg_fuzz::op_count; ++i) {
    const auto o = static_cast<mg_fuzz::op>(i);
    if (o == mg_fuzz::op::to_device && !mg_fuzz::device_available()) continue;
    EXPECT_TRUE(c.ops.count(mg_fuzz::name_of(o))) << mg_fuzz::name_of(o) << " was not reached";
  }
}
