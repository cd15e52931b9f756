#include "sdpa_mma/launch.hpp"

#include <fmt/format.h>

#include "graph/geometry.hpp"
#include "heuristics/tile.hpp"

namespace rime::engines {
namespace {

int type_code(DataType t) {
  switch (t) {
    case DataType::FP16: return RIME_T_FP16;
    case DataType::BF16: return RIME_T_BF16;
    case DataType::FP8_E4M3: return RIME_T_E4M3;
    case DataType::FP8_E5M2: return RIME_T_E5M2;
    default: return RIME_T_FP32;
  }
}

}  // namespace

int sdpa_o_type_code(const Facts& f) {
  if (f.o_block_scale == 16) return RIME_T_NVFP4;
  if (f.o_block_scale == 32) return RIME_T_MXFP8;
  return type_code(f.o.dtype);
}

int sdpa_features(const Facts& f, bool split) {
  int bits = 0;
  if (f.has_sink) bits |= RIME_F_SINK;
  if (f.wants_stats || split) bits |= RIME_F_STATS;
  if (f.wants_amax_o) bits |= RIME_F_AMAX_O;
  if (f.wants_amax_s) bits |= RIME_F_AMAX_S;
  if (split) bits |= RIME_F_SPLIT;
  if (f.mask.padding) bits |= RIME_F_PADDING;
  if (f.mask.causal || f.mask.window_left || f.mask.band_right) bits |= RIME_F_MASK;
  // scale_o multiplies only FP8 and block-scaled O (SPEC section 2: 1 for the others).
  if (f.has_scale_o && (is_fp8(f.o.dtype) || f.o_block_scale != 0)) bits |= RIME_F_SCALE_O;
  if (f.is_mxfp8) bits |= RIME_F_MX_INPUTS;
  return bits;
}

namespace {

void* buffer(const std::unordered_map<int64_t, void*>& buffers, const Graph& g, Role role) {
  auto uid = g.op()->operand(role);
  if (!uid) return nullptr;
  auto it = buffers.find(*uid);
  return it == buffers.end() ? nullptr : it->second;
}

void copy_strides(long long (&out)[3], const TensorDesc* t) {
  for (int i = 0; i < 3; ++i) out[i] = t ? t->strides[i] : 0;
}

template <class Params>
void set_sf_geometry(const Facts& f, Params& p) {
  p.sf_layout = f.sf_o_layout == SfLayout::TokenMajor ? 1 : 0;
  p.sf_rows = static_cast<int>(f.sf_o_rows);
  p.sf_cols = static_cast<int>(f.sf_o_cols);
}

}  // namespace

KernelSpec sdpa_mma_spec(const Facts& f, const Config& c, const std::string& arch) {
  KernelSpec s;
  s.engine = c.engine;
  s.header = "sdpa_mma/kernel.cuh";
  s.params_type = "SdpaParams";
  s.arch = arch;
  // Under split the attention kernel writes fp32 partials; its O type argument is unused and fixed to FP32 so
  // that one specialization serves every O dtype.
  const bool split = c.split_kv > 1;
  s.name_expression = fmt::format("rime_dev::sdpa_mma_fwd<{}, {}, {}, {}, {}, {}, {}>", type_code(f.q.dtype),
                                  split ? RIME_T_FP32 : sdpa_o_type_code(f), f.D_qk, f.D_v, c.tile.q, c.tile.kv,
                                  sdpa_features(f, split));
  return s;
}

KernelSpec combine_spec(const Facts& f, const std::string& arch) {
  KernelSpec s;
  s.engine = "combine";
  s.header = "combine/kernel.cuh";
  s.params_type = "CombineParams";
  s.arch = arch;
  const int bits =
      sdpa_features(f, false) & (RIME_F_SINK | RIME_F_STATS | RIME_F_AMAX_O | RIME_F_PADDING | RIME_F_SCALE_O);
  s.name_expression = fmt::format("rime_dev::sdpa_combine<{}, {}, {}, {}>", sdpa_o_type_code(f), f.D_v, bits,
                                  heuristics::combine_warps_per_row(f.B * f.H_q * f.S_q, f.device.sm_count));
  return s;
}

Launch sdpa_mma_launch(const Facts& f, const Config& c) {
  Launch l;
  l.grid[0] = static_cast<unsigned>(c.q_tiles);
  l.grid[1] = static_cast<unsigned>(f.H_kv);
  l.grid[2] = static_cast<unsigned>(f.B * c.split_kv);
  l.block = static_cast<unsigned>(c.tile.q * 2);
  const int elem = f.is_fp8 || f.is_mxfp8 ? 1 : 2;
  l.smem = static_cast<unsigned>(heuristics::sdpa_mma_smem_bytes(c.tile.q, c.tile.kv, f.D_qk, f.D_v, elem, elem == 1,
                                                                   f.is_mxfp8));
  return l;
}

Launch combine_launch(const Facts& f) {
  const int64_t rows = f.B * f.H_q * f.S_q;
  return Launch{{static_cast<unsigned>(rows), 1, 1},
                static_cast<unsigned>(32 * heuristics::combine_warps_per_row(rows, f.device.sm_count)), 0};
}

SdpaParams sdpa_mma_params(const Graph& g, const Facts& f, const Config& c,
                           const std::unordered_map<int64_t, void*>& buffers, void* workspace) {
  SdpaParams p{};
  p.q = buffer(buffers, g, Role::Q);
  p.k = buffer(buffers, g, Role::K);
  p.v = buffer(buffers, g, Role::V);
  p.o = buffer(buffers, g, Role::O);
  p.stats = static_cast<float*>(buffer(buffers, g, Role::Stats));
  p.amax_o = static_cast<float*>(buffer(buffers, g, Role::AmaxO));
  p.amax_s = static_cast<float*>(buffer(buffers, g, Role::AmaxS));
  p.sink = static_cast<const float*>(buffer(buffers, g, Role::Sink));
  p.seq_len_q = static_cast<const int*>(buffer(buffers, g, Role::SeqLenQ));
  p.seq_len_kv = static_cast<const int*>(buffer(buffers, g, Role::SeqLenKv));
  p.descale_q = static_cast<const float*>(buffer(buffers, g, Role::DescaleQ));
  p.descale_k = static_cast<const float*>(buffer(buffers, g, Role::DescaleK));
  p.descale_v = static_cast<const float*>(buffer(buffers, g, Role::DescaleV));
  p.scale_o = static_cast<const float*>(buffer(buffers, g, Role::ScaleO));
  if (c.split_kv > 1) {
    const int64_t rows = f.B * f.H_q * f.S_q;
    p.o_partial = static_cast<float*>(workspace);
    p.lse_partial = reinterpret_cast<float*>(static_cast<char*>(workspace) +
                                             round_up(int64_t{c.split_kv} * rows * f.D_v * 4, 256));
  }
  p.sf_o = static_cast<unsigned char*>(buffer(buffers, g, Role::SfO));
  set_sf_geometry(f, p);
  p.sf_q = static_cast<const unsigned char*>(buffer(buffers, g, Role::SfQ));
  p.sf_k = static_cast<const unsigned char*>(buffer(buffers, g, Role::SfK));
  p.sf_v = static_cast<const unsigned char*>(buffer(buffers, g, Role::SfV));
  // The input scale planes' R and C (validate() checked them; planes order is the only one accepted).
  auto plane_dims = [&](Role r, int& rows, int& cols) {
    const TensorDesc* t = g.operand(r);
    rows = t ? static_cast<int>(t->dims[2]) : 0;
    cols = t ? static_cast<int>(t->dims[3]) : 0;
  };
  plane_dims(Role::SfQ, p.sf_q_rows, p.sf_q_cols);
  plane_dims(Role::SfK, p.sf_k_rows, p.sf_k_cols);
  plane_dims(Role::SfV, p.sf_v_rows, p.sf_v_cols);
  copy_strides(p.q_stride, g.operand(Role::Q));
  copy_strides(p.k_stride, g.operand(Role::K));
  copy_strides(p.v_stride, g.operand(Role::V));
  copy_strides(p.o_stride, g.operand(Role::O));
  copy_strides(p.stats_stride, g.operand(Role::Stats));
  p.B = static_cast<int>(f.B);
  p.H_q = static_cast<int>(f.H_q);
  p.H_kv = static_cast<int>(f.H_kv);
  p.group = static_cast<int>(f.group);
  p.S_q = static_cast<int>(f.S_q);
  p.S_kv = static_cast<int>(f.S_kv);
  p.packed_rows = static_cast<int>(c.packed_rows);
  p.num_splits = c.split_kv;
  p.attn_scale = f.attn_scale;
  p.causal = f.mask.causal ? 1 : 0;
  p.band_right = f.mask.band_right ? static_cast<int>(*f.mask.band_right) : -1;
  p.window_left = f.mask.window_left ? static_cast<int>(*f.mask.window_left) : -1;
  p.diag_shift = f.mask.bottom_right ? static_cast<int>(f.S_kv - f.S_q) : 0;
  p.stats_log2 = f.stats_log2 ? 1 : 0;
  return p;
}

CombineParams combine_params(const Graph& g, const Facts& f, const Config& c,
                             const std::unordered_map<int64_t, void*>& buffers, void* workspace) {
  CombineParams p{};
  const int64_t rows = f.B * f.H_q * f.S_q;
  p.o_partial = static_cast<const float*>(workspace);
  p.lse_partial = reinterpret_cast<const float*>(static_cast<const char*>(workspace) +
                                                 round_up(int64_t{c.split_kv} * rows * f.D_v * 4, 256));
  p.o = buffer(buffers, g, Role::O);
  p.stats = static_cast<float*>(buffer(buffers, g, Role::Stats));
  p.amax_o = static_cast<float*>(buffer(buffers, g, Role::AmaxO));
  p.sink = static_cast<const float*>(buffer(buffers, g, Role::Sink));
  p.seq_len_q = static_cast<const int*>(buffer(buffers, g, Role::SeqLenQ));
  p.scale_o = static_cast<const float*>(buffer(buffers, g, Role::ScaleO));
  p.sf_o = static_cast<unsigned char*>(buffer(buffers, g, Role::SfO));
  set_sf_geometry(f, p);
  copy_strides(p.o_stride, g.operand(Role::O));
  copy_strides(p.stats_stride, g.operand(Role::Stats));
  p.B = static_cast<int>(f.B);
  p.H_q = static_cast<int>(f.H_q);
  p.S_q = static_cast<int>(f.S_q);
  p.num_splits = c.split_kv;
  p.stats_log2 = f.stats_log2 ? 1 : 0;
  return p;
}

}  // namespace rime::engines
