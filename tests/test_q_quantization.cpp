// q_quantization e4m3_per_row (a 16-bit Q over FP8 K/V rounded to E4M3 per row before Q.K^T): validation, the JSON
// form, facts and the explanation, the rows that serve it and the rows that decline it, the plan's kernel, and the
// CPU reference's rounding against values worked out by hand.
#include <cmath>
#include <string>
#include <vector>

#include "block_scaled_graph.hpp"
#include "catch.hpp"
#include "graph_builder.hpp"
#include "row_declines.hpp"
#include "rime/inspect/config.hpp"
#include "rime/inspect/facts.hpp"
#include "rime/inspect/rows.hpp"
#include "rime/json.hpp"
#include "rime/plan.hpp"
#include "testing/reference/formats.hpp"
#include "testing/reference/sdpa.hpp"
#include "testing/trial.hpp"

using namespace rime;

namespace {

constexpr int64_t kB = 2, kHkv = 2, kGroup = 4, kD = 128;

// A BF16 (or `q_type`) Q [B, H_kv x group, S_q, 128] over E4M3 K/V [B, H_kv, S_kv, 128], O in BF16, causal when
// S_q > 1.
Graph q16_graph(QQuantization q, int64_t S_q = 5, int64_t S_kv = 37, DataType q_type = DataType::BF16, int64_t B = kB,
                int64_t H_kv = kHkv, int64_t group = kGroup) {
  Graph g("q16");
  test::TensorAdder add{g};
  SdpaFp8Operands io;
  io.q = add("Q", {B, H_kv * group, S_q, kD}, q_type);
  io.k = add("K", {B, H_kv, S_kv, kD}, DataType::FP8_E4M3);
  io.v = add("V", {B, H_kv, S_kv, kD}, DataType::FP8_E4M3);
  io.o = add("O", {B, H_kv * group, S_q, kD}, DataType::BF16, true);
  test::add_fp8_scalars(add, io);
  SdpaAttributes a;
  a.causal = S_q > 1;
  a.alignment = DiagonalAlignment::BottomRight;
  a.q_quantization = q;
  REQUIRE(g.sdpa_fp8(io, a, "attn").ok());
  return g;
}

}  // namespace

TEST_CASE("q_quantization e4m3_per_row needs a 16-bit Q over FP8 K/V, and an unknown spelling is refused by name",
          "[q_quantization][validate]") {
  CHECK(validate(q16_graph(QQuantization::E4M3PerRow)).ok());
  CHECK(validate(q16_graph(QQuantization::E4M3PerRow, 5, 37, DataType::FP16)).ok());
  const Status s = validate(q16_graph(QQuantization::E4M3PerRow, 5, 37, DataType::FP8_E4M3));  // an FP8 Q
  CHECK(s.code() == StatusCode::InvalidGraph);
  CHECK(s.location() == "/op/attributes/q_quantization");
  CHECK(s.message() == "q_quantization e4m3_per_row rounds a 16-bit Q for FP8 K/V: it needs Q in FP16 or BF16 and "
                       "K/V in FP8 (Q dtype FP8_E4M3, K dtype FP8_E4M3)");
  for (const char* bad : {R"("e4m3")", "1"}) {
    INFO(bad);
    Result<Graph> g = graph_from_json(std::string(R"({"rime_graph": 1, "name": "x", "tensors": [], "op": {"kind": )"
                                                  R"("sdpa_fp8", "name": "a", "inputs": {}, "outputs": {}, )"
                                                  R"("attributes": {"q_quantization": )") +
                                      bad + "}}}");
    REQUIRE_FALSE(g.ok());
    CHECK(g.status().location() == "/op/attributes/q_quantization");
  }
}

