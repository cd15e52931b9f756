// sdpa_fp8 graphs with a block-scaled O (SPEC section 5), shared by the CPU check tests and the GPU tests.
#pragma once

#include <fmt/format.h>

#include <string>

#include "graph_builder.hpp"
#include "rime/graph.hpp"

namespace rime::test {

struct BlockScaledCase {
  int block = 16;  // 16: NVFP4 (O FP4_E2M1, sf_o E4M3); 32: MXFP8 (O FP8_E4M3, sf_o UE8M0)
  bool token_major = false;
  int split = 1;  // pinned split-KV count (1: none)
  bool causal = false;
  int64_t B = 2, H_q = 4, H_kv = 2, S_q = 300, S_kv = 300, D = 128;
  bool stats = false, amax_o = true;

  std::string describe() const {
    return fmt::format("{} {} split {}{} B{} H{}/{} S_q {} S_kv {} D{}", block == 16 ? "NVFP4" : "MXFP8",
                       token_major ? "token-major" : "planes", split, causal ? " causal" : "", B, H_q, H_kv, S_q,
                       S_kv, D);
  }
};

// The six FP32 [1, 1, 1, 1] scalars of an sdpa_fp8 node: descale_q / k / v / s, scale_s and scale_o. `add`
// adds a tensor (name, dims, dtype) to the graph and returns its uid. `per_head` bits (kPerHeadQ / K / V) make
// descale_q / k / v per (batch, kv head) instead: [B, H_kv, 1, 1].
enum : unsigned { kPerHeadQ = 1, kPerHeadK = 2, kPerHeadV = 4 };
// The bits as a draw's description spells them: " descales per head q v", or "" for none.
inline std::string per_head_text(unsigned per_head) {
  if (!per_head) return "";
  return fmt::format(" descales per head{}{}{}", per_head & kPerHeadQ ? " q" : "", per_head & kPerHeadK ? " k" : "",
                     per_head & kPerHeadV ? " v" : "");
}
template <class AddTensor>
void add_fp8_scalars(AddTensor&& add, SdpaFp8Operands& io, unsigned per_head = 0, int64_t B = 1, int64_t H_kv = 1) {
  auto dims = [&](unsigned bit) { return per_head & bit ? std::vector<int64_t>{B, H_kv, 1, 1} : std::vector<int64_t>{1, 1, 1, 1}; };
  io.descale_q = add("descale_q", dims(kPerHeadQ), DataType::FP32);
  io.descale_k = add("descale_k", dims(kPerHeadK), DataType::FP32);
  io.descale_v = add("descale_v", dims(kPerHeadV), DataType::FP32);
  io.descale_s = add("descale_s", {1, 1, 1, 1}, DataType::FP32);
  io.scale_s = add("scale_s", {1, 1, 1, 1}, DataType::FP32);
  io.scale_o = add("scale_o", {1, 1, 1, 1}, DataType::FP32);
}

inline Graph block_scaled_graph(const BlockScaledCase& c) {
  Graph g(fmt::format("block_scaled_{}_{}", c.block == 16 ? "nvfp4" : "mxfp8", c.token_major ? "token" : "planes"));
  TensorAdder add{g};
  SdpaFp8Operands io;
  io.q = add("Q", {c.B, c.H_q, c.S_q, c.D}, DataType::FP8_E4M3);
  io.k = add("K", {c.B, c.H_kv, c.S_kv, c.D}, DataType::FP8_E4M3);
  io.v = add("V", {c.B, c.H_kv, c.S_kv, c.D}, DataType::FP8_E4M3);
  io.o = add("O", {c.B, c.H_q, c.S_q, c.D}, c.block == 16 ? DataType::FP4_E2M1 : DataType::FP8_E4M3, true);
  add_fp8_scalars(add, io);
  // R: S_q rounded up to 128; C: the blocks of a row rounded up to 4 (D 64 MXFP8 has 2 blocks and 2 pad columns).
  const int64_t R = (c.S_q + 127) / 128 * 128, C = ((c.D / c.block) + 3) / 4 * 4;
  std::vector<int64_t> sf_strides = c.token_major ? std::vector<int64_t>{R * c.H_q * C, C, c.H_q * C, 1}
                                                  : std::vector<int64_t>{c.H_q * R * C, R * C, C, 1};
  io.sf_o = add("sf_o", {c.B, c.H_q, R, C}, c.block == 16 ? DataType::FP8_E4M3 : DataType::FP8_E8M0, true, sf_strides);
  if (c.stats) io.stats = add("Stats", {c.B, c.H_q, c.S_q, 1}, DataType::FP32, true);
  if (c.amax_o) io.amax_o = add("Amax_O", {1, 1, 1, 1}, DataType::FP32, true);
  SdpaAttributes a;
  a.causal = c.causal;
  a.generate_stats = c.stats;
  a.split_kv = c.split;  // pinned, 1 included: the heuristic would split some of the small cases
  (void)g.sdpa_fp8(io, a, "attn");
  return g;
}

// sdpa_mxfp8 graphs (SPEC section 6): MXFP8 Q/K/V with SF_Q, SF_K, SF_V planes, any O format.
struct MxInputsCase {
  std::string o_format = "BF16";  // BF16, FP16, FP8_E4M3, FP8_E5M2, NVFP4, MXFP8
  bool scale_o = false;
  int split = 1;
  bool causal = false, padding = false, sink = false, stats = false;
  int64_t B = 2, H_q = 4, H_kv = 2, S_q = 300, S_kv = 300, D = 128;

