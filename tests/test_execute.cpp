// What execute checks before it launches (no GPU: fake addresses, never dereferenced), and the device a plan is for.
#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "catch.hpp"
#include "example_plans.hpp"
#include "plan/bindings.hpp"
#include "rime/inspect/config.hpp"
#include "rime/inspect/facts.hpp"
#include "rime/json.hpp"
#include "rime/padding_mask.hpp"
#include "rime/plan.hpp"
#include "test_paths.hpp"

using namespace rime;
using test::h200_plan;
using test::plan_on;

namespace {
// Fake addresses, never dereferenced: each tensor gets its own 64 MiB-aligned slot; returns the next free slot.
uintptr_t fake_buffers(const Graph& g, std::unordered_map<int64_t, void*>& buffers) {
  uintptr_t next = uintptr_t{1} << 40;
  for (const TensorDesc& t : g.tensors()) {
    buffers[t.uid] = reinterpret_cast<void*>(next);
    next += uintptr_t{64} << 20;
  }
  return next;
}
}  // namespace

TEST_CASE("execute's buffer checks: missing, misaligned and overlapping buffers", "[plan]") {
  Result<Graph> g = load_graph_file(test::example_path("fp8_decode_gqa"));
  REQUIRE(g.ok());
  const Facts f = analyze(g.value(), DeviceDesc::h200()).value();
  std::unordered_map<int64_t, void*> buffers;
  void* ws = reinterpret_cast<void*>(fake_buffers(g.value(), buffers));
  CHECK(check_bindings(f, buffers, ws, 4096).ok());
  CHECK(check_bindings(f, buffers, nullptr, 4096).message().find("needs a workspace of 4096") !=
        std::string::npos);
  const int64_t q = g->operand(Role::Q)->uid, k = g->operand(Role::K)->uid, o = g->operand(Role::O)->uid;

  auto missing = buffers;
  missing.erase(k);
  CHECK(check_bindings(f, missing, ws, 4096).message() == "no buffer bound for K (uid 2)");

  auto misaligned = buffers;
  misaligned[q] = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(buffers[q]) + 8);
  CHECK(check_bindings(f, misaligned, ws, 4096).message() == "buffer for Q (uid 1) is not 16-byte aligned");

  auto overlapping = buffers;  // O placed inside K
  overlapping[o] = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(buffers[k]) + 4096);
  Status s = check_bindings(f, overlapping, ws, 4096);
  CHECK(s.code() == StatusCode::InvalidArgument);
  CHECK(s.message().find("the buffer of output O (uid 10) overlaps the buffer of K (uid 2)") != std::string::npos);

  auto into_ws = buffers;
  into_ws[o] = ws;
  CHECK(check_bindings(f, into_ws, ws, 4096).message().find("overlaps the workspace") != std::string::npos);
  // The kernels write the workspace (split partials): inputs may not share it either.
  auto v_in_ws = buffers;
  v_in_ws[g->operand(Role::V)->uid] = reinterpret_cast<char*>(ws) + 1024;
  CHECK(check_bindings(f, v_in_ws, ws, 4096).message() == "the buffer of input V (uid 3) overlaps the workspace");
  CHECK(check_bindings(f, buffers, reinterpret_cast<char*>(ws) + 8, 4096).message() ==
        "the workspace is not 16-byte aligned");

  SECTION("sf_o: 16-byte aligned and overlapping nothing (SPEC section 5)") {
    Result<Graph> nv = load_graph_file(test::example_path("fp8_nvfp4_o_planes"));
    REQUIRE(nv.ok());
    const Facts nf = analyze(nv.value(), DeviceDesc::h200()).value();
    std::unordered_map<int64_t, void*> b;
    fake_buffers(nv.value(), b);
    REQUIRE(check_bindings(nf, b, nullptr, 0).ok());
    const TensorDesc& sf = *nv->operand(Role::SfO);
    auto shifted = b;
    shifted[sf.uid] = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(b[sf.uid]) + 4);
    CHECK(check_bindings(nf, shifted, nullptr, 0).message() ==
          fmt::format("buffer for sf_o (uid {}) is not 16-byte aligned", sf.uid));
    auto inside_o = b;  // sf_o placed in the middle of O
    inside_o[sf.uid] = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(b[nv->operand(Role::O)->uid]) + 1024);
    CHECK(check_bindings(nf, inside_o, nullptr, 0).message().find("overlaps the buffer of") != std::string::npos);
  }
}

