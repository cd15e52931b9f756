#include "combine/stage.hpp"

#include <fmt/format.h>

#include "common/sdpa_params.hpp"
#include "heuristics/tile.hpp"

namespace rime::engines {

Result<KernelStage> combine_stage(const Facts& f, const CapabilityRow& row, const std::string& arch) {
  const int64_t rows = f.B * f.H_q * f.S_q;
  const int warps = heuristics::combine_warps_per_row(rows, f.device.sm_count);
  KernelStage s;
  s.role = "combine";
  s.spec.engine = "combine";
  s.spec.header = "combine/kernel.cuh";
  s.spec.params_type = "CombineParams";
  s.spec.arch = arch;
  const int bits =
      sdpa_features(f, false) &
      (RIME_F_SINK | RIME_F_STATS | RIME_F_AMAX_O | RIME_F_PADDING | RIME_F_SCALE_O | RIME_F_RAGGED_Q |
       (f.seq_start_q ? RIME_F_STARTS : 0));  // the combine places rows: only Q's starts matter to it
  s.spec.name_expression = fmt::format("rime_dev::combine_splits<{}, {}, {}, {}>", kernel_type_name(sdpa_o_type_code(f)),
                                       f.D_v, kernel_feature_names(bits), warps);
  s.grid = {rows, 1, 1};
  s.block = 32 * warps;
  s.smem_bytes = 0;
  Status limit = check_grid_dim(row, "combine", 'x', rows, fmt::format("B x H_q x S_q = {} x {} x {}", f.B, f.H_q, f.S_q));
  if (!limit.ok()) return limit;
  return s;
}

CombineParams combine_params(const Facts& f, const Config& c, const Bindings& b) {
  CombineParams p{};
  p.o_partial = static_cast<const float*>(b.region(c.derived, "o_partial"));
  p.lse_partial = static_cast<const float*>(b.region(c.derived, "lse_partial"));
  p.o = b.of(Role::O);
  p.stats = static_cast<float*>(b.of(Role::Stats));
  p.amax_o = static_cast<float*>(b.of(Role::AmaxO));
  p.sink = static_cast<const float*>(b.of(Role::Sink));
  p.seq_len_q = static_cast<const int*>(b.of(Role::SeqLenQ));
  p.seq_start_q = static_cast<const int*>(b.of(Role::SeqStartQ));
  p.cu_seqlens_q = static_cast<const int*>(b.of(Role::CuSeqlensQ));
  p.scale_o = static_cast<const float*>(b.of(Role::ScaleO));
  p.sf_o = static_cast<unsigned char*>(b.of(Role::SfO));
  p.sf_layout = f.sf_o_layout == SfLayout::TokenMajor ? 1 : 0;
  p.sf_rows = static_cast<int>(f.sf_o_rows);
  p.sf_cols = static_cast<int>(f.sf_o_cols);
  for (int i = 0; i < 3; ++i) {
    p.o_stride[i] = f.o().strides[static_cast<size_t>(i)];
    p.stats_stride[i] = f.wants_stats ? f.operand(Role::Stats).strides[static_cast<size_t>(i)] : 0;
  }
  if (f.ragged_q) p.o_stride[0] = p.stats_stride[0] = 0;  // sequence b's rows are its tokens (sdpa_params)
  p.B = static_cast<int>(f.B);
  p.H_q = static_cast<int>(f.H_q);
  p.S_q = static_cast<int>(f.S_q);
  p.num_splits = partial_slots(f, c.decision);  // every rank's split_kv partials in a context-parallel plan
  p.stats_log2 = f.stats_log2 ? 1 : 0;
  return p;
}

}  // namespace rime::engines