TEST_CASE("q_quantization round-trips through JSON and shows in the facts and the explanation, and only its row serves "
          "it",
          "[q_quantization]") {
  const Graph g = q16_graph(QQuantization::E4M3PerRow), exact = q16_graph(QQuantization::None);
  Result<Graph> back = graph_from_json(graph_to_json(g));
  REQUIRE(back.ok());
  CHECK(back.value() == g);
  CHECK(graph_to_json(g).find("\"q_quantization\": \"e4m3_per_row\"") != std::string::npos);
  CHECK(graph_to_json(exact).find("q_quantization") == std::string::npos);  // none is the default, not written
  CHECK(graph_hash(g) != graph_hash(exact));

  Result<Facts> f = analyze(g, DeviceDesc::h200()), fe = analyze(exact, DeviceDesc::h200());
  REQUIRE(f.ok());
  REQUIRE(fe.ok());
  CHECK(f->q_quantization == QQuantization::E4M3PerRow);
  CHECK(fe->q_quantization == QQuantization::None);
  // Every row that serves the exact graph declines the rounded one by the field, and the rounded row declines the
  // exact graph.
  CHECK(test::rows_declining(fe.value(), f.value(), "q_quantization",
                             "q_quantization e4m3_per_row not supported (the row takes Q exactly)") >= 2);
  const RowVerdict only = match_row(test::row_of("sdpa_sm90_q16_fp8kv_e4m3q"), fe.value());
  CHECK_FALSE(only.accepted);
  CHECK(only.field == "q_quantization");
  CHECK(only.reason.find("q_quantization none: the row serves only q_quantization e4m3_per_row") != std::string::npos);
  int serving = 0;
  for (const RowVerdict& v : match(f.value())) serving += v.accepted;
  CHECK(serving == 1);
  CHECK(match_row(test::row_of("sdpa_sm90_q16_fp8kv_e4m3q"), f.value()).accepted);

  Result<Explanation> e = explain(g);
  REQUIRE(e.ok());
  CHECK(e->served);
  CHECK(e->text.find("q quant   e4m3_per_row (each Q row rounded to E4M3 on its own power-of-two scale") !=
        std::string::npos);
  CHECK(e->json.find("\"q_quantization\": \"e4m3_per_row\"") != std::string::npos);
}

TEST_CASE("a rounded Q runs the FP8 kernel on the FP8 Q's tiles, where the exact Q's second term takes smaller ones",
          "[q_quantization]") {
  // The bench's causal prefill (B4 H32 S4096 D 128) takes three consumers: 96-key tiles for the rounded Q (the FP8
  // Q's), 64 for the exact one (its second term's registers).
  const Graph g = q16_graph(QQuantization::E4M3PerRow, 4096, 4096, DataType::BF16, 4, 32, 1),
              exact = q16_graph(QQuantization::None, 4096, 4096, DataType::BF16, 4, 32, 1);
  {
    Result<Facts> f = analyze(g, DeviceDesc::h200()), fe = analyze(exact, DeviceDesc::h200());
    REQUIRE(f.ok());
    REQUIRE(fe.ok());
    Result<Config> c = choose(f.value(), match(f.value())), ce = choose(fe.value(), match(fe.value()));
    REQUIRE(c.ok());
    REQUIRE(ce.ok());
    CHECK(c->decision.row_id == "sdpa_sm90_q16_fp8kv_e4m3q");
    CHECK(c->decision.consumer_warpgroups == 3);
    CHECK(c->decision.tile == TileShape{192, 96});
    CHECK(ce->decision.row_id == "sdpa_sm90_q16_fp8kv");
    CHECK(ce->decision.tile == TileShape{192, 64});
    const std::string& kernel = c->derived.stages[0].spec.name_expression;
    INFO(kernel);
    CHECK(kernel.find("sdpa_sm90_fwd<e4m3, bf16, 128, 128,") != std::string::npos);
    CHECK(kernel.find("kv_fp8 | q_bf16") != std::string::npos);
    CHECK(kernel.find("q_e4m3_rows") != std::string::npos);
    CHECK(ce->derived.stages[0].spec.name_expression.find("q_e4m3_rows") == std::string::npos);
    CHECK(c->decision.tile_reason.find("(the FP8 kernel, Q rounded to E4M3 per row)") != std::string::npos);
  }
}