TEST_CASE("execute's buffer checks at their edges: adjacent buffers, no workspace, [.., 1] tensors", "[plan]") {
  Result<Graph> g = load_graph_file(test::example_path("fp8_decode_gqa"));
  REQUIRE(g.ok());
  const Facts f = analyze(g.value(), DeviceDesc::h200()).value();
  std::unordered_map<int64_t, void*> buffers;
  void* ws = reinterpret_cast<void*>(fake_buffers(g.value(), buffers));
  REQUIRE(check_bindings(f, buffers, ws, 4096).ok());
  auto at = [](void* p, int64_t bytes) { return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) + bytes); };
  const int64_t q = g->operand(Role::Q)->uid, o = g->operand(Role::O)->uid, stats = g->operand(Role::Stats)->uid;
  const int64_t q_bytes = f.operand(Role::Q).storage_bytes, o_bytes = f.o().storage_bytes;

  // Adjacent is not overlapping: an output may start where an input ends, and an input where an output ends.
  auto o_after_q = buffers;
  o_after_q[o] = at(buffers[q], q_bytes);
  CHECK(check_bindings(f, o_after_q, ws, 4096).ok());
  o_after_q[o] = at(buffers[q], q_bytes - 16);
  CHECK(check_bindings(f, o_after_q, ws, 4096).message().find("the buffer of output O (uid 10) overlaps the buffer "
                                                               "of Q (uid 1)") != std::string::npos);
  auto q_after_o = buffers;
  q_after_o[q] = at(buffers[o], o_bytes);
  CHECK(check_bindings(f, q_after_o, ws, 4096).ok());
  // The same for the workspace, on either side of it.
  auto o_before_ws = buffers;
  o_before_ws[o] = at(ws, -o_bytes);
  CHECK(check_bindings(f, o_before_ws, ws, 4096).ok());
  o_before_ws[o] = at(ws, 4096);
  CHECK(check_bindings(f, o_before_ws, ws, 4096).ok());
  o_before_ws[o] = at(ws, 4096 - 16);
  CHECK(check_bindings(f, o_before_ws, ws, 4096).message().find("overlaps the workspace") != std::string::npos);

  // A plan without a workspace reads nothing at the workspace pointer: not its alignment, not where it points.
  CHECK(check_bindings(f, buffers, at(buffers[q], 8), 0).ok());

  // [.., 1] tensors (Stats) are read and written 4 bytes at a time: 4-byte alignment is enough, 2 is not.
  auto stats_at = buffers;
  stats_at[stats] = at(buffers[stats], 4);
  CHECK(check_bindings(f, stats_at, ws, 4096).ok());
  stats_at[stats] = at(buffers[stats], 2);
  CHECK(check_bindings(f, stats_at, ws, 4096).message() ==
        fmt::format("buffer for Stats (uid {}) is not 4-byte aligned", stats));
}

TEST_CASE("sequences_from_padding_mask refuses bad arguments by name before it touches a GPU", "[plan]") {
  // Fake addresses, never dereferenced: validation comes first.
  PaddingMask m;
  m.data = reinterpret_cast<const void*>(uintptr_t{1} << 40);
  m.element_bytes = 8;
  m.batch = 3;
  m.positions = 100;
  m.row_stride = 100;
  int32_t* out = reinterpret_cast<int32_t*>(uintptr_t{2} << 40);
  auto refusal = [&](const PaddingMask& mask, int64_t q, int64_t kv, int32_t* o) {
    const Status s = sequences_from_padding_mask(mask, q, kv, o, nullptr);
    CHECK(s.code() == StatusCode::InvalidArgument);
    return s.message();
  };
  PaddingMask bad = m;
  bad.element_bytes = 3;
  CHECK(refusal(bad, 1, 100, out).find("element_bytes = 3") != std::string::npos);
  bad = m;
  bad.row_stride = 50;
  CHECK(refusal(bad, 1, 100, out).find("row_stride = 50 is below positions = 100") != std::string::npos);
  bad = m;
  bad.batch = 0;
  CHECK(refusal(bad, 1, 100, out).find("batch = 0") != std::string::npos);
  bad = m;
  bad.data = nullptr;
  CHECK(refusal(bad, 1, 100, out).find("data is null") != std::string::npos);
  CHECK(refusal(m, 1, 101, out).find("kv_length = 101 (1 .. positions = 100)") != std::string::npos);
  CHECK(refusal(m, 0, 100, out).find("q_length = 0") != std::string::npos);
  CHECK(refusal(m, 20, 10, out).find("q_length = 20 (1 .. kv_length = 10)") != std::string::npos);
  CHECK(refusal(m, 1, 100, nullptr).find("out is null") != std::string::npos);
}

TEST_CASE("a plan for a named GPU never falls back to another device", "[plan][device]") {
  Result<Graph> g = load_graph_file(test::example_path("fp8_prefill"));
  REQUIRE(g.ok());
  PlanOptions gpu7;
  gpu7.device_ordinal = 7;
  Result<Plan> plan = Plan::build(g.value(), gpu7);
  REQUIRE_FALSE(plan.ok());
  // Without a driver: CudaError saying why; with one (a GPU machine of fewer than 8 GPUs): InvalidArgument naming
  // the GPUs there are. Never the H200 defaults or GPU 0.
  if (plan.status().code() == StatusCode::CudaError) {
    CHECK(plan.status().message().find("CUDA driver") != std::string::npos);
    CHECK(explain(g.value(), gpu7).status().code() == StatusCode::CudaError);
  } else {
    CHECK(plan.status().code() == StatusCode::InvalidArgument);
    CHECK(plan.status().message().find("device 7 does not exist") != std::string::npos);
  }
  PlanOptions negative;
  negative.device_ordinal = -1;
  CHECK_FALSE(Plan::build(g.value(), negative).ok());
  // A plan for a described device loads nowhere without a GPU, and says so when asked to.
  Result<Plan> h200 = h200_plan("fp8_prefill");
  REQUIRE(h200.ok());
  if (!h200->prepared()) {
    CHECK(h200->device_ordinal() == -1);
    CHECK_FALSE(h200->prepare(0).ok());
  }
}
