// Internal: a whole prefill graph cut into the shards of a ring of `world` ranks (rime/ring.hpp), and back. Rank r's
// shard holds chunks r and 2 world - 1 - r of the sequence's 2 world equal chunks of Q, K, V, O and Stats, one
// after the other along dims[2]; every other tensor is the whole graph's. Used by `rime run --ranks` and the GPU
// tests.
#pragma once

#include "rime/graph.hpp"
#include "rime/status.hpp"
#include "testing/reference/sdpa.hpp"
#include "testing/trial.hpp"

namespace rime::testing {

// The shard's graph: the sequence tensors with dims[2] = S / world, in the whole tensor's layout (BHSD or BSHD,
// packed). InvalidArgument when S is not a multiple of 2 world, or S_q and S_kv differ; InvalidArgument for another
// layout.
Result<Graph> ring_shard_graph(const Graph& whole, int world);

// Rank `rank`'s inputs: its two chunks of Q, K and V; the other inputs as they are.
TrialInputs ring_shard_inputs(const Graph& whole, const Graph& shard, const TrialInputs& inputs, int rank, int world);

// Puts rank `rank`'s outputs (O, Stats: its chunks; Amax_O: the max with what `whole_outputs` holds) into the whole
// graph's, which the first call sizes.
void ring_gather_outputs(const Graph& whole, const Graph& shard, int rank, int world,
                         const reference::HostTensors& shard_outputs, reference::HostTensors& whole_outputs);

}  // namespace rime::testing
