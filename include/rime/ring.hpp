// Context-parallel prefill (docs/context-parallel.md, "Prefill"): ring attention over one sequence sharded by
// sequence across the `world` GPUs of an NCCL communicator.
//
//   // This rank's shard: Q, K, V and O (and Stats) hold chunks `rank` and `2 world - 1 - rank` of the sequence's
//   // 2 world equal chunks (the zig-zag order), one after the other along dims[2].
//   rime::Result<rime::RingPlan> ring = rime::RingPlan::build(local_graph, rime::ContextParallel{comm, rank, world});
//   void* ws = my_alloc(ring->workspace_size());
//   rime::Status st = ring->execute(buffers, ws, stream);  // every rank executes, as for any collective
//
// The ring runs `world` steps. At step t the rank holds the K/V of rank (rank - t) mod world and runs each of its
// Q chunks against those K/V chunks that the mask leaves visible (a K/V chunk before the Q chunk in full, the same
// chunk under the causal mask, a later one not at all), in one pass per Q chunk and step: where both held chunks are
// visible, the pass reads them as one run of keys (context_parallel::ring_passes). Each pass writes the Q chunk's
// split partials (O in fp32 and its LSE) into the slot of its step; meanwhile a second stream sends the K/V held to
// rank + 1 and receives the next from rank - 1 (ncclSend / ncclRecv). After the last step the split-KV combine
// merges each Q chunk's world slots into O (and Stats, the sink, Amax_O) as on one GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "rime/graph.hpp"
#include "rime/plan.hpp"
#include "rime/status.hpp"

namespace rime {

struct Facts;

class RingPlan {
 public:
  // Plans this rank's part of the ring for `local`, the rank's shard of a self-attention prefill (S_q = S_kv, no
  // per-sequence lengths, pages or ragged batches; no mask or a causal one, which the zig-zag order balances).
  // Every rank's local graph has the same shapes. Options as Plan::build's, without context_parallel (`cp` is the
  // ring's). Works without a GPU, as Plan::build does; prepares when the planned GPU is this thread's.
  // InvalidArgument for a rank outside [0, world) or an odd local sequence; NotSupported, naming the reason, for a
  // graph the ring does not serve (and for one whose pass plans no row serves: their decline).
  static Result<RingPlan> build(const Graph& local, const ContextParallel& cp, const PlanOptions& options = {});

  // The local graph, and its facts (the ring's own: the shard as one graph of 2 chunks).
  const Graph& graph() const;
  const Facts& facts() const;
  // Bytes of device memory execute() needs: two K/V buffers for the ring (none at world 1), and per Q chunk the
  // split partials of world slots.
  int64_t workspace_size() const;
  // The plans of the passes: one per slot (step), K/V chunk count and mask the schedule uses.
  std::vector<const Plan*> pass_plans() const;
  // What `rime plan --explain` says of the ring: rank, world, the chunks, the schedule, the pass plans' choices.
  std::string explain() const;

  // Loads the pass plans on GPU `device_ordinal` (the communicator's: InvalidArgument otherwise), makes the
  // transfer stream and the events that order it against the attention, and checks the communicator.
  Status prepare(int device_ordinal);
  bool prepared() const;

  // Runs the ring on `stream`: every rank of the communicator must execute for the step, one execute at a time
  // per RingPlan (the transfer stream and events are the plan's). `buffers` maps every tensor uid of the local
  // graph to device memory; K and V must each be one block without gaps (their bytes are sent as one). No device
  // allocation, no host allocation, no synchronisation.
  Status execute(const std::unordered_map<int64_t, void*>& buffers, void* workspace, void* stream) const;

  // The K/V transfers of the last execute, once it has finished (the caller synchronized its stream; CudaError
  // before): their time in all, and the part of it the attention waited for them (exposed; the rest ran behind the
  // passes of the step before). Timed with events on the two streams. None at world 1.
  struct TransferTimes {
    int transfers = 0;
    double transfer_ms = 0, exposed_ms = 0;
  };
  Result<TransferTimes> transfer_times() const;

  struct State;  // opaque; shared by copies

 private:
  friend struct RingInternals;  // plan/ring_internal.hpp: the tests' transport
  std::shared_ptr<State> state_;
};

}  // namespace rime
