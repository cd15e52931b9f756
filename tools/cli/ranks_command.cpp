// rime run FILE --ranks N: context parallelism on one host (docs/context-parallel.md). The parent makes an NCCL
// unique id and starts one process per GPU (this binary again, with --launched-rank r:N:id and CUDA_VISIBLE_DEVICES
// naming its GPU); each rank joins the communicator and plans its shard of the graph. A self-attention prefill
// (S_q = S_kv > 1) runs the ring (rime/ring.hpp): Q, K and V cut into 2N chunks, rank r holding chunks r and
// 2N - 1 - r. Any other graph (a decode) has K/V split by sequence into N equal slices, Q whole, as a
// context-parallel plan. Each rank runs its shard of the inputs every rank draws alike from the seed, checks what
// it ends with against the CPU reference of the whole graph, and compares it with the single-GPU plan of the whole
// graph run on the same data on its GPU.
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "rime/communicator.hpp"
#include "rime/gpu.hpp"
#include "rime/plan.hpp"
#include "rime/ring.hpp"
#include "testing/ring_shards.hpp"
#include "testing/trial.hpp"

namespace rime::cli {
namespace {

Status invalid(std::string message) { return Status(StatusCode::InvalidArgument, std::move(message)); }

// The graph a rank plans: K and V (and seq_len_kv) its slice of every sequence's keys. Dense K/V only, in BHSD or
// BSHD, with S_kv a multiple of the ranks: the slices are then equal, and every rank's plan makes the same split_kv
// choice, which the all-gather needs (docs/context-parallel.md).
Result<Graph> shard_graph(const Graph& g, int world) {
  if (Status s = validate(g); !s.ok()) return s;  // then the op, K and V exist, of rank 4
  const std::optional<SdpaOp>& op = g.op();
  const TensorDesc* k = g.operand(Role::K);
  if (!op || !k || k->dims.size() != 4 || !g.operand(Role::V))
    return Status(StatusCode::InvalidGraph, "--ranks needs an SDPA op with rank-4 K and V");
  if (g.operand(Role::PageTable) || g.operand(Role::CuSeqlensKv))
    return invalid("--ranks shards dense K/V by sequence; paged and ragged K/V are not sharded by the launcher yet");
  const int64_t s_kv = k->dims[2];
  if (s_kv % world != 0)
    return invalid(fmt::format("--ranks {}: S_kv {} (K's dims[2]) is not a multiple of the ranks, so the shards would "
                               "differ in length (and in their split_kv)", world, s_kv));
  Graph out(g.name());
  for (TensorDesc t : g.tensors()) {
    if (t.uid == k->uid || t.uid == g.operand(Role::V)->uid) {
      const Layout layout = classify_layout(t.dims, t.strides);
      if (layout != Layout::Bhsd && layout != Layout::Bshd)
        return invalid(fmt::format("--ranks shards K and V stored as BHSD or BSHD; {} is {}", t.name, to_string(layout)));
      t.dims[2] = s_kv / world;
      t.strides = layout == Layout::Bhsd ? TensorDesc::packed_strides(t.dims) : TensorDesc::bshd_strides(t.dims);
    }
    out.add_tensor(t);
  }
  if (Status s = out.set_op(*op); !s.ok()) return s;
  return out;
}

// Rank r's inputs from the whole graph's: the keys [r x S, (r + 1) x S) of K and V, S = S_kv / world, and each
// sequence's length within the slice.
testing::TrialInputs shard_inputs(const Graph& whole, const Graph& shard, const testing::TrialInputs& in, int rank) {
  testing::TrialInputs out = in;
  for (Role role : {Role::K, Role::V}) {
    const TensorDesc& from = *whole.operand(role);
    const TensorDesc& to = *shard.operand(role);
    const int64_t elem = bits_of(from.dtype) / 8, row = to.dims[3] * elem, s0 = int64_t{rank} * to.dims[2];
    const std::vector<uint8_t>& src = in.tensors.at(from.uid);
    std::vector<uint8_t>& dst = out.tensors[to.uid];
    dst.assign(static_cast<size_t>(tensor_storage_bytes(to)), 0);
    for (int64_t b = 0; b < to.dims[0]; ++b)
      for (int64_t h = 0; h < to.dims[1]; ++h)
        for (int64_t s = 0; s < to.dims[2]; ++s)
          std::memcpy(dst.data() + (b * to.strides[0] + h * to.strides[1] + s * to.strides[2]) * elem,
                      src.data() + (b * from.strides[0] + h * from.strides[1] + (s0 + s) * from.strides[2]) * elem,
                      static_cast<size_t>(row));
  }
  if (const TensorDesc* lens = shard.operand(Role::SeqLenKv)) {
    const int64_t slice = shard.operand(Role::K)->dims[2];
    std::vector<uint8_t>& bytes = out.tensors[lens->uid];
    for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
      int32_t len;
      std::memcpy(&len, bytes.data() + i, 4);
      len = static_cast<int32_t>(std::clamp<int64_t>(len - rank * slice, 0, slice));
      std::memcpy(bytes.data() + i, &len, 4);
    }
  }
  return out;
}

std::string hex_of(const NcclUniqueId& id) {
  std::string s;
  for (char c : id.bytes) s += fmt::format("{:02x}", static_cast<unsigned char>(c));
  return s;
}

bool id_of(const std::string& hex, NcclUniqueId& id) {
  if (hex.size() != 2 * sizeof(id.bytes)) return false;
  for (size_t i = 0; i < sizeof(id.bytes); ++i) {
    char* end = nullptr;
    const std::string byte = hex.substr(2 * i, 2);
    const unsigned long v = std::strtoul(byte.c_str(), &end, 16);
    if (end != byte.c_str() + 2) return false;
    id.bytes[i] = static_cast<char>(v);
  }
  return true;
}

// Whether --ranks runs `g` as the prefill ring: a self-attention prefill (S_q = S_kv > 1).
bool is_ring_prefill(const Graph& g) {
  const TensorDesc* q = g.operand(Role::Q);
  const TensorDesc* k = g.operand(Role::K);
  return q && k && q->dims.size() == 4 && k->dims.size() == 4 && q->dims[2] > 1 && q->dims[2] == k->dims[2] &&
         !g.operand(Role::PageTable) && !g.operand(Role::CuSeqlensQ);
}

// One rank of the prefill ring: plan its shard, run it, check its rows (the other ranks' rows from the single-GPU
// plan, itself checked), time both. Prints lines prefixed "rank r:"; returns the exit code.
int run_ring_rank(const Options& opts, const Graph& whole, const Graph& shard, void* comm, const LaunchedRank& me) {
  const std::string source = source_of(opts);
  const std::string who = fmt::format("rank {}", me.rank);
  auto fail = [&](const Status& s) { return report_failure(Status(s.code(), who + ": " + s.message()), opts, source); };
  PlanOptions options;
  options.use_tuned = !opts.no_tuned;
  Result<Plan> single = Plan::build(whole, options);
  if (!single.ok()) return fail(single.status());
  Result<RingPlan> ring = RingPlan::build(shard, ContextParallel{comm, me.rank, me.world}, options);
  if (!ring.ok()) return fail(ring.status());
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  fmt::print("{}: GPU {} ({})\n", who, visible ? visible : "0", ring->facts().device.name);
  std::string text = ring->explain();
  for (size_t at = 0, end; at < text.size(); at = end + 1) {
    end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    fmt::print("{}:   {}\n", who, text.substr(at, end - at));
  }
  const testing::TrialInputs inputs = testing::make_inputs(whole, opts.seed);
  testing::TrialOptions run;
  run.check = false;
  run.timing_iterations = opts.bench ? opts.iterations : 0;
  // Every rank executes the ring the same number of times (its transfers pair with the neighbours').
  Result<testing::TrialReport> ring_run = testing::run_trial(
      ring->graph(), ring->facts(), ring->workspace_size(),
      testing::ring_shard_inputs(whole, shard, inputs, me.rank, me.world), run,
      [&](const std::unordered_map<int64_t, void*>& buffers, void* workspace, CUstream stream, bool) {
        return ring->execute(buffers, workspace, stream);
      });
  if (!ring_run.ok()) return fail(ring_run.status());
  Result<testing::TrialReport> single_run = testing::run_trial(single.value(), inputs, run);
  if (!single_run.ok()) return fail(single_run.status());

  int rc = kExitOk;
  if (!opts.no_check) {
    reference::HostTensors outputs = single_run->outputs;
    testing::ring_gather_outputs(whole, shard, me.rank, me.world, ring_run->outputs, outputs);
    const testing::TrialReport r = testing::check_outputs(whole, single->facts(), inputs, outputs, {});
    fmt::print("{}: check: {} ({} rows of the whole graph vs the CPU reference, this rank's chunks from the ring and "
               "the others' from the single-GPU plan; O max abs err {:.4g}, rel L2 {:.3g}, {} outside; LSE max abs "
               "err {:.3g})\n",
               who, r.passed ? "PASSED" : "FAILED", r.rows_checked, r.o_max_abs_err, r.o_rel_l2, r.elements_outside,
               r.lse_max_abs_err);
    for (const std::string& f : r.failures) fmt::print("{}:   {}\n", who, f);
    if (!r.passed) rc = kExitCheckFailed;
  }
  if (opts.bench) {
    // The last timed execute's transfers (run_trial synchronized it).
    Result<RingPlan::TransferTimes> times = ring->transfer_times();
    if (!times.ok()) return fail(times.status());
    if (times->transfers > 0)
      fmt::print("{}: transfers: {} of K/V ({} bytes each) in {:.3f} ms, of which {:.3f} ms exposed (the attention "
                 "waited) and {:.3f} ms behind the passes\n",
                 who, times->transfers, tensor_storage_bytes(*shard.operand(Role::K)) + tensor_storage_bytes(*shard.operand(Role::V)),
                 times->transfer_ms, times->exposed_ms, times->transfer_ms - times->exposed_ms);
    const double flops = testing::attention_flops(single->facts());
    fmt::print("{}: bench: the ring {:.4f} ms ({:.1f} TFLOP/s of the whole graph), the single-GPU plan {:.4f} ms "
               "({:.1f}): {:.2f}x over {} runs\n",
               who, ring_run->median_ms, flops / (ring_run->median_ms * 1e-3) / 1e12, single_run->median_ms,
               flops / (single_run->median_ms * 1e-3) / 1e12, single_run->median_ms / std::max(ring_run->median_ms, 1e-9),
               opts.iterations);
  }
  return rc;
}

// One rank: join, plan, run, check. Prints lines prefixed "rank r:"; returns the exit code.
int run_rank(const Options& opts, const Graph& whole, const Graph& shard, const LaunchedRank& me) {
  const std::string source = source_of(opts);
  const std::string who = fmt::format("rank {}", me.rank);
  auto fail = [&](const Status& s) { return report_failure(Status(s.code(), who + ": " + s.message()), opts, source); };
  NcclUniqueId id{};
  if (!id_of(me.id_hex, id)) return fail(invalid("--launched-rank: the NCCL id is not 256 hex digits"));
  // The rank's process sees its one GPU (CUDA_VISIBLE_DEVICES) as GPU 0.
  Result<void*> joined = nccl_comm_init_rank(id, me.world, me.rank, 0);
  if (!joined.ok()) return fail(joined.status());
  void* const comm = joined.value();
  struct CommGuard {
    void* c;
    ~CommGuard() { (void)nccl_comm_destroy(c); }
  } guard{comm};
  if (is_ring_prefill(whole)) return run_ring_rank(opts, whole, shard, comm, me);
  PlanOptions cp_options;
  cp_options.use_tuned = !opts.no_tuned;
  cp_options.context_parallel = ContextParallel{comm, me.rank, me.world};
  PlanOptions single_options;
  single_options.use_tuned = !opts.no_tuned;
  Result<Plan> single = Plan::build(whole, single_options);
  if (!single.ok()) return fail(single.status());
  Result<Plan> cp = Plan::build(shard, cp_options);
  if (!cp.ok()) return fail(cp.status());
  const Config& c = cp->config();
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  fmt::print("{}: GPU {} ({}), shard of {} keys: row {}, tile {}x{}, split_kv {} on each of {} rank{}; single GPU: "
             "split_kv {}\n",
             who, visible ? visible : "0", cp->facts().device.name, shard.operand(Role::K)->dims[2],
             c.decision.row_id, c.decision.tile.q, c.decision.tile.kv, c.decision.split_kv, me.world,
             me.world == 1 ? "" : "s", single->config().decision.split_kv);

  const testing::TrialInputs inputs = testing::make_inputs(whole, opts.seed);
  testing::TrialOptions run;
  run.check = false;
  run.timing_iterations = opts.bench ? opts.iterations : 0;
  // Every rank executes its plan the same number of times (the all-gather is collective).
  Result<testing::TrialReport> cp_run = testing::run_trial(cp.value(), shard_inputs(whole, shard, inputs, me.rank), run);
  if (!cp_run.ok()) return fail(cp_run.status());
  Result<testing::TrialReport> single_run = testing::run_trial(single.value(), inputs, run);
  if (!single_run.ok()) return fail(single_run.status());

  int rc = kExitOk;
  if (!opts.no_check) {
    testing::TrialOptions check;
    const testing::TrialReport r = testing::check_outputs(whole, single->facts(), inputs, cp_run->outputs, check);
    fmt::print("{}: check: {} ({} rows of the whole graph vs the CPU reference; O max abs err {:.4g}, rel L2 {:.3g}, {} "
               "outside; LSE max abs err {:.3g})\n",
               who, r.passed ? "PASSED" : "FAILED", r.rows_checked, r.o_max_abs_err, r.o_rel_l2, r.elements_outside,
               r.lse_max_abs_err);
    for (const std::string& f : r.failures) fmt::print("{}:   {}\n", who, f);
    if (!r.passed) rc = kExitCheckFailed;
  }
  // Against the single-GPU plan on the same data: the same bytes when both merge the same partials in the same
  // order (the single plan's split_kv = world x the shard's), else within the check's tolerance.
  const TensorDesc& o = *whole.operand(Role::O);
  const std::vector<uint8_t>& a = cp_run->outputs.at(o.uid);
  const std::vector<uint8_t>& b = single_run->outputs.at(o.uid);
  fmt::print("{}: O {} the single-GPU plan's bytes\n", who, a == b ? "equals" : "differs from");
  if (opts.bench)
    fmt::print("{}: bench: median {:.4f} ms with the all-gather over {} runs; the single-GPU plan {:.4f} ms: {:.2f}x\n",
               who, cp_run->median_ms, opts.iterations, single_run->median_ms,
               single_run->median_ms / std::max(cp_run->median_ms, 1e-9));
  return rc;
}

// The GPU that rank r's process sees: entry r of the caller's CUDA_VISIBLE_DEVICES, or ordinal r.
std::string visible_device(int rank) {
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!env || !*env) return std::to_string(rank);
  std::vector<std::string> list;
  std::string item;
  for (const char* p = env;; ++p) {
    if (*p == ',' || *p == '\0') {
      list.push_back(item);
      item.clear();
      if (*p == '\0') break;
    } else {
      item += *p;
    }
  }
  return rank < static_cast<int>(list.size()) ? list[static_cast<size_t>(rank)] : std::string();
}

}  // namespace

