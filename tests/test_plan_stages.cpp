// analyze -> match -> choose on the CPU: facts per example, every required decline with its message, and the
// configuration the heuristics choose.
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "catch.hpp"
#include "heuristics/tile.hpp"
#include "rime/config.hpp"
#include "rime/json.hpp"
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
  REQUIRE(rows.size() == 5);
  for (const char* name : {"fp8_prefill", "fp8_decode_gqa", "bf16_causal_sink", "fp16_window_padding",
                           "fp8_nvfp4_o_planes", "fp8_mxfp8_o_token_major", "mxfp8_inputs"}) {
    Facts f = facts_of(example_json(name));
    CHECK(match(f).size() == 4);  // the combine row is matched only for split plans
  }
  CHECK_FALSE(parse_capability_row("{\"id\": 3}").ok());
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
  CHECK(f.q.layout == Layout::Bhsd);

  Facts nv = facts_of(example_json("fp8_nvfp4_o_planes"));
  CHECK(nv.o_block_scale == 16);
  CHECK(nv.sf_o_layout == SfLayout::Planes);
  CHECK(nv.q.layout == Layout::Bshd);
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
    CHECK(verdict_of(vs, "sdpa_fp8_sm89").reason ==
          "row sdpa_fp8_sm89: an FP4_E2M1 O is served only as a block-scaled O with sf_o");
    Result<Config> c = choose(f, vs);
    CHECK(c.status().code() == StatusCode::NotSupported);
    CHECK(has(c.status().message(), "an FP4_E2M1 O is served only as a block-scaled O with sf_o"));
    CHECK(has(c.status().message(), "row sdpa_fp8_sm90: an FP4_E2M1 O is served only as a block-scaled O with sf_o"));
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
    CHECK(verdict_of(match(f), "sdpa_f16_sm80").reason == "row sdpa_f16_sm80: O format MXFP8 not in {BF16, FP16}");
  }
  SECTION("a head dim outside the row's set") {
    json doc = example_json("fp8_prefill");
    for (int i : {0, 1, 2, 9}) {
      doc["tensors"][i]["dims"][3] = 96;
      doc["tensors"][i].erase("strides");
    }
    CHECK(verdict_of(match(facts_of(doc)), "sdpa_fp8_sm89").reason ==
          "row sdpa_fp8_sm89: D_qk 96 not in {64, 128, 256}");
  }
  SECTION("arch outside the range") {
    Facts f = facts_of(example_json("fp8_decode_gqa"), DeviceDesc::from_arch("sm_80", 108).value());
    auto vs = match(f);
    CHECK(verdict_of(vs, "sdpa_fp8_sm89").reason == "row sdpa_fp8_sm89: arch sm_80 not in [sm_89, sm_120]");
    CHECK(choose(f, vs).status().code() == StatusCode::NotSupported);
  }
  SECTION("a pinned split outside the row's domain") {
    json doc = example_json("fp8_decode_gqa");
    doc["op"]["knobs"] = {{"split_kv", 3}};
    CHECK(verdict_of(match(facts_of(doc)), "sdpa_fp8_sm89").reason ==
          "row sdpa_fp8_sm89: split_kv 3 not in {1, 2, 4, 8, 16, 32, 64, 128}");
  }
  SECTION("a pinned tile outside the row's domain") {
    json doc = example_json("fp8_decode_gqa");
    doc["op"]["knobs"] = {{"tile", {{"q", 32}, {"kv", 32}}}};
    CHECK(verdict_of(match(facts_of(doc)), "sdpa_fp8_sm89").reason ==
          "row sdpa_fp8_sm89: tile 32x32 not in {16x32, 16x64, 64x64, 128x64}");
  }
  SECTION("a pinned split on a row not wired for split") {
    json doc = example_json("fp8_decode_gqa");
    doc["op"]["knobs"] = {{"split_kv", 4}};
    Facts f = facts_of(doc);
    CapabilityRow row = *std::find_if(capability_rows().begin(), capability_rows().end(),
                                      [](const CapabilityRow& r) { return r.id == "sdpa_fp8_sm89"; });
    row.split_kv_supported = false;
    CHECK(match_row(row, f).reason == "row sdpa_fp8_sm89: split_kv 4 is pinned and the row is not wired for split");
  }
  SECTION("a pinned split where split is ineligible") {
    json doc = example_json("fp8_prefill");
    doc["op"]["knobs"] = {{"split_kv", 2}};
    CHECK(has(verdict_of(match(facts_of(doc)), "sdpa_fp8_sm89").reason,
              "split_kv 2 is pinned but split is ineligible: Amax_S is requested"));
  }
  SECTION("an unbuilt engine") {
    Facts f = facts_of(example_json("fp8_prefill"));
    CapabilityRow row = *std::find_if(capability_rows().begin(), capability_rows().end(),
                                      [](const CapabilityRow& r) { return r.id == "sdpa_fp8_sm90"; });
    row.built = false;
    CHECK(match_row(row, f).reason == "row sdpa_fp8_sm90: engine sdpa_fp8_sm90 is not built yet");
  }
  SECTION("the wgmma engine's own limits") {
    // Decode leaves its 128-row tiles empty: the mma.sync engine runs it.
    Facts decode = facts_of(example_json("fp8_decode_gqa"));
    CHECK(verdict_of(match(decode), "sdpa_fp8_sm90").reason ==
          "row sdpa_fp8_sm90: packed rows S_q x group = 1 x 4 = 4 < 64: its row tiles would run mostly empty");
    // wgmma needs the arch-specific target.
    Facts plain = facts_of(example_json("fp8_prefill"), DeviceDesc::from_arch("sm_90", 132).value());
    CHECK(has(verdict_of(match(plain), "sdpa_fp8_sm90").reason, "is not sm_90a"));
    json doc = example_json("fp8_prefill");
    for (int i : {0, 1, 2, 9}) {
      doc["tensors"][i]["dims"][3] = 64;
      doc["tensors"][i].erase("strides");
    }
    CHECK(verdict_of(match(facts_of(doc)), "sdpa_fp8_sm90").reason ==
          "row sdpa_fp8_sm90: D_qk 64 not in {128}");
  }
}

