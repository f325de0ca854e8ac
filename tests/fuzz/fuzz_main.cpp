// metagrad_fuzz [seconds] [folder] [first seed]: random programs with fresh seeds for that long
// (scripts/fuzz.sh builds and runs it). Each failure is shrunk (RapidCheck's shrinks, taken
// greedily) and written to the folder as a standalone reproduction, a GoogleTest case. Prints
// progress every 10 s and ends with `fuzz: N programs, M failures`; exits 1 when M is not 0.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <set>
#include <string>

#include "fuzz/generate.hpp"

int main(int argc, char** argv) {
  using clock = std::chrono::steady_clock;
  const double seconds = argc > 1 ? std::atof(argv[1]) : 60;
  const std::filesystem::path folder = argc > 2 ? argv[2] : "fuzz-failures";
  const std::uint64_t first =
      argc > 3 ? std::strtoull(argv[3], nullptr, 10) : std::random_device{}();
  const auto gen = mg_fuzz::raw_programs();
  const auto start = clock::now();
  const auto until =
      start + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
  auto report_at = start + std::chrono::seconds(10);
  long programs = 0, failures = 0;
  std::set<std::string> kinds;
  mg_fuzz::coverage cov;
  std::cout << "fuzz: seeds from " << first << ", " << seconds << " s, failures to " << folder
            << std::endl;
  for (std::uint64_t seed = first; clock::now() < until; ++seed) {
    // sizes cycle through 0..100 as RapidCheck's do
    const int size = static_cast<int>(programs % 101);
    auto shrinkable = gen(rc::Random(seed), size);
    ++programs;
    cov.add(mg_fuzz::lower(shrinkable.value()).p);
    auto failure = mg_fuzz::failure_of(shrinkable.value());
    if (failure) {
      ++failures;
      // greedy shrinking: the first shrink that still fails, until none does
      for (int steps = 0; steps < 2000;) {
        bool smaller = false;
        auto seq = shrinkable.shrinks();
        while (auto next = seq.next()) {
          ++steps;
          if (auto f = mg_fuzz::failure_of(next->value())) {
            shrinkable = *next;
            failure = f;
            smaller = true;
            break;
          }
        }
        if (!smaller) break;
      }
      const auto p = mg_fuzz::lower(shrinkable.value()).p;
      std::filesystem::create_directories(folder);
      const std::string name = "Seed" + std::to_string(seed) + "Size" + std::to_string(size);
      std::ofstream(folder / (name + ".cpp")) << mg_fuzz::to_cpp(p, name, *failure);
      const std::string kind = failure->substr(0, failure->find_first_of(":\n"));
      kinds.insert(kind);
      std::cout << "fuzz: FAILURE (seed " << seed << ", size " << size << ", written to "
                << (folder / (name + ".cpp")).string() << "): " << *failure << std::endl;
    }
    if (clock::now() >= report_at) {
      const double t = std::chrono::duration<double>(clock::now() - start).count();
      std::cout << "fuzz: " << programs << " programs in " << static_cast<int>(t) << " s ("
                << static_cast<int>(programs / t) << "/s), " << cov.ops.size() << " of "
                << mg_fuzz::op_count << " ops, " << cov.pairs.size() << " op pairs, " << failures
                << " failures" << std::endl;
      report_at += std::chrono::seconds(10);
    }
  }
  std::cout << cov.report();
  for (const auto& k : kinds) std::cout << "failure kind: " << k << "\n";
  std::cout << "fuzz: " << programs << " programs, " << failures << " failures" << std::endl;
  return failures == 0 ? 0 : 1;
}
