// Context-parallel plans (PlanOptions::context_parallel, docs/context-parallel.md) on the CPU: what the plan
// derives for rank r of W (its partial slots, the combine over every rank's), how it says so, and what it refuses.
// The collective itself runs on a GPU (tests/gpu, "[cp]").
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <set>

#include "catch.hpp"
#include "combine/stage.hpp"
#include "graph_builder.hpp"
#include "plan/context_parallel.hpp"
#include "common/sdpa_params.hpp"
#include "rime/inspect/config.hpp"
#include "rime/json.hpp"
#include "rime/plan.hpp"
#include "runtime/nccl.hpp"
#include "test_paths.hpp"
#include "testing/reference/sdpa.hpp"
#include "testing/trial.hpp"

using namespace rime;
using nlohmann::json;

namespace {

json example_json(const std::string& name) { return json::parse(test::read_text(test::example_path(name))); }

// examples/fp8_decode_gqa (B 8, 32 q heads over 8 kv heads, one token, D 128) with split_kv pinned.
Graph decode_graph(int split) {
  json doc = example_json("fp8_decode_gqa");
  doc["op"]["knobs"] = {{"split_kv", split}};
  Result<Graph> g = parse_graph_json(doc.dump());
  REQUIRE(g.ok());
  return g.value();
}

PlanOptions rank_of(int rank, int world) {
  PlanOptions o;
  o.device = DeviceDesc::h200();
  o.context_parallel = ContextParallel{nullptr, rank, world};
  return o;
}

}  // namespace

TEST_CASE("a context-parallel plan writes its rank's partial slots and combines every rank's", "[context_parallel]") {
  for (int split : {1, 4}) {
    INFO("split_kv " << split);
    const Graph g = decode_graph(split);
    Result<Plan> plan = Plan::build(g, rank_of(1, 2));
    REQUIRE(plan.ok());
    const Config& c = plan->config();
    // Partials even at split 1: the combine merges the two ranks' 2 x split slots.
    REQUIRE(c.derived.stages.size() >= 2);
    CHECK(c.derived.stages.back().role == "combine");
    const int64_t rows = 8 * 32 * 1, slots = 2 * split;
    const WorkspaceRegion* o = c.derived.region("o_partial");
    const WorkspaceRegion* lse = c.derived.region("lse_partial");
    REQUIRE(o);
    REQUIRE(lse);
    CHECK(o->bytes == slots * rows * 128 * 4);
    CHECK(lse->bytes == slots * rows * 4);

    // Rank 1 writes slots [split, 2 split); the combine reads all 2 x split.
    const engines::RoleBuffers buffers{};
    char* ws = reinterpret_cast<char*>(uintptr_t{1} << 40);
    const engines::Bindings b{buffers, ws};
    const SdpaParams p = engines::sdpa_params(plan->facts(), c, b);
    CHECK(reinterpret_cast<char*>(p.o_partial) == ws + o->offset + int64_t{split} * rows * 128 * 4);
    CHECK(reinterpret_cast<char*>(p.lse_partial) == ws + lse->offset + int64_t{split} * rows * 4);
    CHECK(p.num_splits == split);
    const CombineParams cp = engines::combine_params(plan->facts(), c, b);
    CHECK(reinterpret_cast<const char*>(cp.o_partial) == ws + o->offset);
    CHECK(cp.num_splits == slots);

    // Said in the explanation and the artifact; an artifact is not loaded without its communicator.
    CHECK(plan->explain().text.find("context   parallel: rank 1 of 2, K/V sharded by sequence") != std::string::npos);
    const std::string artifact = plan->to_json();
    CHECK(json::parse(artifact)["facts"]["context_parallel"] == json({{"rank", 1}, {"world", 2}}));
    Result<Plan> loaded = Plan::load(artifact);
    REQUIRE_FALSE(loaded.ok());
    CHECK(loaded.status().code() == StatusCode::NotSupported);
    CHECK(loaded.status().location() == "/facts/context_parallel");
  }
}

