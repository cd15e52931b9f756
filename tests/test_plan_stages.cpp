// analyze -> match -> choose on the CPU: facts per example, every required decline with its message, and the
// configuration the heuristics choose.
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "catch.hpp"
#include "common/params.h"
#include "heuristics/tile.hpp"
#include "rime/inspect/config.hpp"
#include "rime/json.hpp"
#include "row_declines.hpp"
#include "test_paths.hpp"

using namespace rime;
using nlohmann::json;

namespace {
json example_json(const std::string& name) { return json::parse(test::read_text(test::example_path(name))); }

Facts facts_of(const json& doc, const DeviceDesc& dev = DeviceDesc::h200()) {
  Result<Graph> g = graph_from_json(doc.dump());
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  Result<Facts> f = analyze(g.value(), dev);
  REQUIRE(f.ok());
  return f.value();
}

const RowVerdict& verdict_of(const std::vector<RowVerdict>& vs, const std::string& id) {
  for (const RowVerdict& v : vs)
    if (v.row_id == id) return v;
  FAIL("no verdict for " << id);
  return vs.front();
}

bool has(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }
}  // namespace

TEST_CASE("every row parses and every example has a verdict per attention row", "[rows]") {
  const auto& rows = capability_rows();
  REQUIRE(rows.size() == 8);
  for (const char* name : {"fp8_prefill", "fp8_decode_gqa", "bf16_causal_sink", "fp16_window_padding",
                           "fp8_nvfp4_o_planes", "fp8_mxfp8_o_token_major", "mxfp8_inputs"}) {
    Facts f = facts_of(example_json(name));
    CHECK(match(f).size() == 7);  // the combine row is matched only for split plans
  }
  CHECK_FALSE(parse_capability_row("{\"id\": 3}").ok());
  // q16_over_fp8_kv: true, false or "only"; "only" declines an FP8 Q with the reason.
  const auto only = std::find_if(rows.begin(), rows.end(), [](const CapabilityRow& r) {
    return r.only_q16_over_fp8_kv && r.q_quantization == QQuantization::None;
  });
  REQUIRE(only != rows.end());
  CHECK(only->id == "sdpa_sm90_q16_fp8kv");
  const RowVerdict v = match_row(*only, facts_of(example_json("fp8_decode_gqa")));
  CHECK_FALSE(v.accepted);
  CHECK(v.field == "q16_over_fp8_kv");
  CHECK(has(v.reason, "Q dtype FP8_E4M3 over K/V dtype FP8_E4M3: the row serves only a 16-bit Q over an FP8 K/V cache"));
  json bad = json::parse(test::read_text(test::source_dir() + "/rows/sdpa_sm90_q16_fp8kv.json"));
  bad["q16_over_fp8_kv"] = "sometimes";
  CHECK_FALSE(parse_capability_row(bad.dump()).ok());
}

TEST_CASE("analyze derives the facts of SPEC section 7", "[analyze]") {
  Facts f = facts_of(example_json("fp8_decode_gqa"));
  CHECK(f.op == OpKind::SdpaFp8);
  CHECK(f.B == 8);
  CHECK(f.H_q == 32);
  CHECK(f.H_kv == 8);
  CHECK(f.group == 4);
  CHECK(f.S_q == 1);
  CHECK(f.S_kv == 8192);
  CHECK(f.decode);
  CHECK(f.is_fp8);
  CHECK(f.mask.causal);
  CHECK(f.mask.bottom_right);
  CHECK(f.wants_stats);
  CHECK(f.split_eligible);
  CHECK(f.o_format() == "BF16");
  CHECK(f.q().layout == Layout::Bhsd);

  Facts nv = facts_of(example_json("fp8_nvfp4_o_planes"));
  CHECK(nv.o_block_scale == 16);
  CHECK(nv.sf_o_layout == SfLayout::Planes);
  CHECK(nv.q().layout == Layout::Bshd);
  CHECK(nv.o_format() == "NVFP4");
  Facts mx = facts_of(example_json("fp8_mxfp8_o_token_major"));
  CHECK(mx.o_block_scale == 32);
  CHECK(mx.sf_o_layout == SfLayout::TokenMajor);

  Facts prefill = facts_of(example_json("fp8_prefill"));
  CHECK_FALSE(prefill.split_eligible);
  CHECK(has(prefill.split_ineligible_reason, "Amax_S"));
  CHECK(prefill.attn_scale == Approx(1.0 / std::sqrt(128.0)));

  Facts win = facts_of(example_json("fp16_window_padding"));
  CHECK(win.mask.describe() == "causal+window(256)+padding");
  CHECK(win.mask.window_left == 256);
}

