// The prefill ring (rime/ring.hpp) on one GPU. Every rank of a ring of `world` ranks runs in turn on this GPU, each
// with its own shard (its two zig-zag chunks of Q, K and V) and its own RingPlan; between steps a rank receives the
// K/V it holds next by a device copy from the shard of the rank that held them first, in place of NCCL's send and
// receive (NCCL takes no two ranks on one GPU). World 1 runs RingPlan::execute itself, its communicator checked (a
// ring of one rank has no transfer). The ranks' O (and Stats, Amax_O) chunks are put back in sequence order
// (testing/ring_shards.hpp) and checked against the CPU reference of the whole graph, beside the single-GPU plan of
// the same graph on the same inputs.
#include <fmt/format.h>

#include <memory>
#include <vector>

#include "block_scaled_graph.hpp"
#include "catch.hpp"
#include "graph_builder.hpp"
#include "gpu/tier.hpp"
#include "plan/ring_internal.hpp"
#include "rime/plan.hpp"
#include "rime/ring.hpp"
#include "runtime/driver.hpp"
#include "runtime/nccl.hpp"
#include "testing/cuda_api.hpp"
#include "testing/ring_shards.hpp"
#include "testing/trial.hpp"

using namespace rime;

namespace {

struct RingCase {
  bool fp8 = false, causal = true, stats = false, sink = false;
  int world = 1;
  int64_t chunk = 96;  // rows per chunk: not a multiple of the 64-key tiles
  std::string text() const {
    return fmt::format("{} {}{}{} world {} ({} chunks of {} rows)", fp8 ? "FP8 (O E4M3, Amax_O)" : "BF16",
                       causal ? "causal" : "no mask", stats ? " stats" : "", sink ? " sink" : "", world, 2 * world,
                       chunk);
  }
};

// B 2, 4 q heads over 2 kv heads, D 128, packed [B, H, S, D], S = 2 world chunk.
Graph ring_graph(const RingCase& c, int64_t S) {
  Graph g("ring");
  test::TensorAdder add{g};
  const DataType in = c.fp8 ? DataType::FP8_E4M3 : DataType::BF16;
  const int64_t q = add("Q", {2, 4, S, 128}, in), k = add("K", {2, 2, S, 128}, in), v = add("V", {2, 2, S, 128}, in);
  const int64_t o = add("O", {2, 4, S, 128}, in, true);
  std::optional<int64_t> sink, stats;
  if (c.sink) sink = add("sink", {1, 4, 1, 1}, DataType::FP32);
  if (c.stats) stats = add("Stats", {2, 4, S, 1}, DataType::FP32, true);
  const SdpaAttributes a = SdpaAttributes{}.set_causal(c.causal).set_generate_stats(c.stats);
  if (c.fp8) {
    SdpaFp8Operands io;
    io.q = q, io.k = k, io.v = v, io.o = o;
    test::add_fp8_scalars(add, io);
    io.sink = sink, io.stats = stats;
    io.amax_o = add("Amax_O", {1, 1, 1, 1}, DataType::FP32, true);
    REQUIRE(g.sdpa_fp8(io, a).ok());
  } else {
    SdpaOperands io;
    io.q = q, io.k = k, io.v = v, io.o = o;
    io.sink = sink, io.stats = stats;
    REQUIRE(g.sdpa(io, a).ok());
  }
  return g;
}

// The shards' K and V on the GPU, from which a rank receives what it holds next by device copies.
class LocalTransport final : public RingTransport {
 public:
  LocalTransport(std::vector<CUdeviceptr> k, std::vector<CUdeviceptr> v, int rank)
      : k_(std::move(k)), v_(std::move(v)), rank_(rank) {}
  Status exchange(int step, const void*, const void*, void* recv_k, void* recv_v, size_t k_bytes, size_t v_bytes,
                  CUstream stream) const override {
    const int world = static_cast<int>(k_.size());
    const int from = ((rank_ - step - 1) % world + world) % world;  // the rank whose K/V this one holds next
    const testing::CudaApi* cu = testing::cuda();
    const Status k = driver::check(
        cu->cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(recv_k), k_[from], k_bytes, stream), "cuMemcpyDtoDAsync");
    if (!k.ok()) return k;
    return driver::check(cu->cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(recv_v), v_[from], v_bytes, stream),
                         "cuMemcpyDtoDAsync");
  }

 private:
  std::vector<CUdeviceptr> k_, v_;
  int rank_;
};