TEST_CASE("a world of one keeps the split plan's kernels and adds the partials' path at split 1",
          "[context_parallel]") {
  // At split 4 the single-GPU plan and the world-of-one plan launch the same kernels over the same slots.
  Result<Plan> single = Plan::build(decode_graph(4), PlanOptions{DeviceDesc::h200()});
  Result<Plan> world1 = Plan::build(decode_graph(4), rank_of(0, 1));
  REQUIRE(single.ok());
  REQUIRE(world1.ok());
  REQUIRE(single->config().derived.stages.size() == world1->config().derived.stages.size());
  for (size_t i = 0; i < single->config().derived.stages.size(); ++i)
    CHECK(single->config().derived.stages[i] == world1->config().derived.stages[i]);
  CHECK(single->workspace_size() == world1->workspace_size());
  // At split 1 the single-GPU plan has no combine; the world-of-one plan writes one slot and combines it.
  Result<Plan> one = Plan::build(decode_graph(1), PlanOptions{DeviceDesc::h200()});
  Result<Plan> one_cp = Plan::build(decode_graph(1), rank_of(0, 1));
  REQUIRE(one.ok());
  REQUIRE(one_cp.ok());
  CHECK(one->config().derived.stages.back().role == "attention");
  CHECK(one_cp->config().derived.stages.back().role == "combine");
}

TEST_CASE("context-parallel options and masks a plan refuses, naming why", "[context_parallel]") {
  for (auto [rank, world] : {std::pair{0, 0}, std::pair{2, 2}, std::pair{-1, 2}}) {
    Result<Plan> p = Plan::build(decode_graph(1), rank_of(rank, world));
    REQUIRE_FALSE(p.ok());
    CHECK(p.status().code() == StatusCode::InvalidArgument);
    CHECK(p.status().message().find(fmt::format("rank {} of world {}", rank, world)) != std::string::npos);
  }
  // Masks that need the keys' global positions: a window or band, a causal mask over several query rows (either
  // alignment), a top-left causal mask even over one row (its one key is the shard's first, not the sequence's).
  struct MaskCase {
    const char* example;
    json attributes;
    const char* message;
  };
  const MaskCase masks[] = {
      {"fp8_decode_gqa", {{"causal", true}, {"alignment", "bottom_right"}, {"window_left", 64}},
       "context_parallel: a window or band mask needs the keys' global positions"},
      {"fp8_prefill", {{"causal", true}, {"alignment", "bottom_right"}},
       "context_parallel: a bottom-right causal mask over S_q = 1024 query rows"},
      {"fp8_decode_gqa", {{"causal", true}, {"alignment", "top_left"}},
       "context_parallel: a top-left causal mask over S_q = 1 query rows"},
  };
  for (const MaskCase& m : masks) {
    json doc = example_json(m.example);
    for (const auto& [key, value] : m.attributes.items()) doc["op"]["attributes"][key] = value;
    Result<Graph> masked = parse_graph_json(doc.dump());
    REQUIRE(masked.ok());
    Result<Plan> p = Plan::build(masked.value(), rank_of(0, 2));
    INFO(m.message);
    REQUIRE_FALSE(p.ok());
    CHECK(p.status().code() == StatusCode::NotSupported);
    CHECK(p.status().message().find(m.message) != std::string::npos);
  }
  json prefill = example_json("fp8_prefill");
  prefill["op"]["attributes"]["causal"] = true;
  Result<Graph> g = parse_graph_json(prefill.dump());
  REQUIRE(g.ok());
  Result<Explanation> e = explain(g.value(), rank_of(0, 2));
  REQUIRE_FALSE(e.ok());
  CHECK(e.status().code() == StatusCode::NotSupported);
  CHECK(e.status().message().find("causal mask over S_q = 1024 query rows needs the keys' global positions") !=
        std::string::npos);
  // Without a mask a prefill shard plans (each rank's keys are a contiguous slice of the sequence), unless split is
  // ineligible (Amax_S): then every attention row declines, saying so.
  prefill["op"]["attributes"].erase("causal");
  g = parse_graph_json(prefill.dump());
  REQUIRE(g.ok());
  Result<Explanation> amax_s = explain(g.value(), rank_of(1, 2));
  REQUIRE(amax_s.ok());
  CHECK_FALSE(amax_s->served);
  CHECK(amax_s->decline.find("context parallelism merges split partials, and split is ineligible: Amax_S") !=
        std::string::npos);
  prefill["op"]["outputs"].erase("Amax_S");
  for (size_t i = 0; i < prefill["tensors"].size(); ++i)
    if (prefill["tensors"][i]["name"] == "Amax_S") prefill["tensors"].erase(i);
  g = parse_graph_json(prefill.dump());
  REQUIRE(g.ok());
  Result<Explanation> ok = explain(g.value(), rank_of(1, 2));
  REQUIRE(ok.ok());
  INFO(ok->text);
  CHECK(ok->served);
}

