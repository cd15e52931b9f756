// sdpa_fp8 graphs with a block-scaled O (SPEC section 5), shared by the CPU check tests and the GPU tests.
#pragma once

#include <fmt/format.h>

#include <string>

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

inline Graph block_scaled_graph(const BlockScaledCase& c) {
  Graph g(fmt::format("block_scaled_{}_{}", c.block == 16 ? "nvfp4" : "mxfp8", c.token_major ? "token" : "planes"));
  int64_t uid = 0;
  auto add = [&](const char* name, std::vector<int64_t> dims, DataType t, bool output = false,
                 std::vector<int64_t> strides = {}) {
    if (strides.empty()) strides = TensorDesc::packed_strides(dims);
    return g.add_tensor({name, ++uid, dims, strides, t, output});
  };
  SdpaFp8Operands io;
  io.q = add("Q", {c.B, c.H_q, c.S_q, c.D}, DataType::FP8_E4M3);
  io.k = add("K", {c.B, c.H_kv, c.S_kv, c.D}, DataType::FP8_E4M3);
  io.v = add("V", {c.B, c.H_kv, c.S_kv, c.D}, DataType::FP8_E4M3);
  io.o = add("O", {c.B, c.H_q, c.S_q, c.D}, c.block == 16 ? DataType::FP4_E2M1 : DataType::FP8_E4M3, true);
  io.descale_q = add("descale_q", {1, 1, 1, 1}, DataType::FP32);
  io.descale_k = add("descale_k", {1, 1, 1, 1}, DataType::FP32);
  io.descale_v = add("descale_v", {1, 1, 1, 1}, DataType::FP32);
  io.descale_s = add("descale_s", {1, 1, 1, 1}, DataType::FP32);
  io.scale_s = add("scale_s", {1, 1, 1, 1}, DataType::FP32);
  io.scale_o = add("scale_o", {1, 1, 1, 1}, DataType::FP32);
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
  if (c.split > 1) a.split_kv = c.split;
  (void)g.sdpa_fp8(io, a, "attn");
  return g;
}

}  // namespace rime::test