struct Device {
  CUdeviceptr p = 0;
  explicit Device(const std::vector<uint8_t>& bytes) {
    REQUIRE(testing::cuda()->cuMemAlloc(&p, bytes.size()) == CUDA_SUCCESS);
    REQUIRE(testing::cuda()->cuMemcpyHtoD(p, bytes.data(), bytes.size()) == CUDA_SUCCESS);
  }
  ~Device() { testing::cuda()->cuMemFree(p); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
};

// Runs the ring of `c` on this GPU; returns the whole graph's check, and the single-GPU plan's.
std::pair<testing::TrialReport, testing::TrialReport> run_ring(const RingCase& c, uint64_t seed, nccl::Comm comm) {
  const int w = c.world;
  const Graph whole = ring_graph(c, 2 * w * c.chunk);
  Result<Plan> single = Plan::build(whole);
  REQUIRE(single.ok());
  test::record_coverage(single.value());
  const testing::TrialInputs inputs = testing::make_inputs(whole, seed);
  Result<testing::TrialReport> single_report = testing::run_trial(single.value(), inputs, {});
  REQUIRE(single_report.ok());
  Result<Graph> shard = testing::ring_shard_graph(whole, w);
  REQUIRE(shard.ok());
  Result<int> ordinal = driver::current_ordinal();
  REQUIRE(ordinal.ok());

  // Every rank's K and V on the GPU first: a rank's transport reads the others'.
  std::vector<testing::TrialInputs> shard_inputs;
  std::vector<std::unique_ptr<Device>> kv;
  std::vector<CUdeviceptr> all_k, all_v;
  for (int r = 0; r < w; ++r) {
    shard_inputs.push_back(testing::ring_shard_inputs(whole, shard.value(), inputs, r, w));
    kv.push_back(std::make_unique<Device>(shard_inputs.back().tensors.at(shard->operand(Role::K)->uid)));
    all_k.push_back(kv.back()->p);
    kv.push_back(std::make_unique<Device>(shard_inputs.back().tensors.at(shard->operand(Role::V)->uid)));
    all_v.push_back(kv.back()->p);
  }
  REQUIRE(testing::cuda()->cuCtxSynchronize() == CUDA_SUCCESS);  // the uploads, before the rings' streams

  reference::HostTensors outputs;
  for (int r = 0; r < w; ++r) {
    Result<RingPlan> ring = RingPlan::build(shard.value(), ContextParallel{w == 1 ? comm : nullptr, r, w});
    INFO(ring.status().to_string());
    REQUIRE(ring.ok());
    for (const Plan* p : ring->pass_plans()) test::record_coverage(*p);
    if (w == 1)
      REQUIRE(ring->prepare(ordinal.value()).ok());
    else
      REQUIRE(RingInternals::prepare_without_communicator(ring.value(), ordinal.value()).ok());
    const LocalTransport transport(all_k, all_v, r);
    // The caller's buffers are checked as a plan's are, before anything is sent or launched: the workspace the
    // ring's K/V chunks need first, then each role's buffer.
    REQUIRE(ring->workspace_size() > 0);
    const Status no_workspace = RingInternals::execute(ring.value(), {}, nullptr, nullptr, transport);
    CHECK(no_workspace.code() == StatusCode::InvalidArgument);
    CHECK(no_workspace.message().rfind("ring: the plan needs a workspace of", 0) == 0);
    alignas(16) static unsigned char unused_workspace[16];  // never written: the check refuses before any launch
    const Status unbound = RingInternals::execute(ring.value(), {}, unused_workspace, nullptr, transport);
    CHECK(unbound.code() == StatusCode::InvalidArgument);
    CHECK(unbound.message().rfind("ring: no buffer bound for Q", 0) == 0);
    testing::TrialOptions run;
    run.check = false;
    Result<testing::TrialReport> rank_run = testing::run_trial(
        ring->graph(), ring->facts(), ring->workspace_size(), shard_inputs[static_cast<size_t>(r)], run,
        [&](const std::unordered_map<int64_t, void*>& buffers, void* workspace, CUstream stream, bool) {
          return w == 1 ? ring->execute(buffers, workspace, stream)
                        : RingInternals::execute(ring.value(), buffers, workspace, stream, transport);
        });
    INFO(rank_run.status().to_string());
    REQUIRE(rank_run.ok());
    testing::ring_gather_outputs(whole, shard.value(), r, w, rank_run->outputs, outputs);
    // The transfer times of that run (run_trial synchronized it): one per step but the last, the exposed part of
    // each within it.
    Result<RingPlan::TransferTimes> times = ring->transfer_times();
    INFO(times.status().to_string());
    REQUIRE(times.ok());
    CHECK(times->transfers == w - 1);
    CHECK(times->exposed_ms >= 0);
    CHECK(times->exposed_ms <= times->transfer_ms + 1e-3);
    if (r == 0 && w > 1)
      fmt::print("ring {} rank 0: {} transfers (device copies) in {:.3f} ms, {:.3f} ms of it exposed\n", c.text(),
                 times->transfers, times->transfer_ms, times->exposed_ms);
  }
  return {testing::check_outputs(whole, single->facts(), inputs, std::move(outputs), {}), single_report.value()};
}

}  // namespace

