// Logit soft-capping (logit_softcap, SPEC section 2: Gemma 2, Grok): validation, the JSON form, facts and the
// explanation, every row's decline, and the CPU reference against the formula computed here from the inputs.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "catch.hpp"
#include "graph/geometry.hpp"
#include "graph_builder.hpp"
#include "row_declines.hpp"
#include "rime/inspect/facts.hpp"
#include "rime/inspect/rows.hpp"
#include "rime/json.hpp"
#include "rime/plan.hpp"
#include "testing/reference/formats.hpp"
#include "testing/reference/sdpa.hpp"
#include "testing/trial.hpp"

using namespace rime;

namespace {

constexpr int64_t kSq = 3, kSkv = 7, kD = 64;

// BF16 [1, 2, 3, 64] over [1, 1, 7, 64] (GQA 2:1), a sink, causal bottom-right, the cap given.
Graph capped(std::optional<float> cap) {
  Graph g("capped");
  test::TensorAdder add{g};
  SdpaOperands io;
  io.q = add("Q", {1, 2, kSq, kD}, DataType::BF16);
  io.k = add("K", {1, 1, kSkv, kD}, DataType::BF16);
  io.v = add("V", {1, 1, kSkv, kD}, DataType::BF16);
  io.o = add("O", {1, 2, kSq, kD}, DataType::BF16, true);
  io.sink = add("sink", {1, 2, 1, 1}, DataType::FP32);
  SdpaAttributes a;
  a.causal = true;
  a.alignment = DiagonalAlignment::BottomRight;
  a.attn_scale = 0.9f;  // logits of a few units: a cap of 1 or 2 bends them, one of 1e30 does not
  a.logit_softcap = cap;
  REQUIRE(g.sdpa(io, a, "attn").ok());
  return g;
}

}  // namespace

TEST_CASE("logit_softcap must be finite and non-negative", "[softcap][validate]") {
  for (float bad : {-1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    INFO(bad);
    const Status s = validate(capped(bad));
    CHECK(s.code() == StatusCode::InvalidGraph);
    CHECK(s.location() == "/op/attributes/logit_softcap");
    CHECK(s.message().find("must be finite and >= 0") != std::string::npos);
  }
  CHECK(validate(capped(0.0f)).ok());
  CHECK(validate(capped(50.0f)).ok());
  Result<Graph> g = graph_from_json(R"({"rime_graph": 1, "name": "x", "tensors": [], "op": {"kind": "sdpa",
      "name": "a", "inputs": {}, "outputs": {}, "attributes": {"logit_softcap": "50"}}})");
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().location() == "/op/attributes/logit_softcap");
}

TEST_CASE("logit_softcap round-trips through JSON, shows in the facts and the explanation, and the rows that serve the "
          "uncapped graph serve it",
          "[softcap]") {
  const Graph g = capped(50.0f);
  Result<Graph> back = graph_from_json(graph_to_json(g));
  REQUIRE(back.ok());
  CHECK(back.value() == g);
  CHECK(graph_to_json(g).find("\"logit_softcap\": 50.0") != std::string::npos);
  CHECK(graph_hash(g) != graph_hash(capped(std::nullopt)));

  Result<Facts> f = analyze(g, DeviceDesc::h200()), plain = analyze(capped(std::nullopt), DeviceDesc::h200());
  REQUIRE(f.ok());
  REQUIRE(plain.ok());
  CHECK(f->logit_softcap == 50.0f);
  CHECK(plain->logit_softcap == 0.0f);
  CHECK(analyze(capped(0.0f), DeviceDesc::h200())->logit_softcap == 0.0f);  // 0: no capping
  int serving = 0;
  for (const RowVerdict& v : match(plain.value())) {
    if (!v.accepted) continue;
    ++serving;
    const CapabilityRow& row = test::row_of(v.row_id);
    const RowVerdict with = match_row(row, f.value());
    INFO(v.row_id << ": " << with.reason);
    CHECK(with.accepted);
    CHECK(row.softcap);
    CapabilityRow plain_row = row;  // a row without the field declines the cap by name
    plain_row.softcap = false;
    const RowVerdict declined = match_row(plain_row, f.value());
    CHECK_FALSE(declined.accepted);
    CHECK(declined.field == "softcap");
    CHECK(declined.reason.find("logit soft-capping (logit_softcap 50) not supported") != std::string::npos);
  }
  CHECK(serving >= 2);  // the mma.sync and the Hopper 16-bit rows
  Result<Explanation> e = explain(g);
  REQUIRE(e.ok());
  CHECK(e->served);
  CHECK(e->text.find("softcap   50 (each logit s becomes 50 * tanh(s / 50)") != std::string::npos);
  CHECK(e->json.find("softcap") != std::string::npos);
  CHECK(e->json.find("| softcap") != std::string::npos);  // the kernel's own specialization
}

TEST_CASE("the reference caps each scaled logit as c * tanh(s / c) before the mask's max and the sink",
          "[softcap][reference]") {
  // The formula written out here from the input bytes, row by row: bottom-right causal (query i sees keys up to
  // i + S_kv - S_q), the sink joining the max and the denominator uncapped.
  const double cap = GENERATE(1.0, 2.0, 1e30);
  const Graph g = capped(static_cast<float>(cap));
  Result<Facts> f = analyze(g, DeviceDesc::h200());
  REQUIRE(f.ok());
  const testing::TrialInputs in = testing::make_inputs(g, 11);
  auto value = [&](Role r, int64_t h, int64_t s, int64_t d) {
    const TensorDesc& t = *g.operand(r);
    return reference::load_element(t.dtype, in.tensors.at(t.uid).data(), reference::offset_of(t, 0, h, s, d));
  };
  bool bent = false;
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < kSq; ++i) {
      std::vector<double> s;
      for (int64_t j = 0; j <= i + kSkv - kSq; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < kD; ++d) dot += value(Role::Q, h, i, d) * value(Role::K, 0, j, d);
        const double raw = static_cast<double>(0.9f) * dot;  // attn_scale as the graph holds it, in FP32
        s.push_back(cap * std::tanh(raw / cap));
        bent |= std::fabs(s.back() - raw) > 1e-3;
      }
      const double sink = reference::load_element(DataType::FP32, in.tensors.at(g.operand(Role::Sink)->uid).data(), h);
      double m = sink;
      for (double x : s) m = std::max(m, x);
      double l = std::exp(sink - m);
      for (double x : s) l += std::exp(x - m);
      const reference::RowResult r = reference::attention_row(g, f.value(), in.tensors, 0, h, i);
      INFO("cap " << cap << " h " << h << " i " << i);
      CHECK(r.lse == Approx(m + std::log(l)).epsilon(1e-12));
      for (int64_t d = 0; d < kD; ++d) {
        double o = 0;
        for (size_t j = 0; j < s.size(); ++j) o += std::exp(s[j] - m) / l * value(Role::V, 0, static_cast<int64_t>(j), d);
        CHECK(r.o[static_cast<size_t>(d)] == Approx(o).epsilon(1e-12).margin(1e-15));
      }
    }
  CHECK(bent == (cap < 10));  // a cap of 1 or 2 changes the logits; 1e30 leaves them as they were
}
