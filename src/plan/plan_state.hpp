// Internal: a plan's state (Plan::State) and what the library's composites of plans (RingPlan, plan/ring.cpp) do
// with plans that the public API does not offer: a plan whose attention writes split partials into one slot of
// several, and the launch of some of a plan's stages.
#pragma once

#include <cuda.h>

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/get_kernel.hpp"
#include "engine.hpp"
#include "plan/index_check.hpp"
#include "rime/inspect/config.hpp"
#include "rime/inspect/facts.hpp"
#include "rime/plan.hpp"

namespace rime {

struct Plan::State {
  Graph graph;
  std::string device_source;  // for the explanation
  std::string tuned_line;     // for the explanation: a tuned choice recorded for the graph (used or declined)
  Facts facts;
  Config config;
  const engines::Engine* engine = nullptr;
  std::vector<std::shared_ptr<const CompiledKernel>> compiled;  // one per stage
  std::vector<KernelInfo> infos;
  CUcontext context = nullptr;        // the context the kernels are loaded in (a GPU's primary context)
  int device_ordinal = -1;            // and its GPU (-1 until prepared)
  std::vector<CUfunction> functions;  // one per stage once prepared
  std::vector<unsigned> grid_x;       // per stage once prepared: grid x as launched (a persistent stage's: occupancy x SMs)
  std::vector<std::string> launch_failure;  // per stage: the text of a failed launch (no formatting in execute)
  // The workspace's "row_tile_counter" region (a persistent grid's next row tile, engines/sdpa_sm90/layout.h,
  // dynamic_row_tiles), which execute zeroes before the first stage: its offset, or -1.
  int64_t row_tile_counter = -1;
  bool prepared = false;
  // A context-parallel plan's options (PlanOptions::context_parallel): its communicator, checked when prepared.
  std::optional<ContextParallel> context_parallel;
  // Context parallel: the stage the all-gather of the ranks' partials precedes (the combine), found when prepared;
  // -1 for other plans.
  int after_collective = -1;
  // The checked-indices kernel, loaded on the first checked execute (a const execute may load it: once_flag).
  mutable IndexChecker checker;
};

struct PlanInternals {
  static const Plan::State& state(const Plan& plan) { return *plan.state_; }

  // A plan of `graph` whose attention writes its split partials (split_kv 1) into slot `slot` of `slots` and whose
  // combine merges all `slots`, with no collective between them: a pass plan of the prefill ring, whose other slots
  // the ring fills with its other passes. The graph's masks are the pass's own (they need no key offset:
  // context_parallel::ring_passes), so the context-parallel mask check does not apply.
  static Result<Plan> build_slot_plan(const Graph& graph, const PlanOptions& options, int slot, int slots);

  // Launches stages [first, end) of a prepared plan on `stream`, its buffers and workspace checked as execute checks
  // them; no Amax zeroing and no collective (the caller orders what the stages need). Every stage launches plainly
  // (no programmatic dependent launch): the caller's previous work on the stream may be another plan's.
  static Status launch_stages(const Plan& plan, const engines::RoleBuffers& buffers, void* workspace, CUstream stream,
                              int first, int end);
};

}  // namespace rime
