// Internal: what a context-parallel plan adds to a plan (PlanOptions::context_parallel, docs/context-parallel.md):
// the options checked against the graph's facts, the caller's communicator checked against the plan, and the
// all-gather of the ranks' split partials between the attention stage and the combine.
#pragma once

#include <cuda.h>

#include <optional>

#include "rime/inspect/config.hpp"
#include "rime/inspect/facts.hpp"
#include "rime/plan.hpp"
#include "rime/status.hpp"

namespace rime::context_parallel {

// Records the options in the facts (Facts::context_parallel). InvalidArgument for a world below 1 or a rank outside
// [0, world); NotSupported for a mask that needs the keys' global positions, which the kernels do not take: a
// window or band, or a causal mask unless it is a bottom-right one over a single query row (the decode case, where
// every key is visible).
Status apply(Facts& facts, const std::optional<ContextParallel>& options);

// The caller's communicator against the plan: NCCL loads, the communicator is set, its size and this rank are the
// options', and its GPU is the one the plan is loaded on (InvalidArgument naming both values otherwise).
Status check_communicator(const ContextParallel& options, int device_ordinal);

// Queues on `stream` the all-gather of every rank's partials into every rank's workspace (in place: rank r's
// split_kv slots of o_partial and lse_partial to the same slots everywhere), in one NCCL group.
Status all_gather(const Facts& facts, const Config& config, void* workspace, void* comm, CUstream stream);

}  // namespace rime::context_parallel