TEST_CASE("required declines explain themselves", "[match]") {
  SECTION("an FP4 O without sf_o") {
    json doc = example_json("fp8_nvfp4_o_planes");
    doc = doc.patch(json::parse(R"([{"op":"remove","path":"/op/outputs/sf_o"},{"op":"remove","path":"/tensors/10"}])"));
    Facts f = facts_of(doc);
    auto vs = match(f);
    CHECK(verdict_of(vs, "sdpa_mma_fp8").reason ==
          "row sdpa_mma_fp8: an FP4_E2M1 O is served only as a block-scaled O with sf_o");
    Result<Config> c = choose(f, vs);
    CHECK(c.status().code() == StatusCode::NotSupported);
    CHECK(has(c.status().message(), "an FP4_E2M1 O is served only as a block-scaled O with sf_o"));
    CHECK(has(c.status().message(), "row sdpa_sm90_fp8: an FP4_E2M1 O is served only as a block-scaled O with sf_o"));
  }
  SECTION("sf_o on a non-quantized op") {
    // The graph form is invalid (sdpa has no sf_o slot) ...
    json doc = example_json("bf16_causal_sink");
    doc = doc.patch(json::parse(R"([{"op":"add","path":"/tensors/-","value":{"name":"sf_o","uid":9,
        "dims":[2,16,512,4],"dtype":"FP8_E8M0","output":true}},{"op":"add","path":"/op/outputs/sf_o","value":9}])"));
    Result<Graph> g = graph_from_json(doc.dump());
    CHECK(g.status().code() == StatusCode::InvalidGraph);
    CHECK(has(g.status().message(), "sf_o is not an operand of sdpa"));
    // ... and the row for the non-quantized op declines block-scaled facts on its own.
    Facts f = facts_of(example_json("bf16_causal_sink"));
    f.o_block_scale = 32;
    CHECK(verdict_of(match(f), "sdpa_mma_f16").reason == "row sdpa_mma_f16: O format MXFP8 not in {BF16, FP16}");
  }
  SECTION("a head dim outside the row's set") {
    json doc = example_json("fp8_prefill");
    for (int i : {0, 1, 2, 9}) {
      doc["tensors"][i]["dims"][3] = 96;
      doc["tensors"][i].erase("strides");
    }
    CHECK(verdict_of(match(facts_of(doc)), "sdpa_mma_fp8").reason ==
          "row sdpa_mma_fp8: D_qk 96 not in {64, 128, 256}");
  }
  SECTION("arch outside the range") {
    Facts f = facts_of(example_json("fp8_decode_gqa"), DeviceDesc::from_arch("sm_80", 108).value());
    auto vs = match(f);
    CHECK(verdict_of(vs, "sdpa_mma_fp8").reason == "row sdpa_mma_fp8: arch sm_80 not in [sm_89, sm_120]");
    CHECK(choose(f, vs).status().code() == StatusCode::NotSupported);
    // Both bounds: the Hopper rows stop at sm_90, the mma.sync rows at sm_120.
    Facts blackwell = facts_of(example_json("fp8_decode_gqa"), DeviceDesc::from_arch("sm_100a", 148).value());
    CHECK(verdict_of(match(blackwell), "sdpa_sm90_fp8").reason ==
          "row sdpa_sm90_fp8: arch sm_100a not in [sm_90, sm_90]");
    CHECK(verdict_of(match(blackwell), "sdpa_mma_fp8").accepted);
    Facts beyond = facts_of(example_json("fp8_decode_gqa"), DeviceDesc::from_arch("sm_121", 48).value());
    CHECK(verdict_of(match(beyond), "sdpa_mma_fp8").reason == "row sdpa_mma_fp8: arch sm_121 not in [sm_89, sm_120]");
  }
  SECTION("an arch given by name: sm_50 .. sm_130, both ends taken") {
    CHECK(DeviceDesc::from_arch("sm_50", 1).ok());
    CHECK(DeviceDesc::from_arch("sm_130", 1024).ok());
    for (const char* outside : {"sm_49", "sm_131"}) {
      INFO(outside);
      Result<DeviceDesc> d = DeviceDesc::from_arch(outside, 132);
      REQUIRE_FALSE(d.ok());
      CHECK(d.status().message() == std::string("arch '") + outside + "' is outside sm_50..sm_130");
    }
    CHECK(DeviceDesc::from_arch("sm_90a", 0).status().message() == "SM count 0 is outside 1..1024");
    CHECK(DeviceDesc::from_arch("sm_90a", 1025).status().message() == "SM count 1025 is outside 1..1024");
  }
  SECTION("a pinned split outside the row's domain") {
    json doc = example_json("fp8_decode_gqa");
    doc["op"]["knobs"] = {{"split_kv", 3}};
    CHECK(verdict_of(match(facts_of(doc)), "sdpa_mma_fp8").reason ==
          "row sdpa_mma_fp8: split_kv 3 not in {1, 2, 4, 8, 16, 32, 64, 128}");
  }
  SECTION("a pinned tile outside the row's domain") {
    json doc = example_json("fp8_decode_gqa");
    doc["op"]["knobs"] = {{"tile", {{"q", 32}, {"kv", 64}}}};
    CHECK(verdict_of(match(facts_of(doc)), "sdpa_mma_fp8").reason ==
          "row sdpa_mma_fp8: tile 32x64 not in {16x32, 16x64, 32x32, 64x64, 128x64} for head dims (128, 128)");
  }
  SECTION("a pinned split on a row not wired for split") {
    json doc = example_json("fp8_decode_gqa");
    doc["op"]["knobs"] = {{"split_kv", 4}};
    Facts f = facts_of(doc);
    CapabilityRow row = test::row_of("sdpa_mma_fp8");
    row.split_kv_supported = false;
    CHECK(match_row(row, f).reason == "row sdpa_mma_fp8: split_kv 4 is pinned and the row is not wired for split");
  }
  SECTION("a pinned split where split is ineligible") {
    json doc = example_json("fp8_prefill");
    doc["op"]["knobs"] = {{"split_kv", 2}};
    CHECK(has(verdict_of(match(facts_of(doc)), "sdpa_mma_fp8").reason,
              "split_kv 2 is pinned but split is ineligible: Amax_S is requested"));
  }
  SECTION("the Hopper rows' own limits") {
    // Decode: the Hopper row takes it (its one-consumer tile of 64 rows; memory-bound, the empty rows cost tensor
    // work only); the 16-bit one declines graphs of fewer than 64 packed rows.
    Facts decode = facts_of(example_json("fp8_decode_gqa"));
    CHECK(verdict_of(match(decode), "sdpa_sm90_fp8").accepted);
    // wgmma needs the arch-specific target.
    Facts plain = facts_of(example_json("fp8_prefill"), DeviceDesc::from_arch("sm_90", 132).value());
    CHECK(has(verdict_of(match(plain), "sdpa_sm90_fp8").reason, "is not sm_90a"));
    // A pinned tile the row lists, but for other head dims: the tiles are per head dim.
    json doc = example_json("fp8_prefill");
    doc["op"]["knobs"] = {{"tile", {{"q", 128}, {"kv", 256}}}};  // FP8 D 64's two-consumer tile
    const RowVerdict v = verdict_of(match(facts_of(doc)), "sdpa_sm90_fp8");
    CHECK(v.field == "tiles");
    CHECK(v.reason == "row sdpa_sm90_fp8: tile 128x256 not in {64x128, 128x128, 192x96} for head dims (128, 128)");
  }
}

TEST_CASE("FP8 and BF16 prefill on sm_90a run on the warp-specialized engine", "[choose]") {
  Facts f = facts_of(example_json("fp8_prefill"));
  Result<Config> c = choose(f, match(f));
  REQUIRE(c.ok());
  CHECK(c->decision.row_id == "sdpa_sm90_fp8");
  CHECK(c->derived.engine == "sdpa_sm90");
  CHECK(c->decision.tile == TileShape{128, 128});
  CHECK(c->decision.split_kv == 1);
  // V is transposed in the kernel: no pre-pass, no workspace.
  CHECK(c->derived.workspace.empty());
  REQUIRE(c->derived.stages.size() == 1);
  CHECK(c->derived.stages[0].spec.header == "sdpa_sm90/kernel.cuh");
  CHECK(c->derived.stages[0].block == 384);
  // Q 128 rows x 128 bytes, two K, V and V^T stages of 128 x 128 bytes (V^T with 8 more rows for the row sums:
  // rime_sm90::vt_sum_rows), 128 bytes of mbarriers, and 1024 bytes to align the dynamic base.
  CHECK(c->derived.stages[0].smem_bytes == 16384 + 6 * 16384 + 2 * 8 * 128 + 128 + 1024);
  Facts bf16 = facts_of(example_json("bf16_causal_sink"));
  Result<Config> cb = choose(bf16, match(bf16));
  REQUIRE(cb.ok());
  CHECK(cb->decision.row_id == "sdpa_sm90_f16");
  CHECK(cb->decision.tile == TileShape{128, 128});
  // With too little shared memory for it (no Hopper part has so little), FP8 prefill falls to the mma.sync engine.
  Facts small = f;
  small.device.smem_per_block = 100 * 1024;
  Result<Config> cp = choose(small, match(small));
  REQUIRE(cp.ok());
  CHECK(cp->decision.row_id == "sdpa_mma_fp8");
  CHECK(cp->derived.workspace_bytes == 0);
  // The same graph on sm_89 runs on the mma.sync engine with no workspace.
  Facts ada = facts_of(example_json("fp8_prefill"), DeviceDesc::from_arch("sm_89", 128).value());
  Result<Config> c89 = choose(ada, match(ada));
  REQUIRE(c89.ok());
  CHECK(c89->decision.row_id == "sdpa_mma_fp8");
  CHECK(c89->derived.workspace_bytes == 0);
  CHECK(c89->derived.stages.size() == 1);
}