int cmd_run_ranks(const Options& opts, const Graph& whole) {
  const std::string source = source_of(opts);
  if (opts.json) return report_failure(invalid("--ranks prints each rank's lines; --json is not offered with it"), opts, source);
  if (!opts.inputs_dir.empty() || !opts.save_dir.empty() || opts.kv_lengths || opts.seq_lengths || opts.check_indices ||
      opts.uniform_descales)
    return report_failure(invalid("--ranks draws its inputs from --seed; --inputs, --save, --kv-lengths, "
                                  "--seq-lengths, --uniform-descales and --check-indices are not offered with it"),
                          opts, source);
  const int world = opts.launched ? opts.launched->world : opts.ranks;
  const bool ring = is_ring_prefill(whole);
  Result<Graph> shard = ring ? testing::ring_shard_graph(whole, world) : shard_graph(whole, world);
  if (!shard.ok()) return report_failure(shard.status(), opts, source);
  if (opts.launched) return run_rank(opts, whole, shard.value(), *opts.launched);

  // The parent: what it can say without GPUs, then one process per GPU.
  Result<DeviceChoice> dev = choose_device(opts);
  if (!dev.ok()) return report_failure(dev.status(), opts, source);
  int gpus = 0;
  if (dev->has_gpu)
    if (Result<int> n = device_count(); n.ok()) gpus = n.value();
  if (!dev->has_gpu || dev->overridden) {
    // No GPU to run on (or --arch / --sms describe another): rank 0's plan for the described device, not executed.
    PlanOptions options;
    options.device = dev->device;
    if (ring) {
      Result<RingPlan> rank0 = RingPlan::build(shard.value(), ContextParallel{nullptr, 0, world}, options);
      if (!rank0.ok()) return report_failure(rank0.status(), opts, source);
      fmt::print("rank 0 of {}, for {}:\n{}", world, rank0->facts().device.arch_name(), rank0->explain());
      fmt::print("execution skipped: {}\n",
                 dev->has_gpu ? "the plan is not for this GPU (see --arch)" : dev->no_gpu_why);
      return kExitOk;
    }
    options.context_parallel = ContextParallel{nullptr, 0, world};
    Result<Plan> plan = Plan::build(shard.value(), options);
    if (!plan.ok()) return report_failure(plan.status(), opts, source);
    const Config& c = plan->config();
    fmt::print("rank 0 of {}: shard of {} keys: row {}, tile {}x{}, split_kv {}, for {}\n", world,
               shard->operand(Role::K)->dims[2], c.decision.row_id, c.decision.tile.q, c.decision.tile.kv,
               c.decision.split_kv, plan->facts().device.arch_name());
    fmt::print("execution skipped: {}\n",
               dev->has_gpu ? "the plan is not for this GPU (see --arch)" : dev->no_gpu_why);
    return kExitOk;
  }
  if (gpus < world)
    return report_failure(invalid(fmt::format("--ranks {} needs {} GPUs, one per rank; this machine has {}", world,
                                              world, gpus)),
                          opts, source);
  Result<NcclUniqueId> id = nccl_unique_id();
  if (!id.ok()) return report_failure(id.status(), opts, source);
  const std::string id_hex = hex_of(id.value());
  std::vector<pid_t> children;
  int rc = kExitOk;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> args = opts.argv;
    args.push_back("--launched-rank");
    args.push_back(fmt::format("{}:{}:{}", r, world, id_hex));
    const std::string device = visible_device(r);
    const pid_t pid = fork();
    if (pid == 0) {
      // The child: this binary again, seeing its own GPU; the rest of the environment (NCCL_NVLS_ENABLE,
      // RIME_NCCL_LIBRARY, the cache) as the parent's.
      setenv("CUDA_VISIBLE_DEVICES", device.c_str(), 1);
      std::vector<char*> cargs;
      for (std::string& a : args) cargs.push_back(a.data());
      cargs.push_back(nullptr);
      execv("/proc/self/exe", cargs.data());
      fmt::print(stderr, "rime: rank {}: execv(/proc/self/exe): {}\n", r, std::strerror(errno));
      _exit(kExitInternal);
    }
    if (pid < 0) {
      // The ranks already started would wait for this one in ncclCommInitRank: stop them.
      fmt::print(stderr, "rime: fork for rank {}: {}\n", r, std::strerror(errno));
      rc = kExitInternal;
      for (pid_t started : children) kill(started, SIGTERM);
      break;
    }
    children.push_back(pid);
  }
  // A rank that fails leaves the others waiting in the collectives: stop them.
  size_t running = children.size();
  while (running > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) break;
    --running;
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : kExitInternal;
    if (code != kExitOk) {
      if (rc == kExitOk) rc = code;
      for (pid_t other : children)
        if (other != pid) kill(other, SIGTERM);
    }
  }
  if (rc == kExitOk && children.size() == static_cast<size_t>(world))
    fmt::print("context parallel: {} ranks passed\n", world);
  else if (!children.empty())
    fmt::print("context parallel: failed (exit {})\n", rc);
  return rc;
}

}  // namespace rime::cli
