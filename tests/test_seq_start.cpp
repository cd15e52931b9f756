// Per-sequence starts (seq_start_q / seq_start_kv, SPEC section 2: left padding, as `generate` pads prompts):
// validation, the JSON form, facts and the explanation, the rows that serve them, and the CPU reference, which must
// compute for a left-padded batch what it computes for the same sequences padded on the right.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
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

struct LeftPadded {
  int64_t B = 4, H_q = 4, H_kv = 2, S_q = 40, S_kv = 72, D = 64;
  bool starts_q = true, starts_kv = true;
  bool causal = true, window = false;
};

// A BF16 graph with per-sequence lengths, and the starts the case asks for (uids in call order).
Graph left_padded(const LeftPadded& c) {
  Graph g("left_padded");
  test::TensorAdder add{g};
  SdpaOperands io;
  io.q = add("Q", {c.B, c.H_q, c.S_q, c.D}, DataType::BF16);
  io.k = add("K", {c.B, c.H_kv, c.S_kv, c.D}, DataType::BF16);
  io.v = add("V", {c.B, c.H_kv, c.S_kv, c.D}, DataType::BF16);
  io.o = add("O", {c.B, c.H_q, c.S_q, c.D}, DataType::BF16, true);
  io.stats = add("Stats", {c.B, c.H_q, c.S_q, 1}, DataType::FP32, true);
  io.seq_len_q = add("seq_len_q", {c.B}, DataType::INT32);
  io.seq_len_kv = add("seq_len_kv", {c.B}, DataType::INT32);
  if (c.starts_q) io.seq_start_q = add("seq_start_q", {c.B}, DataType::INT32);
  if (c.starts_kv) io.seq_start_kv = add("seq_start_kv", {c.B}, DataType::INT32);
  SdpaAttributes a;
  a.padding_mask = true;
  a.causal = c.causal;
  a.alignment = DiagonalAlignment::BottomRight;
  if (c.window) a.window_left = 9;
  REQUIRE(g.sdpa(io, a, "attn").ok());
  return g;
}

int64_t int_of(const testing::TrialInputs& in, const TensorDesc& t, int64_t b) {
  return static_cast<int64_t>(reference::load_element(DataType::INT32, in.tensors.at(t.uid).data(), b * t.strides[0]));
}

}  // namespace

TEST_CASE("seq_start_q / seq_start_kv are refused where they have no meaning, naming the tensor", "[seq_start][validate]") {
  struct Case {
    const char* what;
    void (*edit)(nlohmann::json& doc);
    const char* message;
  };
  // The starts' tensors are the last two of left_padded's document (uids 8 and 9).
  const Case cases[] = {
      {"dims", [](nlohmann::json& d) { d["tensors"][7]["dims"] = {3}; d["tensors"][7].erase("strides"); },
       "seq_start_q (seq_start_q): dims [3] must be [4] or [4,1,1,1] (one start per batch)"},
      {"dtype", [](nlohmann::json& d) { d["tensors"][8]["dtype"] = "INT64"; }, "seq_start_kv"},
      {"without its length",
       [](nlohmann::json& d) {
         d["op"]["inputs"].erase("seq_len_kv");
         d["tensors"].erase(6);
       },
       "seq_start_kv (seq_start_kv) needs seq_len_kv"},
  };
  const std::string text = graph_to_json(left_padded({}), false);
  for (const Case& c : cases) {
    INFO(c.what);
    nlohmann::json doc = nlohmann::json::parse(text);
    c.edit(doc);
    Result<Graph> g = graph_from_json(doc.dump());
    REQUIRE_FALSE(g.ok());
    INFO(g.status().message());
    CHECK(g.status().code() == StatusCode::InvalidGraph);
    CHECK(g.status().message().find(c.message) != std::string::npos);
  }
  // A ragged side's sequences start at their offsets: a start beside cu_seqlens is refused.
  Graph ragged("ragged");
  test::TensorAdder add{ragged};
  SdpaOperands io;
  io.q = add("Q", {1, 4, 100, 64}, DataType::BF16);
  io.k = add("K", {1, 4, 100, 64}, DataType::BF16);
  io.v = add("V", {1, 4, 100, 64}, DataType::BF16);
  io.o = add("O", {1, 4, 100, 64}, DataType::BF16, true);
  io.cu_seqlens_q = add("cu_seqlens_q", {4}, DataType::INT32);
  io.cu_seqlens_kv = add("cu_seqlens_kv", {4}, DataType::INT32);
  io.seq_len_q = std::nullopt;
  io.seq_start_q = add("seq_start_q", {3}, DataType::INT32);
  SdpaAttributes a;
  a.padding_mask = true;
  REQUIRE(ragged.sdpa(io, a).ok());
  const Status s = validate(ragged);
  CHECK(s.code() == StatusCode::InvalidGraph);
  CHECK(s.message().find("a ragged side's sequences start at their offsets") != std::string::npos);
}