TEST_CASE("paged K/V: the facts, and decode and prefill on the Hopper engine through the table", "[choose][paged]") {
  json doc = example_json("fp8_paged_decode");
  Facts f = facts_of(doc);
  CHECK(f.paged);
  CHECK(f.page_size == 16);
  CHECK(f.num_pages == 200);
  CHECK(f.max_pages == 64);
  CHECK(f.S_kv == 1024);
  const std::vector<RowVerdict> decode_verdicts = match(f);
  // Both FP8 rows serve paged K/V; a decode step's 4 packed rows take the Hopper engine's one-consumer tile.
  CHECK(verdict_of(decode_verdicts, "sdpa_sm90_fp8").accepted);
  CHECK(verdict_of(decode_verdicts, "sdpa_mma_fp8").accepted);
  Result<Config> c = choose(f, decode_verdicts);
  REQUIRE(c.ok());
  CHECK(c->decision.row_id == "sdpa_sm90_fp8");
  CHECK(c->decision.consumer_warpgroups == 1);
  CHECK(c->decision.tile == TileShape{64, 128});
  REQUIRE(c->derived.stages.size() == 2);  // attention + combine: decode splits
  CHECK(has(c->derived.stages[0].spec.name_expression, "sdpa_sm90_fwd"));
  // A split decode over per-sequence lengths whose chunks the GPU holds at once (B 4 x 8 kv heads x split, at most
  // two CTAs of one consumer per SM on 132 SMs) runs the grid of per-sequence chunks, cut from the longest sequence.
  const int64_t split = c->decision.split_kv;
  CHECK(split > 1);
  CHECK(4 * 8 * split <= 2 * 132);
  CHECK_FALSE(c->derived.stages[0].persistent);
  CHECK(has(c->derived.stages[0].spec.name_expression, "paged, one_consumer>"));
  CHECK(c->derived.stages[0].grid == std::array<int64_t, 3>{1, 8, 4 * split});
  CHECK_FALSE(c->derived.stages[1].persistent);
  // A BF16 Q over the same FP8 cache runs on the Hopper row for a 16-bit Q over FP8 K/V: on one consumer the FP8
  // kernel (its 64 x 128 tile) with Q split into two E4M3 terms, on the chunk grid as the FP8 decode.
  {
    json q16 = doc;
    q16["tensors"][0]["dtype"] = "BF16";
    Facts fq = facts_of(q16);
    Result<Config> cq = choose(fq, match(fq));
    REQUIRE(cq.ok());
    CHECK(cq->decision.row_id == "sdpa_sm90_q16_fp8kv");
    CHECK(cq->decision.tile == TileShape{64, 128});
    CHECK_FALSE(cq->derived.stages[0].persistent);
    CHECK(has(cq->derived.stages[0].spec.name_expression, "sdpa_sm90_fwd<e4m3, fp32, 128, 128,"));
    CHECK(has(cq->derived.stages[0].spec.name_expression, "q_bf16"));
    CHECK(has(cq->derived.stages[0].spec.name_expression, "kv_fp8"));
    CHECK(has(cq->decision.tile_reason, "a BF16 Q over FP8_E4M3 K/V at D 128 (the FP8 kernel, Q in two E4M3 terms)"));
  }
  // A cache of more than 32768 KV tiles keeps the chunk grid even where its chunks take more than a wave (split 16:
  // 512 CTAs; the kernel's walk counts in 32 bits).
  {
    json long_cache = doc;
    long_cache["tensors"][13]["dims"][1] = 262400;  // page_table [B, max_pages]: 262400 x 16 keys, 32800 KV tiles
    long_cache["tensors"][13].erase("strides");
    long_cache["op"]["knobs"] = {{"split_kv", 16}};
    Facts fl = facts_of(long_cache);
    REQUIRE(fl.S_kv == 262400 * 16);
    Result<Config> cl = choose(fl, match(fl));
    REQUIRE(cl.ok());
    CHECK(cl->decision.split_kv == 16);
    CHECK_FALSE(cl->derived.stages[0].persistent);
    json short_cache = doc;
    short_cache["op"]["knobs"] = {{"split_kv", 16}};
    Facts fs = facts_of(short_cache);
    Result<Config> cs = choose(fs, match(fs));
    REQUIRE(cs.ok());
    CHECK(cs->derived.stages[0].persistent);
  }
  // A paged prefill (S_q 256, 1024 packed rows) runs on the warp-specialized engine, a TMA box per page.
  for (int t : {0, 9}) {
    doc["tensors"][t]["dims"][2] = 256;
    doc["tensors"][t].erase("strides");
  }
  doc["tensors"][10]["dims"][2] = 256;
  doc["tensors"][10].erase("strides");
  Facts prefill = facts_of(doc);
  const std::vector<RowVerdict> verdicts = match(prefill);
  CHECK(verdict_of(verdicts, "sdpa_sm90_fp8").accepted);
  CHECK(verdict_of(verdicts, "sdpa_mma_fp8").accepted);
  Result<Config> cp = choose(prefill, verdicts);
  REQUIRE(cp.ok());
  CHECK(cp->decision.row_id == "sdpa_sm90_fp8");
  CHECK(cp->decision.consumer_warpgroups > 1);
  CHECK(has(cp->derived.stages[0].spec.name_expression, "sdpa_sm90_fwd"));
}

TEST_CASE("the warp-specialized engine runs one tile per dtype and head dim, and declines other pins", "[choose]") {
  json doc = example_json("bf16_causal_sink");
  for (int i : {0, 1, 2, 4}) {
    doc["tensors"][i]["dims"][3] = 256;
    doc["tensors"][i].erase("strides");
  }
  Facts f = facts_of(doc);
  Result<Config> c = choose(f, match(f));
  REQUIRE(c.ok());
  CHECK(c->decision.row_id == "sdpa_sm90_f16");
  CHECK(c->decision.tile == TileShape{128, 64});  // D 256: 64 keys per tile
  // D 64 runs 128 x 128 here; a pinned 128 x 64 (in the row's set, for D 256) goes to a row that honours it.
  json d64 = example_json("bf16_causal_sink");
  d64["op"]["knobs"] = {{"tile", {{"q", 128}, {"kv", 64}}}};
  Facts pinned = facts_of(d64);
  Result<Config> p = choose(pinned, match(pinned));
  REQUIRE(p.ok());
  CHECK(p->decision.row_id == "sdpa_mma_f16");
  CHECK(p->decision.tile == TileShape{128, 64});
  CHECK(verdict_of(match(pinned), "sdpa_sm90_f16").reason ==
        "row sdpa_sm90_f16: tile 128x64 not in {64x128, 128x128, 192x128} for head dims (64, 64)");
  // A decision that records a tile the row lists for other head dims is refused by derive too.
  Facts unpinned = facts_of(example_json("bf16_causal_sink"));
  Decision d{"sdpa_sm90_f16", {128, 64}, 2, 1, "", "", {}};
  CHECK(derive(unpinned, d).status().message() ==
        "row sdpa_sm90_f16: tile 128x64 on 2 consumer warpgroups not in {64x128 on 1 consumer warpgroups, 128x128 on 2 "
        "consumer warpgroups, 192x128 on 3 consumer warpgroups} for head dims (64, 64)");
}

