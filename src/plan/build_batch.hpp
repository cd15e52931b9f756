// Plans built on every core: NVRTC compiles one kernel per thread, and the compiles are most of a plan's build.
// Used where many plans are built at once (rime::tune's candidates, the oracle, the GPU tests).
#pragma once

#include <algorithm>
#include <cstddef>
#include <future>
#include <thread>
#include <vector>

#include "rime/plan.hpp"

namespace rime {

// build(i) for i in [0, n), as many at a time as the machine has hardware threads (at least two); the results in
// the order of i. `build` returns Result<Plan> and may run on any thread.
template <class Build>
std::vector<Result<Plan>> build_plans_in_batches(size_t n, Build build) {
  std::vector<Result<Plan>> out;
  out.reserve(n);
  const size_t workers = std::max(2u, std::thread::hardware_concurrency());
  std::vector<std::future<Result<Plan>>> batch;
  for (size_t k = 0; k < n; k += workers) {
    batch.clear();
    for (size_t j = k; j < std::min(n, k + workers); ++j)
      batch.push_back(std::async(std::launch::async, [&build, j] { return build(j); }));
    for (auto& f : batch) out.push_back(f.get());
  }
  return out;
}

}  // namespace rime
