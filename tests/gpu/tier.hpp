// The two tiers of the GPU suite (docs/testing.md) and what a run covered.
//
//   quick (RIME_GPU_TIER=quick): a few draws of every random test and a subset of every case list, chosen so that
//         every row, engine, dtype family and output kind runs at least once; what to run after any kernel change
//         (scripts/test.sh on a GPU machine).
//   full  (the default): every draw and case.
//
// Every plan a test runs is recorded (record_coverage); a run of the whole suite, or the union of per-case runs
// (RIME_GPU_COVERAGE_FILE, then `rime_gpu_tests --rime-coverage FILE`), fails when an item the rows say this GPU
// serves never ran.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "rime/plan.hpp"

namespace rime::test {

enum class Tier { Quick, Full };
Tier gpu_tier();
const char* tier_name(Tier tier);

// The draw count of a random GPU test: the environment variable `env` when set (at least 1), else the tier's.
int tier_draws(const char* env, int full, int quick);

// The cases of a fixed list that the tier runs: all of them, or in the quick tier those at the listed indices.
template <class T>
std::vector<T> tier_cases(const std::vector<T>& all, const std::vector<size_t>& quick) {
  if (gpu_tier() == Tier::Full) return all;
  std::vector<T> out;
  for (size_t i : quick)
    if (i < all.size()) out.push_back(all[i]);
  return out;
}

// What a plan covers ("row sdpa_sm90_fp8", "O NVFP4", "consumer warpgroups 3", ...), recorded once per run of it;
// appended to $RIME_GPU_COVERAGE_FILE when set.
void record_coverage(const Plan& plan);
// The items the rows say a GPU of this arch serves, each of which some test must run.
std::set<std::string> required_coverage(const DeviceDesc& device);
// Prints what was covered and what is missing; false when something is.
bool report_coverage(const std::set<std::string>& covered, const DeviceDesc& device);
const std::set<std::string>& covered_so_far();
// Reads the items a file of record_coverage lines names.
std::set<std::string> read_coverage_file(const std::string& path);

}  // namespace rime::test