TEST_CASE("the warp-specialized engine gives three consumers where the waves or the causal grid favour them",
          "[choose]") {
  auto tile_of = [](const json& doc) {
    Facts f = facts_of(doc);
    Result<Config> c = choose(f, match(f));
    REQUIRE(c.ok());
    CHECK(c->decision.row_id == "sdpa_sm90_fp8");
    return c->decision;
  };
  auto shaped = [](int64_t b, int64_t h, int64_t s, int64_t d, bool causal) {
    json doc = example_json("fp8_prefill");
    for (json& t : doc["tensors"])
      if (t["dims"][2] == 1024) {  // Q, K, V, O and Stats: [2, 8, 1024, 128 or 1]
        const int64_t last = t["dims"][3].get<int64_t>();
        t["dims"] = {b, h, s, last == 128 ? d : last};
        t.erase("strides");
      }
    if (causal) doc["op"]["attributes"]["causal"] = true;
    return doc;
  };
  // B1 H32 S16384: 21 waves of 192-row CTAs against 32 of 128 rows.
  const Decision long_seq = tile_of(shaped(1, 32, 16384, 128, false));
  CHECK(long_seq.tile == TileShape{192, 96});
  CHECK(has(long_seq.tile_reason, "three consumer warpgroups: 2752 CTAs of 192 rows in 21 waves"));
  // B4 H32 S4096: 22 waves of 192 rows (the last row tile a third full) beat 32 of 128 at FP8 D 128's measured
  // 0.92 per row (the 192-row tile measured 0.962x the time on the H200, session 19).
  CHECK(tile_of(shaped(4, 32, 4096, 128, false)).tile == TileShape{192, 96});
  // B1 H132 S1024: 8 exact waves of 128-row CTAs; 6 waves of 192 rows (the last row tile a third full) cost more.
  const Decision whole_waves = tile_of(shaped(1, 132, 1024, 128, false));
  CHECK(whole_waves.tile == TileShape{128, 128});
  CHECK(has(whole_waves.tile_reason, "two consumer warpgroups: 792 CTAs of 192 rows in 6 waves"));
  // Causal D 128: the causal grid's cost (the partial row tile first). B1 H32 S16384 and B4 H32 S4096: three (the
  // latter measured 0.968x the time of two on the H200, session 21); B1 H1 S1024: six row tiles on 132 SMs, where the
  // heaviest CTA is the grid's time, 192 x 1024 pairs at 0.95 against two's 128 x 1024.
  const Decision causal = tile_of(shaped(1, 32, 16384, 128, true));
  CHECK(causal.tile == TileShape{192, 96});
  CHECK(has(causal.tile_reason, "three consumer warpgroups: causal grid cost"));
  CHECK(tile_of(shaped(4, 32, 4096, 128, true)).tile == TileShape{192, 96});
  const Decision small_causal = tile_of(shaped(1, 1, 1024, 128, true));
  CHECK(small_causal.tile == TileShape{128, 128});
  CHECK(has(small_causal.tile_reason, "two consumer warpgroups: causal grid cost"));
  // Causal FP8 D 64: three on 128-key tiles (B2 H32 S8192 measured 0.795x the time of two); a sliding window keeps
  // two (three not measured there).
  CHECK(tile_of(shaped(1, 32, 16384, 64, true)).tile == TileShape{192, 128});
  json window = shaped(1, 32, 16384, 128, false);
  window["op"]["attributes"]["window_left"] = 512;
  const Decision windowed = tile_of(window);
  CHECK(windowed.tile == TileShape{128, 128});
  CHECK(has(windowed.tile_reason, "a window or band mask"));
  // D 256 (O of 128 registers per consumer thread) keeps two, on 128-key tiles at FP8.
  CHECK(tile_of(shaped(1, 32, 16384, 256, false)).tile == TileShape{128, 128});
  // Short keys (at most two KV tiles of the largest tile): one consumer, two CTAs per SM (B128 S128 measured 0.137 ms
  // at D 64 against 0.166 on three, docs/bench/oracle/h200.csv); at S 512 D 64 (four 128-key tiles) three again.
  const Decision short_keys = tile_of(shaped(128, 32, 128, 64, false));
  CHECK(short_keys.tile == TileShape{64, 128});
  CHECK(short_keys.consumer_warpgroups == 1);
  CHECK(has(short_keys.tile_reason, "one consumer warpgroup: 128 keys are at most two KV tiles of the 192-row tile"));
  CHECK(tile_of(shaped(32, 32, 512, 64, false)).tile == TileShape{192, 128});
  // Causal S 512 D 128: each of three consumers walks the keys up to its own rows' diagonal, which makes three the
  // cheaper grid (measured 0.884x the time of two).
  const Decision causal_512 = tile_of(shaped(32, 32, 512, 128, true));
  CHECK(causal_512.tile == TileShape{192, 96});
  CHECK(has(causal_512.tile_reason, "three consumer warpgroups: causal grid cost"));
  // 16-bit inputs: the same rule; at D 64 128-key tiles (three 16-bit consumers have 160 registers).
  json bf16 = example_json("bf16_causal_sink");  // made B1 H32 S16384 D 64, no mask
  for (json& t : bf16["tensors"]) {
    const std::string name = t["name"];
    if (name == "sink") t["dims"] = {1, 32, 1, 1};
    else t["dims"] = {1, 32, 16384, name == "Stats" ? 1 : 64};
    t.erase("strides");
  }
  bf16["op"]["attributes"].erase("causal");
  bf16["op"]["attributes"].erase("alignment");
  Facts f16 = facts_of(bf16);
  Result<Config> c16 = choose(f16, match(f16));
  INFO(c16.status().to_string());
  REQUIRE(c16.ok());
  CHECK(c16->decision.row_id == "sdpa_sm90_f16");
  CHECK(c16->decision.tile == TileShape{192, 128});
}

