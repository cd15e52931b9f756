// Plans of the examples for a described H200, for the CPU tests of plans (no GPU: nothing is loaded).
#pragma once

#include <optional>
#include <string>

#include "rime/json.hpp"
#include "rime/plan.hpp"
#include "test_paths.hpp"

namespace rime::test {

// The plan of an example graph for an H200 (`smem_per_block` overrides its shared memory per block).
inline Result<Plan> plan_on(const std::string& example, const DeviceDesc& device) {
  Result<Graph> g = load_graph_file(test::example_path(example));
  if (!g.ok()) return g.status();
  PlanOptions opt;
  opt.device = device;
  return Plan::build(g.value(), opt);
}

inline Result<Plan> h200_plan(const std::string& example, std::optional<int> smem_per_block = std::nullopt) {
  DeviceDesc h200 = DeviceDesc::h200();
  if (smem_per_block) h200.smem_per_block = *smem_per_block;
  return plan_on(example, h200);
}

}  // namespace rime::test