TEST_CASE("the prefill ring, every rank on one GPU, equals the whole graph", "[gpu][ring]") {
  INFO(nccl::load_status().to_string() << " (tools/device/gpu_check.sh sets RIME_NCCL_LIBRARY)");
  REQUIRE(nccl::api());
  Result<int> ordinal = driver::current_ordinal();
  REQUIRE(ordinal.ok());
  nccl::Comm comm = nullptr;
  const int device = ordinal.value();
  REQUIRE(nccl::check(nccl::api()->ncclCommInitAll(&comm, 1, &device), "ncclCommInitAll").ok());
  const std::vector<RingCase> all = {
      {false, true, false, false, 1}, {false, true, true, false, 2}, {false, true, false, true, 3},
      {false, false, true, true, 2},  {true, true, true, false, 1},  {true, true, false, false, 2},
      {true, false, false, true, 3},
  };
  int passed = 0, run = 0;
  uint64_t seed = 9100;
  for (const RingCase& c : test::tier_cases(all, {1, 5})) {
    const auto [ring, single] = run_ring(c, ++seed, comm);
    INFO(c.text() << ": rel L2 " << ring.o_rel_l2);
    for (const std::string& failure : ring.failures) INFO(failure);
    CHECK(ring.passed);
    CHECK(single.passed);
    ++run;
    passed += ring.passed;
    fmt::print("ring {}: {}, rel L2 {:.4f} (the single-GPU plan: {:.4f}), {} of {} elements outside, LSE max err "
               "{:.2g}{}\n",
               c.text(), ring.passed ? "passed" : "FAILED", ring.o_rel_l2, single.o_rel_l2, ring.elements_outside,
               ring.elements_checked, ring.lse_max_abs_err,
               c.fp8 ? fmt::format(", Amax_O {:.4g} (reference {:.4g})", ring.amax_o_gpu, ring.amax_o_ref) : "");
  }
  fmt::print("prefill ring: {} cases, {} passed against the whole graph's reference\n", run, passed);
  nccl::api()->ncclCommDestroy(comm);
}