TEST_CASE("an FP8 multi-token decode of 32 packed rows runs on one consumer warpgroup, two CTAs per SM",
          "[choose]") {
  json doc = example_json("fp8_paged_multitoken_decode");  // B 4, H 32 / 8, 4 tokens: made 8 (32 packed rows)
  for (json& t : doc["tensors"])
    if (t["name"] == "Q" || t["name"] == "O" || t["name"] == "Stats") {
      t["dims"][2] = 8;
      t.erase("strides");
    }
  Facts f = facts_of(doc);
  Result<Config> c = choose(f, match(f));
  INFO(c.status().to_string());
  REQUIRE(c.ok());
  CHECK(c->decision.row_id == "sdpa_sm90_fp8");
  CHECK(c->decision.tile == TileShape{64, 128});
  CHECK(has(c->decision.tile_reason, "one consumer warpgroup"));
  REQUIRE(!c->derived.stages.empty());
  CHECK(c->decision.consumer_warpgroups == 1);
  CHECK(has(c->derived.stages[0].spec.name_expression, ", one_consumer>"));
  CHECK(c->derived.stages[0].block == 256);
  // The split candidates' waves count two CTAs per SM: 4 x 8 CTAs unsplit, 128 x 2 per wave on 132 SMs.
  REQUIRE(!c->decision.split_candidates.empty());
  for (const auto& cand : c->decision.split_candidates)
    CHECK(cand.waves == (4 * 8 * int64_t{cand.split} + 2 * 132 - 1) / (2 * 132));
  // Split over per-sequence lengths into more chunks than the GPU holds at once (4 x 8 x 16 = 512 CTAs, 264 at two
  // an SM), it runs balanced: a persistent grid of two CTAs per SM (for_each_balanced_item); at split 4 (128 CTAs)
  // the grid of per-sequence chunks; unsplit, the grid of row tiles x kv heads x batches.
  Decision split16 = c->decision;
  split16.split_kv = 16;
  Result<Derived> balanced = derive(f, split16);
  REQUIRE(balanced.ok());
  CHECK(balanced->stages[0].persistent);
  CHECK(has(balanced->stages[0].spec.name_expression, "balanced, one_consumer>"));
  CHECK(balanced->stages[0].grid[0] == 2 * 132);
  CHECK(balanced->stages[0].grid[1] == 1);
  Decision split4 = c->decision;
  split4.split_kv = 4;
  Result<Derived> chunks = derive(f, split4);
  REQUIRE(chunks.ok());
  CHECK_FALSE(chunks->stages[0].persistent);
  CHECK(chunks->stages[0].grid == std::array<int64_t, 3>{1, 8, 4 * 4});
  Decision unsplit = c->decision;
  unsplit.split_kv = 1;
  Result<Derived> plain = derive(f, unsplit);
  REQUIRE(plain.ok());
  CHECK(!plain->stages[0].persistent);
  // derive re-matches the decision's row: the BF16 row does not take this FP8 graph.
  Decision pinned = c->decision;
  pinned.row_id = "sdpa_sm90_f16";
  Result<Derived> other = derive(f, pinned);
  CHECK_FALSE(other.ok());
  CHECK(has(other.status().message(), "op sdpa_fp8 not in {sdpa}"));
}

TEST_CASE("a 16-bit decode runs on the Hopper engine's one-consumer tile, D 256 at one CTA per SM", "[choose]") {
  // BF16 decode, one token of a GQA group of 4 (4 packed rows), at each head dim pair.
  auto decode = [](int64_t d_qk, int64_t d_v) {
    Graph g("bf16_decode");
    auto add = [&g](const char* name, std::vector<int64_t> dims, bool output = false) {
      const int64_t uid = static_cast<int64_t>(g.tensors().size()) + 1;
      return g.add_tensor({name, uid, dims, TensorDesc::packed_strides(dims), DataType::BF16, output});
    };
    SdpaOperands io;
    io.q = add("Q", {2, 32, 1, d_qk});
    io.k = add("K", {2, 8, 4096, d_qk});
    io.v = add("V", {2, 8, 4096, d_v});
    io.o = add("O", {2, 32, 1, d_v}, true);
    SdpaAttributes a;
    a.causal = true;
    a.alignment = DiagonalAlignment::BottomRight;
    REQUIRE(g.sdpa(io, a).ok());
    Result<Facts> f = analyze(g, DeviceDesc::h200());
    REQUIRE(f.ok());
    return f.value();
  };
  for (auto [d_qk, d_v] : {std::pair<int64_t, int64_t>{64, 64}, {80, 80}, {96, 96}, {128, 128}, {192, 128}}) {
    INFO("D " << d_qk << " / " << d_v);
    Facts f = decode(d_qk, d_v);
    Result<Config> c = choose(f, match(f));
    REQUIRE(c.ok());
    CHECK(c->decision.row_id == "sdpa_sm90_f16");
    CHECK(c->decision.consumer_warpgroups == 1);
    // 128 keys below D 128, whose 64-key stages held too few bytes in flight for a decode (layout.h, tile_kv).
    CHECK(c->decision.tile == TileShape{64, d_qk < 128 ? 128 : 64});
    CHECK(has(c->derived.stages[0].spec.name_expression, "one_consumer>"));
  }
  // The MLA decode has no other row: mma.sync lists no D_qk 192.
  Facts mla = decode(192, 128);
  CHECK(has(verdict_of(match(mla), "sdpa_mma_f16").reason, "D_qk 192 not in"));
  // D 256: one consumer at one CTA per SM (its consumer keeps 240 registers for O beside S), Q and two K and two V
  // stages of 64 x 512 bytes, the mbarriers and the base's alignment.
  Facts d256 = decode(256, 256);
  Result<Config> c256 = choose(d256, match(d256));
  REQUIRE(c256.ok());
  CHECK(c256->decision.row_id == "sdpa_sm90_f16");
  CHECK(c256->decision.consumer_warpgroups == 1);
  CHECK(has(c256->decision.tile_reason, "at most 64 packed rows (one CTA per SM)"));
  CHECK(c256->derived.stages[0].smem_bytes == 5 * 32768 + 128 + 1024);
  CHECK(has(c256->derived.stages[0].spec.name_expression, ", 256, 256,"));
  CHECK(has(c256->derived.stages[0].spec.name_expression, "one_consumer>"));
  // A row with no one-consumer tile for the head dims declines few packed rows, saying why: a BF16 Q over an FP8
  // cache at D 256 (its widened 16-bit kernel runs two consumers), which mma.sync then serves.
  json q16 = example_json("fp8_decode_gqa");
  q16["tensors"][0]["dtype"] = "BF16";
  for (int i : {0, 1, 2, 9}) {
    q16["tensors"][i]["dims"][3] = 256;
    q16["tensors"][i].erase("strides");
  }
  Facts fq = facts_of(q16);
  const std::vector<RowVerdict> verdicts = match(fq);
  const RowVerdict& declined = verdict_of(verdicts, "sdpa_sm90_q16_fp8kv");
  CHECK_FALSE(declined.accepted);
  CHECK(declined.field == "min_packed_rows");
  CHECK(has(declined.reason, "packed rows S_q x group = 1 x 4 = 4 < 64, and no one-consumer tile for head dims "
                             "(256, 256)"));
  Result<Config> cq = choose(fq, verdicts);
  REQUIRE(cq.ok());
  CHECK(cq->decision.row_id == "sdpa_mma_fp8");
}

