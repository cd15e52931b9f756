// The prefill ring (rime/ring.hpp) on the CPU: the pass plans a rank builds (one per slot, K/V chunk count and mask
// its schedule uses), its workspace, its explanation, and what it refuses. The ring runs on a GPU (tests/gpu, "[ring]").
#include <string>

#include "catch.hpp"
#include "graph_builder.hpp"
#include "plan/context_parallel.hpp"
#include "rime/inspect/config.hpp"
#include "rime/inspect/facts.hpp"
#include "rime/ring.hpp"

using namespace rime;

namespace {

// A rank's shard of B1, 4 q heads over 2 kv heads, D 128 (BF16): its two chunks of `chunk` rows.
Graph local_graph(int64_t chunk, bool causal, bool stats = false, std::vector<int64_t> k_strides = {}) {
  Graph g("ring shard");
  test::TensorAdder add{g};
  const int64_t s = 2 * chunk;
  const int64_t q = add("Q", {1, 4, s, 128}, DataType::BF16);
  const int64_t k = add("K", {1, 2, s, 128}, DataType::BF16, false, k_strides);
  const int64_t v = add("V", {1, 2, s, 128}, DataType::BF16);
  const int64_t o = add("O", {1, 4, s, 128}, DataType::BF16, true);
  SdpaOperands io;
  io.q = q;
  io.k = k;
  io.v = v;
  io.o = o;
  if (stats) io.stats = add("Stats", {1, 4, s, 1}, DataType::FP32, true);
  REQUIRE(g.sdpa(io, SdpaAttributes{}.set_causal(causal).set_generate_stats(stats)).ok());
  return g;
}

PlanOptions h200() {
  PlanOptions o;
  o.device = DeviceDesc::h200();
  return o;
}

}  // namespace

TEST_CASE("a ring rank plans one pass per slot, K/V chunk count and mask its schedule uses", "[ring]") {
  // Rank 1 of 2, causal: chunks 1 and 2 of 4. Step 0 holds chunks 1 and 2: Q1 x KV1 (its diagonal), and Q2 over
  // both (KV1 in full, KV2 its diagonal: one run of keys, causal bottom-right). Step 1 holds rank 0's chunks 0 and
  // 3: Q1 x KV0 and Q2 x KV0 (KV3 is after both).
  const Graph g = local_graph(128, true, true);
  Result<RingPlan> ring = RingPlan::build(g, ContextParallel{nullptr, 1, 2}, h200());
  INFO(ring.status().to_string());
  REQUIRE(ring.ok());
  const std::vector<const Plan*> passes = ring->pass_plans();
  REQUIRE(passes.size() == 3);  // (slot 0, 1 chunk, causal), (slot 0, 2 chunks, causal), (slot 1, 1 chunk, full)
  int causal = 0, bottom_right = 0;
  for (const Plan* p : passes) {
    const Facts& f = p->facts();
    CHECK(f.S_q == 128);
    CHECK(f.S_kv == (f.mask.bottom_right ? 256 : 128));
    CHECK(f.context_parallel.world == 2);  // world slots: one per step
    CHECK(f.context_parallel.rank >= 0);
    CHECK(f.context_parallel.rank < 2);
    causal += f.mask.causal;
    bottom_right += f.mask.causal && f.mask.bottom_right;
    CHECK(p->config().decision.split_kv == 1);
    CHECK(p->config().derived.stages.back().role == "combine");
    CHECK(p->workspace_size() == passes[0]->workspace_size());
  }
  CHECK(causal == 2);
  CHECK(bottom_right == 1);
  // Two held K/V buffers (K and V of 256 rows x 2 heads x 128 x 2 bytes each) and each Q chunk's partials.
  const int64_t kv = 2 * (2 * 256 * 128 * 2);
  CHECK(ring->workspace_size() >= 2 * kv + 2 * passes[0]->workspace_size());
  const std::string text = ring->explain();
  INFO(text);
  CHECK(text.find("rank 1 of 2: Q, K and V chunks 1 and 2 of the sequence's 4 (128 rows each, 512 in all)") !=
        std::string::npos);
  CHECK(text.find("step 0 (K/V of rank 1): Q1 x KV1 (diagonal) Q2 x KV1+KV2 (diagonal)") != std::string::npos);
  CHECK(text.find("step 1 (K/V of rank 0): Q1 x KV0 Q2 x KV0") != std::string::npos);
  CHECK(text.find("slot 0 of 2, 256 keys, causal (bottom-right)") != std::string::npos);
  CHECK_FALSE(ring->prepared());
  Result<RingPlan::TransferTimes> times = ring->transfer_times();  // nothing has run
  REQUIRE(times.ok());
  CHECK(times->transfers == 0);
}

