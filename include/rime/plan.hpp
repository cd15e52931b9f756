// Plans (SPEC section 9): a graph compiled for one device, cached, and executed many times.
//
//   rime::Result<rime::Plan> plan = rime::Plan::build(graph);       // analyze, match, choose, compile
//   void* ws = my_alloc(plan->workspace_size());
//   rime::Status st = plan->execute({{q_uid, q_ptr}, ...}, ws, stream);  // no allocation, sync or compile
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "rime/device.hpp"
#include "rime/graph.hpp"
#include "rime/status.hpp"

namespace rime {

// What a plan was made from and decided, for tools: rime/inspect/facts.hpp and rime/inspect/config.hpp.
struct Facts;
struct Config;

// Context parallelism (docs/context-parallel.md): this process is rank `rank` of `world` GPUs that hold one
// sequence's K/V sharded by sequence (each rank's graph is its own shard: K, V and per-sequence lengths are the
// rank's keys, Q and O the whole query); the plan computes the rank's split partials (O in fp32 and its LSE),
// all-gathers every rank's with NCCL on the execute stream, and merges them with the split-KV combine, so that every
// rank's O is the attention over all ranks' keys. `comm` is the caller's ncclComm_t over exactly these ranks (rime
// never creates a communicator); every rank must execute its plan for each step, as for any collective, and every
// rank's plan must have the same split_kv (equal shard shapes choose alike; pin knobs.split_kv otherwise). NCCL is
// opened at run time (RIME_NCCL_LIBRARY, else libnccl.so.2). Served: graphs whose masks do not need global key
// positions (no causal mask over several query rows, no window or band) on rows that write split partials.
struct ContextParallel {
  void* comm = nullptr;  // ncclComm_t
  int rank = 0;
  int world = 1;
};

struct PlanOptions {
  // The device to plan for. Absent: the GPU device_ordinal names when there is one, else the H200 defaults (sm_90a,
  // 132 SMs).
  std::optional<DeviceDesc> device;
  // Where `device` came from, for the explanation's first line ("given by --arch/--sms"); empty: "given by the
  // caller" when `device` is set, else what was found.
  std::string device_source;
  // The GPU (CUDA device ordinal) to plan for and load the kernels on. Absent: the GPU of this thread's current CUDA
  // context, else GPU 0, and the H200 defaults without a GPU. Given, that GPU must exist (InvalidArgument
  // otherwise, CudaError without a driver); with `device` also given, `device` is planned for and the kernels are
  // loaded on this GPU when its arch is the same.
  std::optional<int> device_ordinal;
  // Use the configuration `rime tune` recorded for this graph's shape class on this GPU, driver and rime version
  // (include/rime/tune.hpp) in place of the heuristics' when there is one and the rows accept it; the explanation
  // says which and by how much it was faster. A graph that pins split_kv or tile is never overridden.
  bool use_tuned = true;
  // Set: a context-parallel plan (ContextParallel above). A tuned choice is not used for it.
  std::optional<ContextParallel> context_parallel;
};

// What `rime plan --explain` prints, from the one function the CLI prints it with: the graph and the device, the
// analyzer's facts, every capability row's verdict and, when a row serves the graph, the choice (tile, consumer
// warpgroups, split-KV candidates with their costs, workspace, stages).
struct Explanation {
  std::string text;
  std::string json;     // the same as a JSON document (the fields of `rime plan --json`)
  bool served = false;  // a row serves the graph
  bool tuned = false;   // the choice is one `rime tune` recorded (include/rime/tune.hpp), not the heuristics'
  std::string decline;  // when none does: NotSupported's message, every row's reason
};
// The plan cache's directory for this process, instead of RIME_CACHE_DIR / XDG_CACHE_HOME / HOME
// (docs/cache.md): before the first plan only (InvalidArgument after, naming the directory in use). The
// directory is checked as the environment's is: owned by this user and not writable by others.
Status set_cache_dir(const std::string& dir);
// The plan cache's directory in use (set_cache_dir's, else the environment's); empty when the disk cache is off.
std::string cache_dir();

// Explains a graph without compiling, also one that no row serves: InvalidGraph (or InvalidJson) as validate()
// gives them.
Result<Explanation> explain(const Graph& graph, const PlanOptions& options = {});

struct KernelInfo {
  std::string role;  // the stage's role ("v_transpose", "attention", "combine"), in launch order
  std::string engine;
  std::string name_expression;
  std::string lowered_name;
  std::string key;     // the plan-cache key (sha256 hex)
  std::string arch;
  std::string origin;  // "compiled", "disk" or "memory"
  double compile_ms = 0;
  int64_t cubin_bytes = 0;
};

// Options of one execute.
struct ExecuteOptions {
  // Checked indices: before the plan's kernels, verify on the device, in stream order, the data the graph cannot
  // validate (docs/graph-json.md): 0 <= seq_len_q[b] <= S_q, 0 <= seq_len_kv[b] <= S_kv, a ragged side's
  // 0 <= cu[b] <= cu[b + 1] <= T with lengths at most max_seqlen, and every page id a sequence's keys occupy in
  // [0, num_pages). A bad entry gives InvalidArgument naming it (the first in batch order, a sequence's lengths
  // before its pages), and nothing is launched. For debugging: it compiles its
  // kernel on first use, allocates an 8-byte word and synchronises the stream, so it is not capturable in a
  // CUDA graph. A graph without per-sequence lengths has nothing to check.
  bool check_indices = false;
  // Set: this call's K and V hold kv_extent->length keys (1 <= length <= the graph's S_kv) with their own strides,
  // and the graph's S_kv is a capacity. One plan then serves every length up to it: a cache that grows a token a
  // step (transformers' DynamicCache) keeps one plan instead of making one per length. Everything the graph says
  // of S_kv reads the length instead (the key bounds, the bottom-right shift, the per-sequence lengths' clamp);
  // the plan's choices (tile, split count) stay those made for the capacity. Dense K and V only (not paged,
  // ragged or context-parallel); the strides keep the graph's alignment (multiples of 16 bytes where its K and V
  // had them). InvalidArgument otherwise, naming the field.
  std::optional<KvExtent> kv_extent;
};

class Plan {
 public:
  // Validates, analyzes, matches, chooses and compiles (through the cache). Works without a GPU; when the
  // planned device is the current GPU, the kernels are also loaded so that execute() is ready.
  static Result<Plan> build(const Graph& graph, const PlanOptions& options = {});
  // Restores a plan from its JSON artifact (docs/plan-json.md) without re-running the heuristics: the recorded
  // decision is re-matched against the graph's facts and re-derived, and the artifact is refused when anything
  // it records disagrees with what this rime derives (InvalidJson for a malformed artifact or another version,
  // NotSupported when its row declines the graph, CacheCorrupt for a recorded size, stage or kernel key that
  // differs). The kernels come from the cache or are recompiled.
  // The kernels are loaded as Plan::build loads them, on GPU `device_ordinal` when given (PlanOptions::device_ordinal).
  static Result<Plan> load(const std::string& artifact_json, std::optional<int> device_ordinal = std::nullopt);
  // The versioned, self-describing artifact (docs/plan-json.md).
  std::string to_json() const;