// Head dim 96 (Phi-3): Q and K rows of 192 bytes (16-bit, three 64-byte sub-tiles) or 96 (FP8, three 32-byte
// sub-tiles, one k step of Q.K^T each) on the Hopper engine in every type; head dim 80 (Phi-2) there in 16 bits
// (five 32-byte sub-tiles), FP8 declined (80 bytes are not whole k steps of 32).
TEST_CASE("head dim 96 runs on the Hopper engine in every type, and 80 in 16 bits", "[choose]") {
  auto with_d = [](json doc, const std::vector<int>& tensors, int64_t d) {
    for (int i : tensors) {
      doc["tensors"][i]["dims"][3] = d;
      doc["tensors"][i].erase("strides");
    }
    return doc;
  };
  const json fp8 = with_d(example_json("fp8_prefill"), {0, 1, 2, 9}, 96);
  Facts f = facts_of(fp8);
  Result<Config> c = choose(f, match(f));
  REQUIRE(c.ok());
  CHECK(c->decision.row_id == "sdpa_sm90_fp8");
  CHECK(c->decision.tile == TileShape{128, 128});
  CHECK(has(c->derived.stages[0].spec.name_expression, "sdpa_sm90_fwd<e4m3, e4m3, 96, 96,"));
  // Q 128 rows x 96 bytes, two K and V stages of 128 x 96 bytes and two V^T stages of (96 + 8) x 128 bytes, the
  // mbarriers, and 1024 bytes to align the dynamic base.
  CHECK(c->derived.stages[0].smem_bytes == 12288 + 4 * 12288 + 2 * 104 * 128 + 128 + 1024);
  // A BF16 Q over the FP8 K/V: the FP8 kernel with Q in two E4M3 terms, as at D 128 (no Amax_S, which that row
  // declines).
  json q16 = fp8;
  q16["tensors"][0]["dtype"] = "BF16";
  q16["tensors"].erase(11);
  q16["op"]["outputs"].erase("Amax_S");
  Facts fq = facts_of(q16);
  Result<Config> cq = choose(fq, match(fq));
  REQUIRE(cq.ok());
  CHECK(cq->decision.row_id == "sdpa_sm90_q16_fp8kv");
  CHECK(has(cq->derived.stages[0].spec.name_expression, "sdpa_sm90_fwd<e4m3, e4m3, 96, 96,"));
  CHECK(has(cq->derived.stages[0].spec.name_expression, "q_bf16"));
  const json bf16 = with_d(example_json("bf16_causal_sink"), {0, 1, 2, 4}, 96);
  Facts fb = facts_of(bf16);
  Result<Config> cb = choose(fb, match(fb));
  REQUIRE(cb.ok());
  CHECK(cb->decision.row_id == "sdpa_sm90_f16");
  CHECK(has(cb->derived.stages[0].spec.name_expression, "sdpa_sm90_fwd<bf16, bf16, 96, 96,"));
  Facts f80 = facts_of(with_d(example_json("bf16_causal_sink"), {0, 1, 2, 4}, 80));
  Result<Config> c80 = choose(f80, match(f80));
  REQUIRE(c80.ok());
  CHECK(c80->decision.row_id == "sdpa_sm90_f16");
  CHECK(has(c80->derived.stages[0].spec.name_expression, "sdpa_sm90_fwd<bf16, bf16, 80, 80,"));
  // FP8 at head dim 80: every FP8 row declines, saying which head dims it serves.
  Facts fp8_80 = facts_of(with_d(example_json("fp8_prefill"), {0, 1, 2, 9}, 80));
  const std::vector<RowVerdict> verdicts = match(fp8_80);
  CHECK(verdict_of(verdicts, "sdpa_sm90_fp8").reason == "row sdpa_sm90_fp8: D_qk 80 not in {64, 96, 128, 256, 192}");
  CHECK(verdict_of(verdicts, "sdpa_mma_fp8").reason == "row sdpa_mma_fp8: D_qk 80 not in {64, 128, 256}");
  CHECK(choose(fp8_80, verdicts).status().code() == StatusCode::NotSupported);
}

TEST_CASE("choose honours pins and picks decode splits", "[choose]") {
  json doc = example_json("fp8_decode_gqa");
  // On the H200 an FP8 decode runs on the warp-specialized engine's one-consumer tile, split.
  Facts hopper = facts_of(doc);
  Result<Config> h = choose(hopper, match(hopper));
  REQUIRE(h.ok());
  CHECK(h->decision.row_id == "sdpa_sm90_fp8");
  CHECK(h->decision.tile == TileShape{64, 128});
  CHECK(h->decision.split_kv > 1);
  // On an sm_89 GPU (Ada: no wgmma) the mma.sync engine's decode tile.
  const DeviceDesc ada = DeviceDesc::from_arch("sm_89", 128).value();
  Facts f = facts_of(doc, ada);
  Result<Config> c = choose(f, match(f));
  REQUIRE(c.ok());
  CHECK(c->decision.row_id == "sdpa_mma_fp8");
  CHECK(c->decision.tile == TileShape{16, 32});
  const int split = c->decision.split_kv;
  CHECK(split > 1);
  // Split-major partial O (fp32), then the partial LSE, each 256-byte aligned (B 8, H_q 32, S_q 1, D_v 128).
  REQUIRE(c->derived.workspace.size() == 2);
  CHECK(c->derived.workspace[0].name == "o_partial");
  CHECK(c->derived.workspace[0].bytes == int64_t{split} * 8 * 32 * 128 * 4);
  CHECK(c->derived.workspace[1].name == "lse_partial");
  CHECK(c->derived.workspace[1].offset == c->derived.workspace[0].bytes);
  CHECK(c->derived.workspace_bytes == int64_t{split} * 8 * 32 * (128 + 1) * 4);
  REQUIRE(c->derived.stages.size() == 2);
  CHECK(c->derived.stages[1].role == "combine");
  CHECK(c->derived.stages[1].grid == std::array<int64_t, 3>{8 * 32, 1, 1});
  // One length for every sequence: the chunk grid, not the balanced persistent one (no spread to balance).
  CHECK_FALSE(c->derived.stages[0].persistent);
  CHECK(c->derived.stages[0].grid[2] == 8 * int64_t{split});

  doc["op"]["knobs"] = {{"split_kv", 8}, {"tile", {{"q", 64}, {"kv", 64}}}};
  Facts pinned = facts_of(doc, ada);
  Result<Config> p = choose(pinned, match(pinned));
  REQUIRE(p.ok());
  CHECK(p->decision.split_kv == 8);
  CHECK(p->decision.tile == TileShape{64, 64});
  CHECK(p->decision.split_reason == "pinned by the graph");
}