TEST_CASE("starts round-trip through JSON, show in the facts and the explanation, and the rows that serve the graph "
          "without them serve it with them",
          "[seq_start]") {
  const Graph g = left_padded({});
  REQUIRE(validate(g).ok());
  Result<Graph> back = graph_from_json(graph_to_json(g));
  REQUIRE(back.ok());
  CHECK(back.value() == g);
  CHECK(graph_to_json(g).find("\"seq_start_kv\": 9") != std::string::npos);

  Result<Facts> f = analyze(g, DeviceDesc::h200());
  REQUIRE(f.ok());
  CHECK(f->seq_start_q);
  CHECK(f->seq_start_kv);
  LeftPadded none;
  none.starts_q = none.starts_kv = false;
  Result<Facts> without = analyze(left_padded(none), DeviceDesc::h200());
  REQUIRE(without.ok());
  int serving = 0;
  for (const RowVerdict& v : match(without.value())) {
    if (!v.accepted) continue;
    ++serving;
    const RowVerdict with = match_row(test::row_of(v.row_id), f.value());
    INFO(v.row_id << ": " << with.reason);
    CHECK(with.accepted);
    CHECK(test::row_of(v.row_id).seq_start);
  }
  CHECK(serving >= 2);  // the mma.sync and the Hopper 16-bit rows
  Result<Explanation> e = explain(g);
  REQUIRE(e.ok());
  CHECK(e->served);
  CHECK(e->text.find("starts    Q rows from seq_start_q, K/V positions from seq_start_kv") != std::string::npos);
  INFO(e->json);
  CHECK(e->json.find("\"seq_start_kv\": true") != std::string::npos);
  // The plan's kernel is the specialization with starts (their code is compiled in only where a graph has them).
  CHECK(e->json.find("padding | mask | starts") != std::string::npos);

  // A row without the field declines them by name.
  CapabilityRow plain = test::row_of(e->json.find("sdpa_sm90_f16") != std::string::npos ? "sdpa_sm90_f16"
                                                                                            : "sdpa_mma_f16");
  plain.seq_start = false;
  const RowVerdict declined = match_row(plain, f.value());
  CHECK_FALSE(declined.accepted);
  CHECK(declined.field == "seq_start");
  CHECK(declined.reason.find("per-sequence starts (seq_start_q and seq_start_kv) not supported") != std::string::npos);
  LeftPadded kv_only;
  kv_only.starts_q = false;
  Result<Facts> fk = analyze(left_padded(kv_only), DeviceDesc::h200());
  REQUIRE(fk.ok());
  CHECK_FALSE(fk->seq_start_q);
  CHECK(match_row(plain, fk.value()).reason.find("per-sequence starts (seq_start_kv) not supported") !=
        std::string::npos);
}

TEST_CASE("a left-padded batch's reference equals the same sequences padded on the right", "[seq_start][reference]") {
  // SPEC section 2: sequence b's query i is row seq_start_q[b] + i and its key j position seq_start_kv[b] + j;
  // every mask applies in (i, j). The right-padded twin holds the same sequences from row 0: the reference must
  // give every row of every sequence the same O and LSE, bit for bit (the same sums in the same order).
  LeftPadded c;
  const auto [causal, window] = GENERATE(std::pair{true, false}, std::pair{false, false}, std::pair{true, true});
  c.causal = causal;
  c.window = window;
  const Graph left = left_padded(c);
  LeftPadded rc = c;
  rc.starts_q = rc.starts_kv = false;
  const Graph right = left_padded(rc);
  Result<Facts> lf = analyze(left, DeviceDesc::h200()), rf = analyze(right, DeviceDesc::h200());
  REQUIRE(lf.ok());
  REQUIRE(rf.ok());
  const testing::TrialInputs lin = testing::make_inputs(left, 77);
  testing::TrialInputs rin = testing::make_inputs(right, 78);
  const TensorDesc &sq = *left.operand(Role::SeqStartQ), &skv = *left.operand(Role::SeqStartKv);
  const TensorDesc &lq = *left.operand(Role::SeqLenQ), &lkv = *left.operand(Role::SeqLenKv);
  for (Role r : {Role::SeqLenQ, Role::SeqLenKv}) rin.tensors[right.operand(r)->uid] = lin.tensors.at(left.operand(r)->uid);
  // make_inputs draws both edges: a sequence at the end of its room and one at row 0.
  CHECK(int_of(lin, sq, 0) + int_of(lin, lq, 0) == c.S_q);
  CHECK(int_of(lin, skv, 0) + int_of(lin, lkv, 0) == c.S_kv);
  CHECK(int_of(lin, sq, 1) == 0);
  bool some_start = false;
  for (int64_t b = 0; b < c.B; ++b) some_start |= int_of(lin, sq, b) > 0 && int_of(lin, skv, b) > 0;
  CHECK(some_start);
  for (auto [role, start, len] : {std::tuple{Role::Q, &sq, &lq}, std::tuple{Role::K, &skv, &lkv},
                                  std::tuple{Role::V, &skv, &lkv}}) {
    const TensorDesc &from = *left.operand(role), &to = *right.operand(role);
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < from.dims[1]; ++h)
        for (int64_t i = 0; i < int_of(lin, *len, b); ++i)
          std::memcpy(rin.tensors.at(to.uid).data() + reference::offset_of(to, b, h, i, 0) * 2,
                      lin.tensors.at(from.uid).data() + reference::offset_of(from, b, h, int_of(lin, *start, b) + i, 0) * 2,
                      static_cast<size_t>(c.D * 2));
  }
  int64_t live = 0;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H_q; ++h)
      for (int64_t i = -2; i < c.S_q; ++i) {
        const reference::RowResult l = reference::attention_row(left, lf.value(), lin.tensors, b, h, i);
        const reference::RowResult r = reference::attention_row(right, rf.value(), rin.tensors, b, h, i);
        INFO("b " << b << " h " << h << " i " << i);
        REQUIRE(l.live == (i >= 0 && i < int_of(lin, lq, b)));
        REQUIRE(l.live == r.live);
        live += l.live;
        CHECK((l.lse == r.lse || (std::isinf(l.lse) && std::isinf(r.lse))));
        CHECK(l.o == r.o);
      }
  CHECK(live > 0);
}