// Run by its own ctest with RIME_NCCL_LIBRARY naming no file (NCCL is loaded once per process).
TEST_CASE("NCCL that does not load is a CudaError naming where rime looked and how to point it", "[.nccl_missing]") {
  const char* path = std::getenv("RIME_NCCL_LIBRARY");
  REQUIRE(path);
  CHECK(nccl::api() == nullptr);
  const Status s = nccl::load_status();
  CHECK(s.code() == StatusCode::CudaError);
  CHECK(s.message().find(std::string("dlopen ") + path) != std::string::npos);
  CHECK(s.message().find("set RIME_NCCL_LIBRARY") != std::string::npos);
  CHECK(nccl::version() == 0);
}

TEST_CASE("prefill's zig-zag ring: every visible chunk pair once, the same work on every rank", "[context_parallel]") {
  for (bool causal : {true, false})
    for (int world = 1; world <= 8; ++world) {
      INFO("world " << world << (causal ? ", causal" : ""));
      std::vector<std::vector<int>> taken(2 * world, std::vector<int>(2 * world, 0));
      for (int rank = 0; rank < world; ++rank) {
        int full = 0, diagonal = 0;
        for (const context_parallel::RingPair& p : context_parallel::ring_schedule(rank, world, causal)) {
          // The pair's Q chunk is this rank's, its K/V chunk is held by the rank the ring passes at that step.
          CHECK(p.kv_rank == ((rank - p.step) % world + world) % world);
          const std::array<int, 2> mine = context_parallel::zigzag_chunks(rank, world);
          const std::array<int, 2> held = context_parallel::zigzag_chunks(p.kv_rank, world);
          CHECK((p.q_chunk == mine[0] || p.q_chunk == mine[1]));
          CHECK((p.kv_chunk == held[0] || p.kv_chunk == held[1]));
          CHECK(p.causal == (causal && p.q_chunk == p.kv_chunk));
          ++taken[p.q_chunk][p.kv_chunk];
          (p.causal ? diagonal : full) += 1;
        }
        CHECK(full == (causal ? 2 * world - 1 : 4 * world));
        CHECK(diagonal == (causal ? 2 : 0));
      }
      // Every pair a causal mask leaves visible (all of them without one) exactly once; the others never.
      for (int q = 0; q < 2 * world; ++q)
        for (int kv = 0; kv < 2 * world; ++kv) CHECK(taken[q][kv] == (!causal || kv <= q ? 1 : 0));
    }
}