TEST_CASE("a split decode's wave counts both CTAs an SM holds where a CTA keeps at most 32 KB of K/V in flight",
          "[choose]") {
  // engines/sdpa_sm90/engine.cpp, geometry(): B8 H32/8 S_kv 32k on the one-consumer tile (two CTAs an SM), 64 CTAs
  // unsplit (one row tile x 8 kv heads x 8 batches). FP8 K/V at D 64 (two stages of 128 keys: 32 KB) split 4, 256
  // CTAs in one wave of two an SM; at D 96 (48 KB) and 16-bit D 64 (64 KB) split 2, a wave of one CTA an SM.
  auto split_of = [](const std::string& graph, const char* q_dtype) {
    json doc = json::parse(test::read_text(test::source_dir() + "/tools/bench/graphs/" + graph + ".json"));
    if (q_dtype) doc["tensors"][0]["dtype"] = q_dtype;
    Facts f = facts_of(doc);
    Result<Config> c = choose(f, match(f));
    INFO(graph << ": " << c.status().to_string());
    REQUIRE(c.ok());
    CHECK(c->decision.tile == TileShape{64, 128});
    return c->decision.split_kv;
  };
  CHECK(split_of("fp8_decode_b8_h32g8_skv32768_d64", nullptr) == 4);
  CHECK(split_of("fp8_decode_b8_h32g8_skv32768_d64", "BF16") == 4);  // a 16-bit Q over the same FP8 K/V
  CHECK(split_of("fp8_decode_b8_h32g8_skv32768_d96", nullptr) == 2);
  CHECK(split_of("fp8_decode_b8_h32g8_skv32768_d96", "BF16") == 2);
  CHECK(split_of("bf16_decode_b8_h32g8_skv32768_d64", nullptr) == 2);
}

TEST_CASE("derive re-checks a decision against the row and the pins", "[choose]") {
  json doc = example_json("fp8_decode_gqa");
  const DeviceDesc ada = DeviceDesc::from_arch("sm_89", 128).value();  // the mma.sync engine's decode
  Facts f = facts_of(doc, ada);
  Result<Config> c = choose(f, match(f));
  REQUIRE(c.ok());
  Result<Derived> again = derive(f, c->decision);
  REQUIRE(again.ok());
  CHECK(again->workspace_bytes == c->derived.workspace_bytes);
  CHECK(again->stages == c->derived.stages);

  Decision d = c->decision;
  d.split_kv = 128;  // another split in the row's domain: derived afresh, with its own workspace
  Result<Derived> d128 = derive(f, d);
  REQUIRE(d128.ok());
  CHECK(d128->workspace_bytes == int64_t{128} * 8 * 32 * (128 + 1) * 4);
  d.split_kv = 3;
  CHECK(derive(f, d).status().message() == "row sdpa_mma_fp8: split_kv 3 not in {1, 2, 4, 8, 16, 32, 64, 128}");
  d.split_kv = 0;
  CHECK(derive(f, d).status().message() == "row sdpa_mma_fp8: split_kv 0 is not a split count");
  d = c->decision;
  d.tile = {32, 64};
  CHECK(derive(f, d).status().message() == "row sdpa_mma_fp8: tile 32x64 not in {16x32, 16x64, 32x32, 64x64, 128x64} for head dims (128, 128)");
  d = c->decision;
  d.row_id = "sdpa_sm90_fp8";  // declines sm_89
  CHECK(has(derive(f, d).status().message(), "row sdpa_sm90_fp8: arch sm_89 not in [sm_90, sm_90]"));
  d.row_id = "combine";
  CHECK(derive(f, d).status().message() == "no attention row 'combine'");
  d.row_id = "no_such_row";
  CHECK(derive(f, d).status().code() == StatusCode::NotSupported);

  doc["op"]["knobs"] = {{"split_kv", 8}};
  Facts pinned = facts_of(doc, ada);
  d = c->decision;
  d.split_kv = 16;
  CHECK(derive(pinned, d).status().message() == "row sdpa_mma_fp8: split_kv 16 differs from the pinned split_kv 8");
  Facts amax = facts_of(example_json("fp8_prefill"), DeviceDesc::from_arch("sm_89", 128).value());
  Result<Config> ca = choose(amax, match(amax));
  REQUIRE(ca.ok());
  d = ca->decision;
  d.split_kv = 2;
  CHECK(has(derive(amax, d).status().message(), "split_kv 2: Amax_S is requested"));
}

namespace {
// The decode example with B batches and S_kv keys (K, V, their strides and seq lens follow).
json decode_with(int64_t B, int64_t S_kv) {
  json doc = example_json("fp8_decode_gqa");
  for (auto& t : doc["tensors"]) {
    if (t["dims"].size() == 4 && t["dims"][0] == 8) {
      t["dims"][0] = B;
      if (t["name"] == "K" || t["name"] == "V") t["dims"][2] = S_kv;
      t.erase("strides");
    }
  }
  return doc;
}
}  // namespace

TEST_CASE("launch limits decline at plan time, naming the row, the field and both values", "[choose][limits]") {
  // Grid z = B x split_kv: 65,535 is the last legal value.
  json doc = decode_with(65535, 64);
  doc["op"]["knobs"] = {{"split_kv", 1}};
  Facts at_limit = facts_of(doc);
  REQUIRE(choose(at_limit, match(at_limit)).ok());
  doc = decode_with(32768, 64);
  doc["op"]["knobs"] = {{"split_kv", 2}};
  Facts past = facts_of(doc);  // 65,536
  Result<Config> c = choose(past, match(past));
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == StatusCode::NotSupported);
  CHECK(has(c.status().message(), "row sdpa_mma_fp8: the attention grid's z = B x split_kv = 32768 x 2 = 65536 "
                                  "exceeds 65535"));
  // The issue's example: B 600 with a pinned split of 128.
  doc = decode_with(600, 8192);
  doc["op"]["knobs"] = {{"split_kv", 128}};
  Facts b600 = facts_of(doc);
  CHECK(has(choose(b600, match(b600)).status().message(), "z = B x split_kv = 600 x 128 = 76800 exceeds 65535"));
  // Unpinned, the heuristic only considers splits inside the limit.
  doc = decode_with(600, 8192);
  Facts free = facts_of(doc);
  Result<Config> chosen = choose(free, match(free));
  REQUIRE(chosen.ok());
  CHECK(600 * chosen->decision.split_kv <= 65535);
  for (const SplitCandidate& s : chosen->decision.split_candidates) CHECK(600 * s.split <= 65535);
}

TEST_CASE("values the kernels hold in 32 bits are bounded at plan time", "[choose][limits]") {
  // GQA packs S_q x group rows into one int: 2^31 packed rows decline, 2^31 - 1 plan.
  auto with_rows = [](int64_t S_q, int64_t group) {
    json doc = example_json("fp8_decode_gqa");
    for (auto& t : doc["tensors"]) {
      if (t["dims"].size() != 4 || t["dims"][0] != 8) continue;
      t["dims"][0] = 1;
      if (t["name"] == "Q" || t["name"] == "O" || t["name"] == "Stats") {
        t["dims"][1] = 8 * group;
        t["dims"][2] = S_q;
      }
      t.erase("strides");
    }
    return doc;
  };
  Facts ok = facts_of(with_rows(int64_t{1} << 25, 63));  // 2^25 x 63 < 2^31
  CHECK(choose(ok, match(ok)).ok());
  Facts over = facts_of(with_rows(int64_t{1} << 25, 64));  // 2^31
  Result<Config> c = choose(over, match(over));
  REQUIRE_FALSE(c.ok());
  CHECK(has(c.status().message(), "packed rows (S_q x group) = 2147483648 exceeds the kernels' 32-bit range"));

  // A per-(batch, kv head) descale is indexed in 32 bits: a span past 2^31 - 1 declines on every row, naming it.
  auto with_descale_v_stride = [](int64_t stride) {
    json doc = example_json("fp8_prefill");
    for (auto& t : doc["tensors"]) {
      if (t["name"] != "descale_v") continue;
      t["dims"] = json::array({2, 8, 1, 1});
      t["strides"] = json::array({stride, 1, 1, 1});
    }
    return doc;
  };
  Facts fits = facts_of(with_descale_v_stride(8));
  CHECK(choose(fits, match(fits)).ok());
  Facts wide = facts_of(with_descale_v_stride(4000000000));
  Result<Config> w = choose(wide, match(wide));
  REQUIRE_FALSE(w.ok());
  CHECK(w.status().code() == StatusCode::NotSupported);
  CHECK(has(w.status().message(), "descale_v's span (strides over [B, H_kv]) = 4000000007 exceeds the kernels' 32-bit"));
}