TEST_CASE("a ring of one rank without a mask reads both chunks in one pass and holds no K/V buffers", "[ring]") {
  Result<RingPlan> ring = RingPlan::build(local_graph(64, false), ContextParallel{nullptr, 0, 1}, h200());
  REQUIRE(ring.ok());
  const std::vector<const Plan*> passes = ring->pass_plans();
  REQUIRE(passes.size() == 1);  // both Q chunks over both K/V chunks, slot 0 of 1, no mask
  CHECK_FALSE(passes[0]->facts().mask.causal);
  CHECK(passes[0]->facts().S_kv == 128);
  CHECK(ring->workspace_size() >= 2 * passes[0]->workspace_size());
  CHECK(ring->workspace_size() < 2 * passes[0]->workspace_size() + 2 * 256);
}

TEST_CASE("the ring refuses what it does not serve, naming why", "[ring]") {
  auto refused = [](const Graph& g, ContextParallel cp, PlanOptions o = h200()) {
    Result<RingPlan> r = RingPlan::build(g, cp, o);
    REQUIRE_FALSE(r.ok());
    return r.status();
  };
  Status s = refused(local_graph(64, true), ContextParallel{nullptr, 2, 2});
  CHECK(s.code() == StatusCode::InvalidArgument);
  CHECK(s.message().find("rank 2 of world 2") != std::string::npos);

  PlanOptions with_cp = h200();
  with_cp.context_parallel = ContextParallel{nullptr, 0, 2};
  s = refused(local_graph(64, true), ContextParallel{nullptr, 0, 2}, with_cp);
  CHECK(s.code() == StatusCode::InvalidArgument);

  const Graph plain = local_graph(64, false);
  SdpaOp op = *plain.op();
  op.attributes.window_left = 32;
  Graph windowed("ring shard");
  for (const TensorDesc& t : plain.tensors()) windowed.add_tensor(t);
  REQUIRE(windowed.set_op(op).ok());
  s = refused(windowed, ContextParallel{nullptr, 0, 2});
  CHECK(s.code() == StatusCode::NotSupported);
  CHECK(s.message().find("window") != std::string::npos);

  // K a view of a fused [B, S, 3, H, D] buffer: gaps between its elements.
  const int64_t s_local = 128;
  s = refused(local_graph(s_local / 2, true, false, {s_local * 3 * 2 * 128, 128, 3 * 2 * 128, 1}),
              ContextParallel{nullptr, 0, 2});
  CHECK(s.code() == StatusCode::NotSupported);
  CHECK(s.message().find("K (K) has gaps") != std::string::npos);

  // An odd local sequence has no two equal chunks.
  Graph odd("odd");
  test::TensorAdder add{odd};
  SdpaOperands io;
  io.q = add("Q", {1, 4, 129, 128}, DataType::BF16);
  io.k = add("K", {1, 2, 129, 128}, DataType::BF16);
  io.v = add("V", {1, 2, 129, 128}, DataType::BF16);
  io.o = add("O", {1, 4, 129, 128}, DataType::BF16, true);
  REQUIRE(odd.sdpa(io, SdpaAttributes{}.set_causal(true)).ok());
  s = refused(odd, ContextParallel{nullptr, 0, 2});
  CHECK(s.code() == StatusCode::InvalidArgument);
  CHECK(s.message().find("S 129 is odd") != std::string::npos);
}
