// RingPlan: context-parallel prefill as a ring of pass plans (rime/ring.hpp, docs/context-parallel.md).
#include "rime/ring.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <tuple>
#include <utility>

#include "log/log.hpp"
#include "plan/explain.hpp"
#include "plan/bindings.hpp"
#include "plan/context_parallel.hpp"
#include "plan/plan_state.hpp"
#include "plan/ring_internal.hpp"
#include "runtime/driver.hpp"
#include "runtime/nccl.hpp"
#include "status_macros.hpp"

namespace rime {

namespace {

constexpr int64_t kAlign = 256;
int64_t aligned(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// A role's index in the per-role arrays (engines::RoleBuffers, State::chunk_bytes).
constexpr size_t role_index(Role r) { return static_cast<size_t>(r); }

// The tensors cut by sequence along dims[2]: Q, O and Stats by the rank's Q chunks, K and V by the K/V chunks held.
constexpr Role kQSide[] = {Role::Q, Role::O, Role::Stats};
constexpr Role kKvSide[] = {Role::K, Role::V};

// Elements from a tensor's first to its last, +1.
int64_t extent_elements(const TensorFacts& t) {
  int64_t e = 1;
  for (size_t i = 0; i < t.dims.size(); ++i) e += (t.dims[i] - 1) * t.strides[i];
  return e;
}
int64_t elements(const TensorFacts& t) {
  int64_t n = 1;
  for (int64_t d : t.dims) n *= d;
  return n;
}

// The graph of one pass: the local graph with Q, O and Stats cut to a chunk of `chunk` rows and K and V to
// `kv_chunks` chunks (same strides: a chunk is a view of the local tensor or of a held K/V buffer laid out as it),
// the pass's mask, split_kv 1. Causal over two chunks aligns bottom-right: the second chunk is the Q chunk's
// diagonal, after every key of the first; over one chunk both alignments are the same mask.
Result<Graph> pass_graph(const Graph& local, const Facts& f, int64_t chunk, int kv_chunks, bool causal) {
  Graph g(local.name() + fmt::format(" (ring pass over {} K/V chunk{}{})", kv_chunks, kv_chunks > 1 ? "s" : "",
                                     causal ? ", the last its diagonal" : ""));
  for (TensorDesc t : local.tensors()) {
    for (Role r : kQSide)
      if (f.operand(r).bound && f.operand(r).uid == t.uid) t.dims[2] = chunk;
    for (Role r : kKvSide)
      if (f.operand(r).bound && f.operand(r).uid == t.uid) t.dims[2] = chunk * kv_chunks;
    g.add_tensor(t);
  }
  SdpaOp op = *local.op();
  op.attributes.causal = causal;
  op.attributes.alignment = kv_chunks > 1 ? DiagonalAlignment::BottomRight : DiagonalAlignment::TopLeft;
  op.attributes.split_kv = 1;
  RIME_RETURN_IF_ERROR(g.set_op(op));
  return g;
}

// A pass plan's identity: the slot it writes (its step), how many K/V chunks it reads, and its mask.
struct PassKey {
  int slot = 0, kv_chunks = 1;
  bool causal = false;
  bool operator<(const PassKey& o) const {
    return std::tie(slot, kv_chunks, causal) < std::tie(o.slot, o.kv_chunks, o.causal);
  }
};
PassKey key_of(const context_parallel::RingPass& p) { return {p.step, p.kv_chunks, p.causal}; }

// What the ring serves, with the reason when it does not.
Status check_servable(const Facts& f, const ContextParallel& cp) {
  if (cp.world < 1 || cp.rank < 0 || cp.rank >= cp.world)
    return Status(StatusCode::InvalidArgument,
                  fmt::format("ring: rank {} of world {}: the world must be at least 1 and the rank in [0, world)",
                              cp.rank, cp.world));
  auto no = [](const std::string& why) { return Status(StatusCode::NotSupported, "ring: " + why); };
  if (f.paged || f.ragged_q || f.ragged_kv || f.mask.padding)
    return no("per-sequence lengths, pages and ragged batches are not cut into ring chunks (a dense shard only)");
  if (f.mask.window_left || f.mask.band_right)
    return no("a window or band mask crosses chunks at offsets the pass plans do not take");
  if (f.S_q != f.S_kv)
    return no(fmt::format("the ring shards a self-attention prefill: S_q {} and S_kv {} differ", f.S_q, f.S_kv));
  if (f.is_mxfp8) return no("MXFP8 inputs: their scale tensors are not cut into chunks");
  if (f.o_block_scale) return no("a block-scaled O: sf_o is not cut into chunks");
  if (f.wants_amax_s) return no("Amax_S: a max over per-pass P over-reports the merged P");
  if (f.S_q % 2 != 0)
    return Status(StatusCode::InvalidArgument,
                  fmt::format("ring: the local sequence holds two equal chunks, and S {} is odd", f.S_q));
  for (Role r : kKvSide) {
    const TensorFacts& t = f.operand(r);
    if (extent_elements(t) != elements(t))
      return no(fmt::format("{} ({}) has gaps between its elements (a view of a larger buffer): the ring sends it as "
                            "one block of its bytes",
                            to_string(r), t.name));
  }
  return Status::success();
}

// The ring's transfers over the caller's communicator.
class NcclTransport final : public RingTransport {
 public:
  NcclTransport(void* comm, int rank, int world) : comm_(comm), next_((rank + 1) % world), prev_((rank + world - 1) % world) {}
  Status exchange(int, const void* send_k, const void* send_v, void* recv_k, void* recv_v, size_t k_bytes,
                  size_t v_bytes, CUstream stream) const override {
    const nccl::Api* n = nccl::api();
    if (!n) return nccl::load_status();
    RIME_RETURN_IF_ERROR(nccl::check(n->ncclGroupStart(), "ncclGroupStart"));
    const nccl::Result r[] = {n->ncclSend(send_k, k_bytes, nccl::kUint8, next_, comm_, stream),
                              n->ncclSend(send_v, v_bytes, nccl::kUint8, next_, comm_, stream),
                              n->ncclRecv(recv_k, k_bytes, nccl::kUint8, prev_, comm_, stream),
                              n->ncclRecv(recv_v, v_bytes, nccl::kUint8, prev_, comm_, stream)};
    const nccl::Result end = n->ncclGroupEnd();
    for (nccl::Result x : r) RIME_RETURN_IF_ERROR(nccl::check(x, "ncclSend / ncclRecv (ring K/V)"));
    return nccl::check(end, "ncclGroupEnd");
  }

 private:
  void* comm_;
  int next_, prev_;
};

}  // namespace

struct RingPlan::State {
  ContextParallel cp;
  Graph local;
  Facts facts;  // the local graph's
  int64_t chunk = 0;
  bool causal = false;
  std::vector<context_parallel::RingPass> schedule;
  std::map<PassKey, Plan> passes;
  int combine_stage = 0;  // the pass plans' first combine stage
  // Per sequence tensor, by role: bytes from its chunk 0 to its chunk 1 (C rows of dims[2]).
  std::array<int64_t, kRoleCount> chunk_bytes{};
  int64_t k_bytes = 0, v_bytes = 0;        // K's and V's storage, as sent
  int64_t kv_offset[2] = {0, 0};           // the held K/V buffers in the workspace (world > 1); V after K
  int64_t partial_offset[2] = {0, 0};      // each Q chunk's pass workspace
  int64_t pass_workspace = 0, lse_offset = 0, lse_count = 0;  // in a pass workspace: its LSE slots
  int64_t workspace_bytes = 0;
  // Prepared:
  bool prepared = false;
  int device_ordinal = -1;
  CUcontext context = nullptr;
  CUstream transfer = nullptr;
  CUevent start = nullptr;
  // Per step but the last: the transfer's start and end on the transfer stream, the end of the step's passes.
  std::vector<CUevent> sending, received, computed;

