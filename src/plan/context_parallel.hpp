// Internal: what a context-parallel plan adds to a plan (PlanOptions::context_parallel, docs/context-parallel.md):
// the options checked against the graph's facts, the caller's communicator checked against the plan, and the
// all-gather of the ranks' split partials between the attention stage and the combine.
#pragma once

#include <cuda.h>

#include <array>
#include <optional>
#include <vector>

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

// Prefill's ring (docs/context-parallel.md), as a schedule: Q, K and V are cut by sequence into 2 x world chunks of
// equal length, and rank r holds chunks r and 2 x world - 1 - r (the zig-zag order). At step t (0 .. world - 1) rank r
// holds the K/V chunks of rank (r - t) mod world; each of its two Q chunks takes each of those K/V chunks that a
// causal mask leaves visible: a K/V chunk before the Q chunk in full, the same chunk under the causal mask (the chunks
// are equal and aligned, so the mask within the pair is the plain causal one and no key offset is needed), a later
// one not at all. Without a causal mask every pair is taken in full. Every rank then does the same work: 2 x world - 1
// full pairs and 2 diagonal ones under a causal mask, 4 x world full pairs without.
struct RingPair {
  int step = 0;      // the ring step: the K/V held are those of rank kv_rank = (rank - step) mod world
  int kv_rank = 0;
  int q_chunk = 0;   // the Q chunk's index among the 2 x world of the sequence
  int kv_chunk = 0;  // the K/V chunk's
  bool causal = false;  // the diagonal pair: the causal mask within it; else every key of the K/V chunk
};
// The sequence chunks rank `rank` holds (zig-zag): {rank, 2 world - 1 - rank}.
std::array<int, 2> zigzag_chunks(int rank, int world);
// Rank `rank`'s pairs in ring order (step by step; within a step, by Q chunk then K/V chunk).
std::vector<RingPair> ring_schedule(int rank, int world, bool causal);

// What a rank launches: per step, each of its Q chunks against every K/V chunk of that step's pairs in one pass. The
// two chunks a rank holds lie one after the other in its buffer (local chunks 0 and 1), so a Q chunk whose pairs at
// a step are both held chunks reads them as one run of 2 x chunk keys: both in full, or the first in full and the
// second its diagonal, which is the causal mask aligned bottom-right over the run (its last row sees every key).
// That is every pair of the late Q chunk under a causal mask at the steps whose K/V come from ranks at or after
// this one, and every pair without a mask. A Q chunk then has at most one pass per step, whose partials go to the
// slot of that step: world slots per Q chunk.
struct RingPass {
  int step = 0;
  int kv_rank = 0;
  int q_chunk = 0;
  int kv_local = 0;   // the held buffer's chunk (0 or 1) where its keys start
  int kv_chunks = 1;  // 1, or 2: both held chunks
  bool causal = false;  // its last K/V chunk is the Q chunk's diagonal: causal, bottom-right over its keys
};
// Rank `rank`'s passes in ring order: ring_schedule's pairs, a Q chunk's two of one step merged.
std::vector<RingPass> ring_passes(int rank, int world, bool causal);

}  // namespace rime::context_parallel