TEST_CASE("the reference rounds each Q row to E4M3 on the power of two that puts its largest magnitude in 224 to 448",
          "[q_quantization][reference]") {
  // amax 500: 448 / 500 = 0.896, so the scale is 2^-1. Scaled, -500, 0.3 and 1.0 are -250, 0.15 and 0.5: -250 rounds
  // to -256 (E4M3 steps of 16 in [128, 256)), 0.15 to 10/64 (steps of 1/64 in [0.125, 0.25)), 0.5 stays; scaled
  // back, -512, 0.3125 and 1.0.
  std::vector<double> row = {1.0, 0.3, -500.0, 0.0};
  reference::round_q_row_e4m3(row);
  CHECK(row == std::vector<double>{1.0, 0.3125, -512.0, 0.0});
  // amax 1e-30: the scale 2^108 puts it at 324.5, which rounds to 320 (steps of 32 in [256, 448)).
  row = {1e-30, -1e-31};
  reference::round_q_row_e4m3(row);
  CHECK(row[0] == std::ldexp(320.0, -108));
  CHECK(row[1] == std::ldexp(-reference::decode_e4m3(reference::encode_e4m3(std::ldexp(1e-31, 108))), -108));
  row = {0.0, 0.0};  // a row of zeros keeps 2^0
  reference::round_q_row_e4m3(row);
  CHECK(row == std::vector<double>{0.0, 0.0});
  // 448 exactly: 448 / 448 = 1 = 0.5 x 2^1, so 2^0; every E4M3 value is kept.
  row = {448.0, -0.5, 3.75};
  reference::round_q_row_e4m3(row);
  CHECK(row == std::vector<double>{448.0, -0.5, 3.75});
}

TEST_CASE("the reference's rounded-Q row is the exact-Q row over Q's rounded values", "[q_quantization][reference]") {
  // Each rounded value keeps 4 significant bits, so BF16 holds it exactly: the exact graph with Q replaced by the
  // rounded values gives the same row, and on these random draws a different one from the unrounded Q.
  const Graph g = q16_graph(QQuantization::E4M3PerRow), exact = q16_graph(QQuantization::None);
  Result<Facts> f = analyze(g, DeviceDesc::h200()), fe = analyze(exact, DeviceDesc::h200());
  REQUIRE(f.ok());
  REQUIRE(fe.ok());
  const testing::TrialInputs in = testing::make_inputs(g, 3);
  const TensorDesc& q = *g.operand(Role::Q);
  reference::HostTensors rounded = in.tensors;
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t h = 0; h < kHkv * kGroup; ++h)
      for (int64_t i = 0; i < q.dims[2]; ++i) {
        std::vector<double> row(kD);
        for (int64_t d = 0; d < kD; ++d)
          row[d] = reference::load_element(q.dtype, in.tensors.at(q.uid).data(), reference::offset_of(q, b, h, i, d));
        reference::round_q_row_e4m3(row);
        for (int64_t d = 0; d < kD; ++d)
          reference::store_element(q.dtype, rounded[q.uid].data(), reference::offset_of(q, b, h, i, d), row[d]);
      }
  bool moved = false;
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t h = 0; h < kHkv * kGroup; ++h)
      for (int64_t i = 0; i < q.dims[2]; ++i) {
        const reference::RowResult r = reference::attention_row(g, f.value(), in.tensors, b, h, i);
        const reference::RowResult x = reference::attention_row(exact, fe.value(), rounded, b, h, i);
        const reference::RowResult u = reference::attention_row(exact, fe.value(), in.tensors, b, h, i);
        CHECK(r.lse == x.lse);
        CHECK(r.o == x.o);
        moved |= r.lse != u.lse;
      }
  CHECK(moved);
}