  const Graph& graph() const;
  const Facts& facts() const;
  const Config& config() const;
  const std::vector<KernelInfo>& kernels() const;
  // The explanation of this plan (as rime::explain gives it for the plan's graph and device).
  Explanation explain() const;
  // Bytes of device memory execute() needs as its workspace (0 when none): derived.workspace_bytes.
  int64_t workspace_size() const;

  // Loads the kernels on the GPU of this thread's current context (else GPU 0), or on GPU `device_ordinal`, in its
  // primary context. CudaError without a GPU, or when the plan is for another arch; a prepared plan stays where it
  // was loaded (InvalidArgument when asked for another GPU: plan once per GPU).
  Status prepare();
  Status prepare(int device_ordinal);
  bool prepared() const;
  // The GPU the kernels are loaded on, -1 before prepare.
  int device_ordinal() const;

  // Runs the plan on `stream` (a CUstream of the plan's GPU; nullptr is the legacy default stream), in the context
  // the kernels were loaded in (made current for the call when another is). `buffers` maps every tensor
  // uid of the graph to device memory. No allocation, no synchronisation, no compile: capturable in a CUDA
  // graph. Outputs Amax_O / Amax_S are zeroed on the stream first. InvalidArgument for a missing, misaligned or
  // overlapping buffer or workspace (nothing is launched then). The kernels read the inputs and write the outputs
  // in `stream`'s order only: writes the caller made on another stream (a cuMemsetD8 or pageable cuMemcpyHtoD,
  // which run on the legacy stream, which a non-blocking stream does not wait for) must be ordered before it by
  // the caller (an event, or a synchronize), as for any kernel. A context-parallel plan also queues its NCCL
  // all-gather on `stream`, between the attention and the combine; every rank must execute for the step.
  Status execute(const std::unordered_map<int64_t, void*>& buffers, void* workspace, void* stream) const;
  Status execute(const std::unordered_map<int64_t, void*>& buffers, void* workspace, void* stream,
                 const ExecuteOptions& options) const;

  struct State;  // opaque; shared by copies of a plan (immutable once prepared)

 private:
  friend struct PlanInternals;  // the library's composites of plans (src/plan/plan_state.hpp)
  std::shared_ptr<State> state_;
};

}  // namespace rime