TEST_CASE("prefill's ring passes: a Q chunk's pairs of one step as one run of held keys, at most one per step",
          "[context_parallel]") {
  for (bool causal : {true, false})
    for (int world = 1; world <= 8; ++world)
      for (int rank = 0; rank < world; ++rank) {
        INFO("rank " << rank << " of " << world << (causal ? ", causal" : ""));
        std::set<std::array<int, 3>> pairs, covered;  // (step, q chunk, kv chunk)
        for (const context_parallel::RingPair& p : context_parallel::ring_schedule(rank, world, causal))
          pairs.insert({p.step, p.q_chunk, p.kv_chunk});
        std::set<std::array<int, 2>> slots;  // (step, q chunk): one pass each
        int two = 0;
        for (const context_parallel::RingPass& p : context_parallel::ring_passes(rank, world, causal)) {
          const std::array<int, 2> held = context_parallel::zigzag_chunks(p.kv_rank, world);
          CHECK(slots.insert({p.step, p.q_chunk}).second);
          REQUIRE((p.kv_chunks == 1 || (p.kv_chunks == 2 && p.kv_local == 0)));
          for (int c = 0; c < p.kv_chunks; ++c) CHECK(covered.insert({p.step, p.q_chunk, held[p.kv_local + c]}).second);
          // Causal exactly when its last chunk is the Q chunk's own: bottom-right over the run is then the whole
          // graph's mask (every key of the first chunk is before every row of the Q chunk).
          CHECK(p.causal == (causal && held[p.kv_local + p.kv_chunks - 1] == p.q_chunk));
          if (p.kv_chunks == 2 && causal) CHECK(held[0] < p.q_chunk);
          two += p.kv_chunks == 2;
        }
        CHECK(covered == pairs);
        // Merged: without a mask every pass (2 world per rank); under the mask the late Q chunk's passes at the
        // steps whose K/V come from ranks at or after this one (world - rank of them).
        CHECK(two == (causal ? world - rank : 2 * world));
      }
}

TEST_CASE("prefill's zig-zag ring: the ranks' partials merge to the whole graph's attention (CPU reference)",
          "[context_parallel]") {
  for (bool causal : {true, false})
    for (int world : {1, 2, 3, 4}) {
      INFO("world " << world << (causal ? ", causal" : ""));
      const int64_t chunk = 3, S = 2 * world * chunk, H = 2, D = 16;
      Graph g("ring");
      test::TensorAdder add{g};
      SdpaOperands io;
      io.q = add("Q", {1, H, S, D}, DataType::BF16);
      io.k = add("K", {1, H, S, D}, DataType::BF16);
      io.v = add("V", {1, H, S, D}, DataType::BF16);
      io.o = add("O", {1, H, S, D}, DataType::BF16, true);
      SdpaAttributes a;
      a.causal = causal;
      REQUIRE(g.sdpa(io, a, "attn").ok());
      Result<Facts> f = analyze(g, DeviceDesc::h200());
      REQUIRE(f.ok());
      const testing::TrialInputs in = testing::make_inputs(g, 11 + world);
      double worst = 0;
      int rows = 0;
      for (int rank = 0; rank < world; ++rank) {
        const std::vector<context_parallel::RingPair> pairs = context_parallel::ring_schedule(rank, world, causal);
        for (int q_chunk : context_parallel::zigzag_chunks(rank, world))
          for (int64_t h = 0; h < H; ++h)
            for (int64_t i = q_chunk * chunk; i < (q_chunk + 1) * chunk; ++i) {
              // The row's partials, one per pair of its Q chunk, each over its K/V chunk's keys under the whole
              // graph's mask; what a pair's own plan masks must be the same keys: all of the chunk for a full
              // pair, those up to the row's own position within it for the diagonal one.
              std::vector<reference::RowResult> parts;
              for (const context_parallel::RingPair& p : pairs) {
                if (p.q_chunk != q_chunk) continue;
                const reference::KvRange keys{p.kv_chunk * chunk, (p.kv_chunk + 1) * chunk};
                const reference::KvRange seen = reference::unmasked_keys(g, f.value(), in.tensors, 0, i);
                const int64_t lo = std::max(seen.first, keys.first), hi = std::min(seen.last, keys.last);
                CHECK(lo == keys.first);
                CHECK(hi == (p.causal ? i + 1 : keys.last));
                parts.push_back(reference::attention_row(g, f.value(), in.tensors, 0, h, i, &keys));
              }
              const reference::RowResult merged = reference::combine_rows(parts, nullptr);
              const reference::RowResult whole = reference::attention_row(g, f.value(), in.tensors, 0, h, i);
              for (int64_t d = 0; d < D; ++d) worst = std::max(worst, std::abs(merged.o[d] - whole.o[d]));
              CHECK(merged.lse == Approx(whole.lse).margin(1e-12));
              ++rows;
            }
      }
      CHECK(rows == H * S);  // every row of the sequence, on the rank holding its chunk
      CHECK(worst < 1e-12);
    }
}