TEST_CASE("the output check reads a left-padded O at each sequence's rows and zeros elsewhere", "[seq_start][check]") {
  LeftPadded c;
  c.B = 3;
  const Graph g = left_padded(c);
  Result<Facts> f = analyze(g, DeviceDesc::h200());
  REQUIRE(f.ok());
  const testing::TrialInputs in = testing::make_inputs(g, 5);
  const TensorDesc &o = *g.operand(Role::O), &stats = *g.operand(Role::Stats), &sq = *g.operand(Role::SeqStartQ);
  // What a correct kernel writes: sequence b's row i at dense row seq_start_q[b] + i; O := 0, LSE := -inf elsewhere.
  reference::HostTensors out;
  for (const TensorDesc& t : g.tensors())
    if (t.is_output) out[t.uid].assign(static_cast<size_t>(tensor_storage_bytes(t)), 0);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H_q; ++h)
      for (int64_t row = 0; row < c.S_q; ++row) {
        const reference::RowResult r =
            reference::attention_row(g, f.value(), in.tensors, b, h, row - int_of(in, sq, b));
        for (int64_t d = 0; d < c.D; ++d)
          reference::store_element(o.dtype, out[o.uid].data(), reference::offset_of(o, b, h, row, d), r.o[d]);
        reference::store_element(DataType::FP32, out[stats.uid].data(), reference::offset_of(stats, b, h, row, 0), r.lse);
      }
  testing::TrialReport good = testing::check_outputs(g, f.value(), in, out, {});
  for (const auto& msg : good.failures) INFO(msg);
  CHECK(good.passed);

  SECTION("a sequence's rows written from row 0 (its start ignored) fail") {
    int64_t b = 0;  // the sequence that starts furthest from row 0
    for (int64_t x = 1; x < c.B; ++x)
      if (int_of(in, sq, x) > int_of(in, sq, b)) b = x;
    REQUIRE(int_of(in, sq, b) > 0);
    for (int64_t h = 0; h < c.H_q; ++h)
      for (int64_t row = 0; row < c.S_q; ++row) {
        const reference::RowResult r = reference::attention_row(g, f.value(), in.tensors, b, h, row);
        for (int64_t d = 0; d < c.D; ++d)
          reference::store_element(o.dtype, out[o.uid].data(), reference::offset_of(o, b, h, row, d), r.o[d]);
      }
    CHECK_FALSE(testing::check_outputs(g, f.value(), in, out, {}).passed);
  }
  SECTION("a pad row before the start holding a value fails") {
    int64_t b = 0;
    for (int64_t x = 1; x < c.B; ++x)
      if (int_of(in, sq, x) > int_of(in, sq, b)) b = x;
    const int64_t start = int_of(in, sq, b);
    REQUIRE(start > 0);
    reference::store_element(o.dtype, out[o.uid].data(), reference::offset_of(o, b, 1, start - 1, 3), 0.5);
    CHECK_FALSE(testing::check_outputs(g, f.value(), in, out, {}).passed);
  }
}