TEST_CASE("a row whose heuristics fail passes the graph to the next accepted row", "[choose]") {
  // sm_90a with 72 KB of shared memory per block: the Hopper row accepts FP8 prefill, its tile (115 KB) does not
  // fit, and the mma.sync row takes the graph; the Hopper row's reason stays on record.
  Facts f = facts_of(example_json("fp8_prefill"));
  f.device.smem_per_block = 72 * 1024;
  const std::vector<RowVerdict> vs = match(f);
  REQUIRE(vs.front().row_id == "sdpa_sm90_fp8");
  REQUIRE(vs.front().accepted);
  Result<Config> c = choose(f, vs);
  REQUIRE(c.ok());
  CHECK(c->decision.row_id == "sdpa_mma_fp8");  // both sm_90 rows need more than 72 KB
  // With every tile too large, the decline lists each row's reason, the heuristics' included.
  f.device.smem_per_block = 4 * 1024;
  Result<Config> none = choose(f, match(f));
  REQUIRE_FALSE(none.ok());
  CHECK(has(none.status().message(), "row sdpa_sm90_fp8: needs 117888 bytes of shared memory per block, the device "
                                     "has 4096"));
  CHECK(has(none.status().message(), "row sdpa_mma_fp8: no allowed tile fits in 4096 bytes of shared memory"));
  CHECK(has(none.status().message(), "row sdpa_mma_f16: op sdpa_fp8 not in {sdpa}"));
}

TEST_CASE("ragged graphs: facts, round trip, and the rows that serve them", "[ragged]") {
  Result<Graph> g = load_graph_file(test::data_path("bf16_ragged_prefill"));
  REQUIRE(g.ok());
  Result<Graph> back = graph_from_json(graph_to_json(g.value()));
  REQUIRE(back.ok());
  CHECK(back->op()->attributes == g->op()->attributes);
  CHECK(back->op()->attributes.max_seqlen_kv == 128);
  CHECK(back->operand(Role::CuSeqlensKv)->name == "cu_seqlens_kv");
  Result<Facts> f = analyze(g.value(), DeviceDesc::h200());
  REQUIRE(f.ok());
  CHECK(f->S_kv == 128);
  CHECK(f->T_kv == 300);
  CHECK_FALSE(f->decode);
  // One new token per sequence (max_seqlen_q 1) is a decode, whatever the token count.
  nlohmann::json doc = nlohmann::json::parse(graph_to_json(g.value()));
  doc["op"]["attributes"]["max_seqlen_q"] = 1;
  Result<Graph> one = graph_from_json(doc.dump());
  REQUIRE(one.ok());
  Result<Facts> one_f = analyze(one.value(), DeviceDesc::h200());
  REQUIRE(one_f.ok());
  CHECK(one_f->decode);
  CHECK(one_f->S_q == 1);
  // The mma.sync and warp-specialized rows serve ragged graphs; the rows that do not say so.
  int accepted = 0;
  for (const RowVerdict& v : match(f.value())) {
    INFO(v.row_id << ": " << v.reason);
    accepted += v.accepted;
    if (v.row_id == "sdpa_mma_f16" || v.row_id == "sdpa_sm90_f16") CHECK(v.accepted);
  }
  CHECK(accepted == 2);
  nlohmann::json fp8 = nlohmann::json::parse(test::read_text(test::example_path("fp8_ragged_prefill")));
  Result<Graph> fg = graph_from_json(fp8.dump());
  REQUIRE(fg.ok());
  Result<Facts> ff = analyze(fg.value(), DeviceDesc::h200());
  REQUIRE(ff.ok());
  for (const RowVerdict& v : match(ff.value())) {
    INFO(v.row_id << ": " << v.reason);
    if (v.row_id == "sdpa_mma_fp8" || v.row_id == "sdpa_sm90_fp8") CHECK(v.accepted);
  }
  // A row without `ragged` declines them, naming the field.
  CapabilityRow no_ragged = test::row_of("sdpa_sm90_fp8");
  no_ragged.ragged = false;
  const RowVerdict declined = match_row(no_ragged, ff.value());
  CHECK(declined.field == "ragged");
  CHECK(declined.reason == "row sdpa_sm90_fp8: ragged (THD) Q and K/V through cu_seqlens not supported");
}

TEST_CASE("masked three-consumer grids take their row tiles from a counter, except where Q is split into two terms",
          "[choose]") {
  // engines/sdpa_sm90/layout.h, dynamic_row_tiles: a persistent grid and the 4-byte counter the plan zeroes. A BF16 Q
  // over FP8 K/V on the FP8 kernel keeps the grid of one CTA a row tile (the counter's loop made its consumers spill).
  auto derived_of = [](const std::string& graph) {
    json doc = json::parse(test::read_text(test::source_dir() + "/tools/bench/graphs/" + graph + ".json"));
    Facts f = facts_of(doc);
    Result<Config> c = choose(f, match(f));
    INFO(graph << ": " << c.status().to_string());
    REQUIRE(c.ok());
    CHECK(c->decision.consumer_warpgroups == 3);
    REQUIRE(!c->derived.stages.empty());
    return c->derived;
  };
  for (const char* graph : {"fp8_b4_h32_s4096_d128_causal", "bf16_b4_h32_s4096_d128_causal"}) {
    const Derived d = derived_of(graph);
    INFO(graph);
    CHECK(d.stages[0].persistent);
    REQUIRE(d.region("row_tile_counter") != nullptr);
    CHECK(d.region("row_tile_counter")->bytes == 4);
  }
  const Derived q16 = derived_of("fp8_b4_h32_s4096_d128_causal_bf16q");
  CHECK(has(q16.stages[0].spec.name_expression, "kv_fp8 | q_bf16, three_consumers>"));
  CHECK_FALSE(q16.stages[0].persistent);
  CHECK(q16.region("row_tile_counter") == nullptr);
  // Unmasked, the grid of one CTA a row tile.
  const Derived dense = derived_of("fp8_b4_h32_s4096_d128");
  CHECK_FALSE(dense.stages[0].persistent);
  CHECK(dense.region("row_tile_counter") == nullptr);
}