  ~State() {
    const driver::Api* api = driver::api();
    if (!api || !context) return;
    const driver::ScopedContext in_ctx(context);
    for (CUevent e : sending) api->cuEventDestroy(e);
    for (CUevent e : received) api->cuEventDestroy(e);
    for (CUevent e : computed) api->cuEventDestroy(e);
    if (start) api->cuEventDestroy(start);
    if (transfer) api->cuStreamDestroy(transfer);
  }
};

Result<RingPlan> RingPlan::build(const Graph& local, const ContextParallel& cp, const PlanOptions& options) {
  if (options.context_parallel)
    return Status(StatusCode::InvalidArgument,
                  "ring: PlanOptions::context_parallel is set; the ring's communicator, rank and world are its own "
                  "argument");
  const Result<DeviceResolution> resolved = resolve_device(options);
  if (!resolved.ok()) return resolved.status();
  Result<Facts> facts = analyze(local, resolved->device);
  if (!facts.ok()) return facts.status();
  RIME_RETURN_IF_ERROR(check_servable(facts.value(), cp));

  RingPlan ring;
  ring.state_ = std::make_shared<State>();
  State& s = *ring.state_;
  s.cp = cp;
  s.local = local;
  s.facts = facts.value();
  const Facts& f = s.facts;
  s.chunk = f.S_q / 2;
  s.causal = f.mask.causal;
  s.schedule = context_parallel::ring_passes(cp.rank, cp.world, s.causal);

  PlanOptions pass_options = options;
  pass_options.use_tuned = false;
  pass_options.device = resolved->device;
  pass_options.device_source = resolved->source;
  for (const context_parallel::RingPass& p : s.schedule) {
    const PassKey key = key_of(p);
    if (s.passes.count(key)) continue;
    Result<Graph> g = pass_graph(local, f, s.chunk, p.kv_chunks, p.causal);
    if (!g.ok()) return g.status();
    Result<Plan> plan = PlanInternals::build_slot_plan(g.value(), pass_options, p.step, cp.world);
    if (!plan.ok())
      return Status(plan.status().code(),
                    fmt::format("ring: the plan of a pass over {} K/V chunk{}{}: {}", p.kv_chunks,
                                p.kv_chunks > 1 ? "s" : "", p.causal ? " (causal)" : "", plan.status().message()));
    s.passes.emplace(key, std::move(plan.value()));
  }

  // Every pass plan has the same stages and workspace: a Q chunk's passes share its workspace, slot by slot.
  const Plan& first = s.passes.begin()->second;
  const Derived& d0 = first.config().derived;
  s.combine_stage = -1;
  for (size_t i = 0; i < d0.stages.size(); ++i)
    if (d0.stages[i].role == "combine" && s.combine_stage < 0) s.combine_stage = static_cast<int>(i);
  const WorkspaceRegion* lse = d0.region("lse_partial");
  if (s.combine_stage < 0 || !lse)
    return Status(StatusCode::Internal, "ring: a pass plan without split partials and their combine");
  for (const auto& [key, plan] : s.passes) {
    const Derived& d = plan.config().derived;
    if (d.workspace_bytes != d0.workspace_bytes || d.stages.size() != d0.stages.size() ||
        d.stages[s.combine_stage].role != "combine" || !d.region("lse_partial") ||
        !(*d.region("lse_partial") == *lse))
      return Status(StatusCode::Internal, "ring: the pass plans' workspaces or stages differ");
  }
  s.pass_workspace = d0.workspace_bytes;
  s.lse_offset = lse->offset;
  s.lse_count = lse->bytes / 4;

  for (Role r : {Role::Q, Role::O, Role::Stats, Role::K, Role::V}) {
    const TensorFacts& t = f.operand(r);
    if (t.bound) s.chunk_bytes[role_index(r)] = s.chunk * t.strides[2] * bits_of(t.dtype) / 8;
  }
  s.k_bytes = extent_elements(f.operand(Role::K)) * bits_of(f.operand(Role::K).dtype) / 8;
  s.v_bytes = extent_elements(f.operand(Role::V)) * bits_of(f.operand(Role::V).dtype) / 8;
  int64_t at = 0;
  if (cp.world > 1) {
    for (int b = 0; b < 2; ++b) {
      s.kv_offset[b] = at;
      at += aligned(s.k_bytes) + aligned(s.v_bytes);
    }
  }
  for (int c = 0; c < 2; ++c) {
    s.partial_offset[c] = at;
    at += aligned(s.pass_workspace);
  }
  s.workspace_bytes = at;

  // Prepared here when the planned GPU is this thread's, as Plan::build prepares; not without a communicator
  // (prepare() then says what is missing).
  if (cp.comm && options.device_ordinal) {
    RIME_RETURN_IF_ERROR(ring.prepare(*options.device_ordinal));
  } else if (Result<int> ordinal = driver::current_ordinal(); cp.comm && ordinal.ok()) {
    Result<DeviceDesc> gpu = driver::query_device(ordinal.value());
    if (gpu.ok() && gpu->arch == f.device.arch) {
      Status st = ring.prepare(ordinal.value());
      if (!st.ok()) log::warn("ring plan built but not loaded: {}", st.message());
    }
  }
  return ring;
}

const Graph& RingPlan::graph() const { return state_->local; }
const Facts& RingPlan::facts() const { return state_->facts; }
int64_t RingPlan::workspace_size() const { return state_->workspace_bytes; }

std::vector<const Plan*> RingPlan::pass_plans() const {
  std::vector<const Plan*> out;
  for (const auto& [key, plan] : state_->passes) out.push_back(&plan);
  return out;
}

std::string RingPlan::explain() const {
  const State& s = *state_;
  const auto chunks = context_parallel::zigzag_chunks(s.cp.rank, s.cp.world);
  std::string out = fmt::format(
      "ring      rank {} of {}: Q, K and V chunks {} and {} of the sequence's {} ({} rows each, {} in all), {}\n",
      s.cp.rank, s.cp.world, chunks[0], chunks[1], 2 * s.cp.world, s.chunk, 2 * s.chunk * s.cp.world,
      s.causal ? "causal (a K/V chunk before the Q chunk in full, the same one under the mask, a later one skipped)"
               : "no mask (every pair in full)");
  int step = -1;
  for (const context_parallel::RingPass& p : s.schedule) {
    if (p.step != step) {
      out += fmt::format("{}step {} (K/V of rank {}):", step < 0 ? "schedule  " : "\n          ", p.step, p.kv_rank);
      step = p.step;
    }
    const auto held = context_parallel::zigzag_chunks(p.kv_rank, s.cp.world);
    out += fmt::format(" Q{} x KV{}{}{}", p.q_chunk, held[p.kv_local], p.kv_chunks > 1 ? fmt::format("+KV{}", held[1]) : "",
                       p.causal ? " (diagonal)" : "");
  }
  out += "\n";
  for (const auto& [key, plan] : s.passes) {
    const Decision& d = plan.config().decision;
    out += fmt::format("pass      slot {} of {}, {} keys{}: row {}, tile {}x{}, {}\n", key.slot, s.cp.world,
                       key.kv_chunks * s.chunk,
                       key.causal ? (key.kv_chunks > 1 ? ", causal (bottom-right)" : ", causal") : "", d.row_id,
                       d.tile.q, d.tile.kv,
                       plan.kernels().empty() ? std::string("no kernel") : plan.kernels()[0].name_expression);
  }
  out += fmt::format("workspace {} bytes: {}two Q chunks' partials of {} slots ({} bytes each)\n", s.workspace_bytes,
                     s.cp.world > 1 ? fmt::format("two held K/V buffers ({} + {} bytes each), ", s.k_bytes, s.v_bytes)
                                    : std::string(),
                     s.cp.world, s.pass_workspace);
  return out;
}

Status RingPlan::prepare(int device_ordinal) { return RingInternals::prepare(*this, device_ordinal, true); }

Status RingInternals::prepare_without_communicator(RingPlan& ring, int device_ordinal) {
  return prepare(ring, device_ordinal, false);
}

Status RingInternals::prepare(RingPlan& ring, int device_ordinal, bool check_communicator) {
  RingPlan::State& s = *ring.state_;
  if (s.prepared) {
    if (s.device_ordinal == device_ordinal) return Status::success();
    return Status(StatusCode::InvalidArgument,
                  fmt::format("ring plan is loaded on GPU {}, not GPU {}: build one per GPU", s.device_ordinal,
                              device_ordinal));
  }
  for (auto& [key, plan] : s.passes) RIME_RETURN_IF_ERROR(plan.prepare(device_ordinal));
  if (check_communicator) RIME_RETURN_IF_ERROR(context_parallel::check_communicator(s.cp, device_ordinal));
  Result<CUcontext> ctx = driver::primary_context(device_ordinal);
  if (!ctx.ok()) return ctx.status();
  const driver::ScopedContext in_ctx(ctx.value());
  RIME_RETURN_IF_ERROR(in_ctx.status());
  const driver::Api* api = driver::api();
  s.context = ctx.value();  // from here on the destructor releases what was made
  RIME_RETURN_IF_ERROR(driver::check(api->cuStreamCreate(&s.transfer, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  // Timed events (transfer_times): a handful per execute, recorded between kernels.
  RIME_RETURN_IF_ERROR(driver::check(api->cuEventCreate(&s.start, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
  for (int t = 0; t + 1 < s.cp.world; ++t)
    for (std::vector<CUevent>* v : {&s.sending, &s.received, &s.computed}) {
      CUevent e = nullptr;
      RIME_RETURN_IF_ERROR(driver::check(api->cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate"));
      v->push_back(e);
    }
  s.device_ordinal = device_ordinal;
  s.prepared = true;
  return Status::success();
}

bool RingPlan::prepared() const { return state_->prepared; }

Result<RingPlan::TransferTimes> RingPlan::transfer_times() const {
  const State& s = *state_;
  TransferTimes out;
  if (!s.prepared || s.cp.world < 2) return out;
  const driver::Api* api = driver::api();
  const driver::ScopedContext in_ctx(s.context);
  RIME_RETURN_IF_ERROR(in_ctx.status());
  auto ms = [&](CUevent from, CUevent to) -> Result<double> {
    float t = 0;
    const CUresult r = api->cuEventElapsedTime(&t, from, to);
    if (r == CUDA_ERROR_NOT_READY)
      return Status(StatusCode::CudaError, "ring transfer times: the last execute has not finished (synchronize first)");
    RIME_RETURN_IF_ERROR(driver::check(r, "cuEventElapsedTime"));
    return double{t};
  };
  for (size_t t = 0; t < s.received.size(); ++t) {
    Result<double> transfer = ms(s.sending[t], s.received[t]);
    if (!transfer.ok()) return transfer.status();
    // The passes of step t + 1 start when both step t's passes and this transfer have finished.
    Result<double> waited = ms(s.computed[t], s.received[t]);
    if (!waited.ok()) return waited.status();
    out.transfers += 1;
    out.transfer_ms += transfer.value();
    out.exposed_ms += std::max(0.0, waited.value());
  }
  return out;
}

Status RingPlan::execute(const std::unordered_map<int64_t, void*>& buffers, void* workspace, void* stream) const {
  const State& s = *state_;
  return RingInternals::execute(*this, buffers, workspace, stream, NcclTransport(s.cp.comm, s.cp.rank, s.cp.world));
}

Status RingInternals::execute(const RingPlan& ring, const std::unordered_map<int64_t, void*>& buffers,
                              void* workspace, void* stream, const RingTransport& transport) {
  const RingPlan::State& s = *ring.state_;
  if (!s.prepared)
    return Status(StatusCode::CudaError, "ring plan is not loaded on a GPU (RingPlan::prepare() failed or was not run)");
  const Facts& f = s.facts;
  const engines::RoleBuffers by_role = engines::role_buffers(f, buffers);
  // The plan's checks of the caller's buffers, over the local graph and the ring's workspace (each pass then checks
  // its chunks of them).
  if (Status bound = check_bindings(f, by_role, workspace, s.workspace_bytes); !bound.ok())
    return Status(bound.code(), "ring: " + bound.message());
  const driver::Api* api = driver::api();
  const driver::ScopedContext in_ctx(s.context);
  RIME_RETURN_IF_ERROR(in_ctx.status());
  CUstream st = static_cast<CUstream>(stream);
  char* ws = static_cast<char*>(workspace);
  auto offset = [](const void* base, int64_t bytes) {
    return static_cast<void*>(static_cast<char*>(const_cast<void*>(base)) + bytes);
  };
  auto dptr = [](const void* p) { return reinterpret_cast<CUdeviceptr>(p); };

  // Amax_O is a max over both Q chunks' combines; every slot no pass writes (a step whose K/V chunks are all after
  // the Q chunk) holds LSE -inf, which the combine weighs 0.
  if (void* amax = by_role[role_index(Role::AmaxO)])
    RIME_RETURN_IF_ERROR(driver::check(api->cuMemsetD32Async(dptr(amax), 0, 1, st), "cuMemsetD32Async(Amax_O)"));
  for (int c = 0; c < 2; ++c)
    RIME_RETURN_IF_ERROR(driver::check(api->cuMemsetD32Async(dptr(ws + s.partial_offset[c] + s.lse_offset), 0xff800000u,
                                                             static_cast<size_t>(s.lse_count), st),
                                       "cuMemsetD32Async(LSE slots)"));

  const int world = s.cp.world;
  auto held = [&](int step, Role kv) -> void* {  // the K or V this rank holds at `step`
    if (step == 0) return by_role[role_index(kv)];
    char* b = ws + s.kv_offset[(step - 1) % 2];
    return kv == Role::K ? b : b + aligned(s.k_bytes);
  };
  // A pass's (or a combine's) buffers: the sequence tensors moved to their chunk (K and V to the first it reads).
  // A copy of the role array on the stack: execute allocates nothing on the host (rime/ring.hpp).
  auto chunk_buffers = [&](int q_local, void* k, void* v, int kv_local) {
    engines::RoleBuffers b = by_role;
    for (Role r : kQSide)
      if (f.operand(r).bound)
        b[role_index(r)] = offset(by_role[role_index(r)], q_local * s.chunk_bytes[role_index(r)]);
    b[role_index(Role::K)] = offset(k, kv_local * s.chunk_bytes[role_index(Role::K)]);
    b[role_index(Role::V)] = offset(v, kv_local * s.chunk_bytes[role_index(Role::V)]);
    return b;
  };
  const auto chunks = context_parallel::zigzag_chunks(s.cp.rank, world);

  if (world > 1) {
    RIME_RETURN_IF_ERROR(driver::check(api->cuEventRecord(s.start, st), "cuEventRecord"));
    RIME_RETURN_IF_ERROR(driver::check(api->cuStreamWaitEvent(s.transfer, s.start, 0), "cuStreamWaitEvent"));
  }
  size_t next = 0;  // the schedule's next pass
  for (int t = 0; t < world; ++t) {
    void* k = held(t, Role::K);
    void* v = held(t, Role::V);
    if (t + 1 < world) {
      // The receive overwrites the buffer step t - 1 read: after its passes.
      if (t >= 2) RIME_RETURN_IF_ERROR(driver::check(api->cuStreamWaitEvent(s.transfer, s.computed[t - 1], 0), "cuStreamWaitEvent"));
      char* into = ws + s.kv_offset[t % 2];
      RIME_RETURN_IF_ERROR(driver::check(api->cuEventRecord(s.sending[t], s.transfer), "cuEventRecord"));
      RIME_RETURN_IF_ERROR(transport.exchange(t, k, v, into, into + aligned(s.k_bytes), static_cast<size_t>(s.k_bytes),
                                              static_cast<size_t>(s.v_bytes), s.transfer));
      RIME_RETURN_IF_ERROR(driver::check(api->cuEventRecord(s.received[t], s.transfer), "cuEventRecord"));
    }
    if (t >= 1) RIME_RETURN_IF_ERROR(driver::check(api->cuStreamWaitEvent(st, s.received[t - 1], 0), "cuStreamWaitEvent"));
    for (; next < s.schedule.size() && s.schedule[next].step == t; ++next) {
      const context_parallel::RingPass& p = s.schedule[next];
      const int q_local = p.q_chunk == chunks[0] ? 0 : 1;
      const Plan& plan = s.passes.at(key_of(p));
      RIME_RETURN_IF_ERROR(PlanInternals::launch_stages(plan, chunk_buffers(q_local, k, v, p.kv_local),
                                                        ws + s.partial_offset[q_local], st, 0, s.combine_stage));
    }
    if (t + 1 < world) RIME_RETURN_IF_ERROR(driver::check(api->cuEventRecord(s.computed[t], st), "cuEventRecord"));
  }
  // Every transfer has finished: step world - 1 waited for the last one (a group's sends with its receives).
  // Every pass plan's combine is the same stage over the same slots (checked at build): any plan's merges.
  const Plan& plan = s.passes.begin()->second;
  for (int c = 0; c < 2; ++c) {
    const int stages = static_cast<int>(plan.config().derived.stages.size());
    const engines::RoleBuffers b = chunk_buffers(c, by_role[role_index(Role::K)], by_role[role_index(Role::V)], 0);
    RIME_RETURN_IF_ERROR(PlanInternals::launch_stages(plan, b, ws + s.partial_offset[c], st, s.combine_stage, stages));
  }
  return Status::success();
}

}  // namespace rime