TEST_CASE("FP8 prefill on sm_90a runs on the wgmma engine, with V^T in the workspace", "[choose]") {
  Facts f = facts_of(example_json("fp8_prefill"));
  Result<Config> c = choose(f, match(f));
  REQUIRE(c.ok());
  CHECK(c->row_id == "sdpa_fp8_sm90");
  CHECK(c->tile == TileShape{64, 128});
  CHECK(c->smem_bytes == heuristics::sdpa_wgmma_smem_bytes());
  CHECK(c->split_kv == 1);
  // B 2, H_kv 8, D 128, S_kv 1024: one byte per V element.
  CHECK(c->workspace_bytes == 2 * 8 * 128 * 1024);
  CHECK(heuristics::wgmma_vt_keys(1000) == 1024);
  CHECK(heuristics::wgmma_vt_bytes(1, 1, 128, 1) == 128 * 128);
  // The same graph on sm_89 runs on the mma.sync engine with no workspace.
  Facts ada = facts_of(example_json("fp8_prefill"), DeviceDesc::from_arch("sm_89", 128).value());
  Result<Config> c89 = choose(ada, match(ada));
  REQUIRE(c89.ok());
  CHECK(c89->row_id == "sdpa_fp8_sm89");
  CHECK(c89->workspace_bytes == 0);
}

TEST_CASE("choose honours pins and picks decode splits", "[choose]") {
  json doc = example_json("fp8_decode_gqa");
  Facts f = facts_of(doc);
  Result<Config> c = choose(f, match(f));
  REQUIRE(c.ok());
  CHECK(c->row_id == "sdpa_fp8_sm89");
  CHECK(c->tile == TileShape{16, 32});
  CHECK(c->split_kv > 1);
  CHECK(c->workspace_bytes == split_workspace_bytes(f, c->split_kv));
  CHECK(c->workspace_bytes >= int64_t{c->split_kv} * 8 * 32 * 128 * 4);

  doc["op"]["knobs"] = {{"split_kv", 8}, {"tile", {{"q", 64}, {"kv", 64}}}};
  Facts pinned = facts_of(doc);
  Result<Config> p = choose(pinned, match(pinned));
  REQUIRE(p.ok());
  CHECK(p->split_kv == 8);
  CHECK(p->tile == TileShape{64, 64});
  CHECK(p->split_reason == "pinned by the graph");
}