  std::string describe() const {
    return fmt::format("MXFP8 inputs -> {}{} split {}{}{}{}{} B{} H{}/{} S_q {} S_kv {} D{}", o_format,
                       scale_o ? " scale_o" : "", split, causal ? " causal" : "", padding ? " padding" : "",
                       sink ? " sink" : "", stats ? " stats" : "", B, H_q, H_kv, S_q, S_kv, D);
  }
};

inline Graph mx_inputs_graph(const MxInputsCase& c) {
  Graph g("mx_inputs_" + c.o_format);
  TensorAdder add{g};
  auto r128 = [](int64_t x) { return (x + 127) / 128 * 128; };
  auto r4 = [](int64_t x) { return (x + 3) / 4 * 4; };
  SdpaMxfp8Operands io;
  io.q = add("Q", {c.B, c.H_q, c.S_q, c.D}, DataType::FP8_E4M3);
  io.k = add("K", {c.B, c.H_kv, c.S_kv, c.D}, DataType::FP8_E4M3);
  io.v = add("V", {c.B, c.H_kv, c.S_kv, c.D}, DataType::FP8_E4M3);
  io.sf_q = add("SF_Q", {c.B, c.H_q, r128(c.S_q), r4(c.D / 32)}, DataType::FP8_E8M0);
  io.sf_k = add("SF_K", {c.B, c.H_kv, r128(c.S_kv), r4(c.D / 32)}, DataType::FP8_E8M0);
  io.sf_v = add("SF_V", {c.B, c.H_kv, r128(c.D), r4((c.S_kv + 31) / 32)}, DataType::FP8_E8M0);
  DataType o_type = DataType::BF16;
  int block = 0;
  if (c.o_format == "FP16") o_type = DataType::FP16;
  if (c.o_format == "FP8_E4M3" || c.o_format == "MXFP8") o_type = DataType::FP8_E4M3;
  if (c.o_format == "FP8_E5M2") o_type = DataType::FP8_E5M2;
  if (c.o_format == "NVFP4") o_type = DataType::FP4_E2M1, block = 16;
  if (c.o_format == "MXFP8") block = 32;
  io.o = add("O", {c.B, c.H_q, c.S_q, c.D}, o_type, true);
  if (block) {
    const int64_t R = r128(c.S_q), C = r4(c.D / block);
    io.sf_o = add("sf_o", {c.B, c.H_q, R, C}, block == 16 ? DataType::FP8_E4M3 : DataType::FP8_E8M0, true);
  }
  if (c.scale_o) io.scale_o = add("scale_o", {1, 1, 1, 1}, DataType::FP32);
  if (c.sink) io.sink = add("sink", {1, c.H_q, 1, 1}, DataType::FP32);
  if (c.padding) {
    io.seq_len_q = add("seq_len_q", {c.B}, DataType::INT32);
    io.seq_len_kv = add("seq_len_kv", {c.B}, DataType::INT32);
  }
  if (c.stats) io.stats = add("Stats", {c.B, c.H_q, c.S_q, 1}, DataType::FP32, true);
  io.amax_o = add("Amax_O", {1, 1, 1, 1}, DataType::FP32, true);
  SdpaAttributes a;
  a.causal = c.causal;
  a.padding_mask = c.padding;
  a.generate_stats = c.stats;
  a.split_kv = c.split;
  (void)g.sdpa_mxfp8(io, a, "attn");
  return g;
}

}  // namespace rime::test
