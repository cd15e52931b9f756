// A graph for any point of a row's domain (op, input dtype, head dims, O format), with every optional feature
// the row serves or none: the CPU compile tests derive plans from these to list the specializations the rows can
// choose, instead of a hand-written list.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>

#include "graph_builder.hpp"
#include "rime/graph.hpp"
#include "rime/inspect/rows.hpp"

namespace rime::test {

struct SpecCase {
  OpKind op = OpKind::SdpaFp8;
  DataType in = DataType::FP8_E4M3;
  std::optional<DataType> q;  // Q's dtype where it is not `in`: a 16-bit Q over FP8 K/V
  int64_t d_qk = 128, d_v = 128;
  std::string o_format = "FP8_E4M3";  // an O dtype, or NVFP4 / MXFP8
  bool features = false;  // sink, padding, causal, Stats, Amax_O / Amax_S (as the row serves them), scale_o
  bool amax_s = false;    // with features: Amax_S too (it makes split ineligible)
  bool starts = false;    // with features: per-sequence starts on both sides (seq_start_q / seq_start_kv)
  bool softcap = false;   // logit soft-capping (logit_softcap 30)
  QQuantization q_quantization = QQuantization::None;  // a 16-bit Q's rounding (the row's own)
  int64_t B = 2, H_q = 4, H_kv = 2, S_q = 128, S_kv = 384;

  std::string describe() const {
    return fmt::format("{} {}{} D {}/{} -> {}{}{}{}", to_string(op),
                       q ? fmt::format("Q {}{} over ", to_string(*q),
                                       q_quantization != QQuantization::None ? " rounded to E4M3 per row" : "")
                         : "",
                       to_string(in), d_qk, d_v, o_format, features ? " with every feature" : "",
                       starts ? " and starts" : "", softcap ? ", soft-capped" : "");
  }
};

inline Graph spec_graph(const SpecCase& c) {
  Graph g("spec");
  TensorAdder add{g};
  auto r128 = [](int64_t x) { return (x + 127) / 128 * 128; };
  auto r4 = [](int64_t x) { return (x + 3) / 4 * 4; };
  DataType o_type = DataType::BF16;
  int block = 0;
  if (c.o_format == "NVFP4") o_type = DataType::FP4_E2M1, block = 16;
  else if (c.o_format == "MXFP8") o_type = DataType::FP8_E4M3, block = 32;
  else o_type = parse_data_type(c.o_format).value_or(DataType::BF16);

  const int64_t q = add("Q", {c.B, c.H_q, c.S_q, c.d_qk}, c.q.value_or(c.in)), k = add("K", {c.B, c.H_kv, c.S_kv, c.d_qk}, c.in),
                v = add("V", {c.B, c.H_kv, c.S_kv, c.d_v}, c.in), o = add("O", {c.B, c.H_q, c.S_q, c.d_v}, o_type, true);
  std::optional<int64_t> sink, lq, lkv, stats, sf_o, start_q, start_kv;
  SdpaAttributes a;
  if (c.softcap) a.logit_softcap = 30.0f;
  a.q_quantization = c.q_quantization;
  if (c.features) {
    sink = add("sink", {1, c.H_q, 1, 1}, DataType::FP32);
    lq = add("seq_len_q", {c.B}, DataType::INT32);
    lkv = add("seq_len_kv", {c.B}, DataType::INT32);
    stats = add("Stats", {c.B, c.H_q, c.S_q, 1}, DataType::FP32, true);
    a.causal = true;
    a.padding_mask = true;
    a.generate_stats = true;
    if (c.starts) {
      start_q = add("seq_start_q", {c.B}, DataType::INT32);
      start_kv = add("seq_start_kv", {c.B}, DataType::INT32);
    }
  }
  if (block)
    sf_o = add("sf_o", {c.B, c.H_q, r128(c.S_q), r4(c.d_v / block)},
               block == 16 ? DataType::FP8_E4M3 : DataType::FP8_E8M0, true);
  if (c.op == OpKind::Sdpa) {
    SdpaOperands io;
    io.q = q, io.k = k, io.v = v, io.o = o, io.sink = sink, io.seq_len_q = lq, io.seq_len_kv = lkv, io.stats = stats;
    io.seq_start_q = start_q, io.seq_start_kv = start_kv;
    (void)g.sdpa(io, a, "attn");
  } else if (c.op == OpKind::SdpaFp8) {
    SdpaFp8Operands io;
    io.q = q, io.k = k, io.v = v, io.o = o, io.sink = sink, io.seq_len_q = lq, io.seq_len_kv = lkv, io.stats = stats;
    io.seq_start_q = start_q, io.seq_start_kv = start_kv;
    io.sf_o = sf_o;
    io.descale_q = add("descale_q", {1, 1, 1, 1}, DataType::FP32);
    io.descale_k = add("descale_k", {1, 1, 1, 1}, DataType::FP32);
    io.descale_v = add("descale_v", {1, 1, 1, 1}, DataType::FP32);
    io.descale_s = add("descale_s", {1, 1, 1, 1}, DataType::FP32);
    io.scale_s = add("scale_s", {1, 1, 1, 1}, DataType::FP32);
    io.scale_o = add("scale_o", {1, 1, 1, 1}, DataType::FP32);
    if (c.features) io.amax_o = add("Amax_O", {1, 1, 1, 1}, DataType::FP32, true);
    if (c.features && c.amax_s) io.amax_s = add("Amax_S", {1, 1, 1, 1}, DataType::FP32, true);
    (void)g.sdpa_fp8(io, a, "attn");
  } else {
    SdpaMxfp8Operands io;
    io.q = q, io.k = k, io.v = v, io.o = o, io.sink = sink, io.seq_len_q = lq, io.seq_len_kv = lkv, io.stats = stats;
    io.seq_start_q = start_q, io.seq_start_kv = start_kv;
    io.sf_o = sf_o;
    io.sf_q = add("SF_Q", {c.B, c.H_q, r128(c.S_q), r4((c.d_qk + 31) / 32)}, DataType::FP8_E8M0);
    io.sf_k = add("SF_K", {c.B, c.H_kv, r128(c.S_kv), r4((c.d_qk + 31) / 32)}, DataType::FP8_E8M0);
    io.sf_v = add("SF_V", {c.B, c.H_kv, r128(c.d_v), r4((c.S_kv + 31) / 32)}, DataType::FP8_E8M0);
    if (c.features) {
      io.scale_o = add("scale_o", {1, 1, 1, 1}, DataType::FP32);
      io.amax_o = add("Amax_O", {1, 1, 1, 1}, DataType::FP32, true);
    }
    (void)g.sdpa_mxfp8(io, a, "attn");
  }
  return g;
}

}  // namespace rime::test
