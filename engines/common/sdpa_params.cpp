#include "common/sdpa_params.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "combine/stage.hpp"
#include "common/fast_div.h"

namespace rime::engines {

int type_code(DataType t) {
  switch (t) {
    case DataType::FP16: return RIME_T_FP16;
    case DataType::BF16: return RIME_T_BF16;
    case DataType::FP8_E4M3: return RIME_T_E4M3;
    case DataType::FP8_E5M2: return RIME_T_E5M2;
    default: return RIME_T_FP32;
  }
}

std::string kernel_type_name(int code) {
  switch (code) {
    case RIME_T_FP16: return "fp16";
    case RIME_T_BF16: return "bf16";
    case RIME_T_E4M3: return "e4m3";
    case RIME_T_E5M2: return "e5m2";
    case RIME_T_FP32: return "fp32";
    case RIME_T_NVFP4: return "nvfp4";
    case RIME_T_MXFP8: return "mxfp8";
  }
  return std::to_string(code);
}

std::string kernel_feature_names(int features) {
  static const std::pair<int, const char*> kNames[] = {
      {RIME_F_SINK, "sink"},         {RIME_F_STATS, "stats"},         {RIME_F_AMAX_O, "amax_o"},
      {RIME_F_AMAX_S, "amax_s"},     {RIME_F_SPLIT, "split"},         {RIME_F_PADDING, "padding"},
      {RIME_F_MASK, "mask"},         {RIME_F_SCALE_O, "scale_o"},     {RIME_F_MX_INPUTS, "mx_inputs"},
      {RIME_F_PAGED, "paged"},       {RIME_F_RAGGED_Q, "ragged_q"},   {RIME_F_RAGGED_KV, "ragged_kv"},
      {RIME_F_KV_FP8, "kv_fp8"},     {RIME_F_KV_E5M2, "kv_e5m2"},     {RIME_F_Q_BF16, "q_bf16"},
      {RIME_F_BALANCED, "balanced"}, {RIME_F_STARTS, "starts"},     {RIME_F_SOFTCAP, "softcap"},
      {RIME_F_Q_E4M3_ROWS, "q_e4m3_rows"}};
  std::string out;
  int named = 0;
  for (const auto& [bit, name] : kNames)
    if (features & bit) {
      out += out.empty() ? name : std::string(" | ") + name;
      named |= bit;
    }
  if (named != features) out += fmt::format("{}{}", out.empty() ? "" : " | ", features & ~named);  // unnamed bits
  return out.empty() ? "no_features" : out;
}

std::string kernel_consumers_name(int n) {
  switch (n) {
    case 1: return "one_consumer";
    case 2: return "two_consumers";
    case 3: return "three_consumers";
  }
  return std::to_string(n);
}

int sdpa_o_type_code(const Facts& f) {
  if (f.o_block_scale == 16) return RIME_T_NVFP4;
  if (f.o_block_scale == 32) return RIME_T_MXFP8;
  return type_code(f.o().dtype);
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
  if (f.has_scale_o && (is_fp8(f.o().dtype) || f.o_block_scale != 0)) bits |= RIME_F_SCALE_O;
  if (f.is_mxfp8) bits |= RIME_F_MX_INPUTS;
  if (f.paged) bits |= RIME_F_PAGED;
  if (f.ragged_q) bits |= RIME_F_RAGGED_Q;
  if (f.ragged_kv) bits |= RIME_F_RAGGED_KV;
  if (f.seq_start_q || f.seq_start_kv) bits |= RIME_F_STARTS;
  if (f.logit_softcap > 0) bits |= RIME_F_SOFTCAP;
  if (f.q16_over_fp8_kv()) {
    bits |= RIME_F_KV_FP8;
    if (f.k().dtype == DataType::FP8_E5M2) bits |= RIME_F_KV_E5M2;
    if (f.q().dtype == DataType::BF16) bits |= RIME_F_Q_BF16;
    if (f.q_quantization == QQuantization::E4M3PerRow) bits |= RIME_F_Q_E4M3_ROWS;
  }
  return bits;
}

namespace {

void copy_strides(long long (&out)[3], const TensorFacts& t) {
  for (int i = 0; i < 3; ++i) out[i] = t.bound ? t.strides[static_cast<size_t>(i)] : 0;
}

// R and C of an F8_128x4 scale tensor (0 when unbound).
void plane_dims(const TensorFacts& t, int& rows, int& cols) {
  rows = t.bound ? static_cast<int>(t.dims[2]) : 0;
  cols = t.bound ? static_cast<int>(t.dims[3]) : 0;
}

}  // namespace

SdpaParams sdpa_params(const Facts& f, const Config& c, const Bindings& b) {
  SdpaParams p{};
  p.q = b.of(Role::Q);
  p.k = b.of(Role::K);
  p.v = b.of(Role::V);
  p.o = b.of(Role::O);
  p.stats = static_cast<float*>(b.of(Role::Stats));
  p.amax_o = static_cast<float*>(b.of(Role::AmaxO));
  p.amax_s = static_cast<float*>(b.of(Role::AmaxS));
  p.sink = static_cast<const float*>(b.of(Role::Sink));
  p.seq_len_q = static_cast<const int*>(b.of(Role::SeqLenQ));
  p.seq_len_kv = static_cast<const int*>(b.of(Role::SeqLenKv));
  p.page_table = static_cast<const int*>(b.of(Role::PageTable));
  p.cu_seqlens_q = static_cast<const int*>(b.of(Role::CuSeqlensQ));
  p.cu_seqlens_kv = static_cast<const int*>(b.of(Role::CuSeqlensKv));
  p.seq_start_q = static_cast<const int*>(b.of(Role::SeqStartQ));
  p.seq_start_kv = static_cast<const int*>(b.of(Role::SeqStartKv));
  p.logit_softcap = f.logit_softcap;
  if (f.paged) {
    p.page_table_stride = f.operand(Role::PageTable).strides[0];
    p.page_size_log2 = page_size_log2(f.page_size);
  }
  p.descale_q = static_cast<const float*>(b.of(Role::DescaleQ));
  p.descale_k = static_cast<const float*>(b.of(Role::DescaleK));
  p.descale_v = static_cast<const float*>(b.of(Role::DescaleV));
  auto descale_strides = [&](Role role, int (&stride)[2]) {
    const TensorFacts& d = f.operand(role);
    for (int i = 0; i < 2; ++i) stride[i] = d.bound && d.dims[i] > 1 ? static_cast<int>(d.strides[i]) : 0;
  };
  descale_strides(Role::DescaleQ, p.descale_q_stride);
  descale_strides(Role::DescaleK, p.descale_k_stride);
  descale_strides(Role::DescaleV, p.descale_v_stride);
  p.scale_o = static_cast<const float*>(b.of(Role::ScaleO));
  p.o_partial = static_cast<float*>(b.region(c.derived, "o_partial"));
  p.lse_partial = static_cast<float*>(b.region(c.derived, "lse_partial"));
  p.row_tile_counter = static_cast<unsigned*>(b.region(c.derived, "row_tile_counter"));
  if (f.context_parallel.world > 0 && p.o_partial) {  // this rank's slots of the gathered partials
    const int64_t slot0 = int64_t{f.context_parallel.rank} * c.decision.split_kv, rows = f.B * f.H_q * f.S_q;
    p.o_partial += slot0 * rows * f.D_v;
    p.lse_partial += slot0 * rows;
  }
  p.sf_o = static_cast<unsigned char*>(b.of(Role::SfO));
  p.sf_layout = f.sf_o_layout == SfLayout::TokenMajor ? 1 : 0;
  p.sf_rows = static_cast<int>(f.sf_o_rows);
  p.sf_cols = static_cast<int>(f.sf_o_cols);
  p.sf_q = static_cast<const unsigned char*>(b.of(Role::SfQ));
  p.sf_k = static_cast<const unsigned char*>(b.of(Role::SfK));
  p.sf_v = static_cast<const unsigned char*>(b.of(Role::SfV));
  plane_dims(f.operand(Role::SfQ), p.sf_q_rows, p.sf_q_cols);
  plane_dims(f.operand(Role::SfK), p.sf_k_rows, p.sf_k_cols);
  plane_dims(f.operand(Role::SfV), p.sf_v_rows, p.sf_v_cols);
  copy_strides(p.q_stride, f.q());
  copy_strides(p.k_stride, f.k());
  copy_strides(p.v_stride, f.v());
  copy_strides(p.o_stride, f.o());
  copy_strides(p.stats_stride, f.operand(Role::Stats));
  // Ragged sides are one token-major "batch" [1, H, T, D]: the kernels address sequence b at its tokens, never
  // at b x stride[0].
  if (f.ragged_q) p.q_stride[0] = p.o_stride[0] = p.stats_stride[0] = 0;
  if (f.ragged_kv) p.k_stride[0] = p.v_stride[0] = 0;
  // check_sdpa_int32 bounded every narrowing below when the plan was derived.
  p.B = static_cast<int>(f.B);
  p.H_q = static_cast<int>(f.H_q);
  p.H_kv = static_cast<int>(f.H_kv);
  p.group = static_cast<int>(f.group);
  p.S_q = static_cast<int>(f.S_q);
  p.S_kv = static_cast<int>(f.S_kv);
  p.group_div = fast_div_of(static_cast<unsigned>(p.group));
  p.h_kv_div = fast_div_of(static_cast<unsigned>(p.H_kv));
  p.b_div = fast_div_of(static_cast<unsigned>(p.B));
  p.packed_rows = static_cast<int>(c.derived.packed_rows);
  p.num_splits = c.decision.split_kv;
  p.attn_scale = f.attn_scale;
  p.causal = f.mask.causal ? 1 : 0;
  p.band_right = f.mask.band_right ? static_cast<int>(*f.mask.band_right) : -1;
  p.window_left = f.mask.window_left ? static_cast<int>(*f.mask.window_left) : -1;
  p.diag_shift = f.mask.bottom_right ? static_cast<int>(f.S_kv - f.S_q) : 0;
  if (b.kv) {  // this execute's K/V: fewer keys than the graph's S_kv (a capacity), and their own strides
    p.S_kv = static_cast<int>(b.kv->length);
    for (int i = 0; i < 3; ++i) {
      p.k_stride[i] = b.kv->k_strides[static_cast<size_t>(i)];
      p.v_stride[i] = b.kv->v_strides[static_cast<size_t>(i)];
    }
    p.diag_shift = f.mask.bottom_right ? static_cast<int>(b.kv->length - f.S_q) : 0;
  }
  p.bottom_right = f.mask.bottom_right ? 1 : 0;
  p.stats_log2 = f.stats_log2 ? 1 : 0;
  return p;
}

int page_size_log2(int64_t page_size) {
  int log2 = 0;
  while ((int64_t{1} << log2) < page_size) ++log2;
  return log2;
}

Status check_sdpa_int32(const Facts& f, const CapabilityRow& row, int64_t packed_rows) {
  const std::pair<const char*, int64_t> fields[] = {
      {"B", f.B},           {"H_q", f.H_q},         {"S_q", f.S_q},
      {"S_kv", f.S_kv},     {"packed rows (S_q x group)", packed_rows},
      {"window_left", f.mask.window_left.value_or(0)}, {"band_right", f.mask.band_right.value_or(0)},
      {"S_kv - S_q", f.S_kv - f.S_q}};
  for (const auto& [name, value] : fields) {
    Status s = check_int32(row, name, value);
    if (!s.ok()) return s;
  }
  // A per-(batch, kv head) descale is indexed b x stride[0] + h_kv x stride[1] in 32 bits (descale_strides above).
  for (auto [role, name] : {std::pair{Role::DescaleQ, "descale_q's span (strides over [B, H_kv])"},
                            std::pair{Role::DescaleK, "descale_k's span (strides over [B, H_kv])"},
                            std::pair{Role::DescaleV, "descale_v's span (strides over [B, H_kv])"}}) {
    const TensorFacts& d = f.operand(role);
    if (!d.bound || d.dims.size() < 2) continue;
    Status s = check_int32(row, name, (d.dims[0] - 1) * d.strides[0] + (d.dims[1] - 1) * d.strides[1]);
    if (!s.ok()) return s;
  }
  return Status::success();
}

void add_workspace_region(Derived& d, const std::string& name, int64_t bytes) {
  const int64_t offset = (d.workspace_bytes + 255) / 256 * 256;
  d.workspace.push_back({name, offset, bytes});
  d.workspace_bytes = offset + (bytes + 255) / 256 * 256;
}

bool writes_partials(const Facts& f, const Decision& d) { return d.split_kv > 1 || f.context_parallel.world > 0; }

int partial_slots(const Facts& f, const Decision& d) { return d.split_kv * std::max(1, f.context_parallel.world); }

void add_split_partials(Derived& d, const Facts& f, int slots) {
  const int64_t rows = f.B * f.H_q * f.S_q;
  add_workspace_region(d, "o_partial", int64_t{slots} * rows * f.D_v * 4);
  add_workspace_region(d, "lse_partial", int64_t{slots} * rows * 4);
}

Status check_grid_dim(const CapabilityRow& row, const std::string& stage, char axis, int64_t value,
                      const std::string& formula) {
  const int64_t limit = axis == 'x' ? int64_t{INT32_MAX} : int64_t{65535};
  if (value >= 1 && value <= limit) return Status::success();
  return Status(StatusCode::NotSupported,
                fmt::format("row {}: the {} grid's {} = {} = {} {}", row.id, stage, axis, formula, value,
                            value < 1 ? "is empty" : fmt::format("exceeds {}", limit)));
}

Status check_int32(const CapabilityRow& row, const char* field, int64_t value) {
  if (value >= INT32_MIN && value <= INT32_MAX) return Status::success();
  return Status(StatusCode::NotSupported, fmt::format("row {}: {} = {} exceeds the kernels' 32-bit range ({})",
                                                      row.id, field, value, INT32_MAX));
}

Derived sdpa_derived(const Facts& f, const CapabilityRow& row, const TileGeometry& g, const Decision& d) {
  Derived out;
  out.engine = row.engine;
  out.packed_rows = g.packed_rows;
  out.q_tiles = g.q_tiles;
  out.kv_tiles = g.kv_tiles;
  out.threads = g.threads;
  out.smem_bytes = g.smem_bytes;
  if (writes_partials(f, d)) add_split_partials(out, f, partial_slots(f, d));
  return out;
}

// The walk counts in 32 bits: one kv head's tiles over all batches (at most B x kv_tiles, below 2^30 here), and
// slice positions s x W below 2^31 for up to 32768 CTAs (W is at most the longest pair's tiles, or total / slices):
// 32768 KV tiles at most per sequence; longer caches keep the chunk grid.
bool balanced_walk_fits(const Facts& f, const TileGeometry& g) {
  return f.B * f.H_kv * g.kv_tiles < (int64_t{1} << 30) && g.kv_tiles <= 32768;
}

void make_persistent_grid(KernelStage& attention, const Facts& f, int64_t ctas_per_sm) {
  attention.grid = {ctas_per_sm * f.device.sm_count, 1, 1};
  attention.persistent = true;
}

Status add_attention_stages(Derived& out, const Facts& f, const CapabilityRow& row, const Decision& d,
                            const TileGeometry& g, KernelSpec spec, int64_t smem_bytes) {
  for (const Status& s :
       {check_sdpa_int32(f, row, g.packed_rows),
        check_grid_dim(row, "attention", 'x', g.q_tiles,
                       fmt::format("row tiles = ceil({} packed rows / {})", g.packed_rows, d.tile.q)),
        check_grid_dim(row, "attention", 'y', f.H_kv, "H_kv"),
        check_grid_dim(row, "attention", 'z', f.B * d.split_kv,
                       fmt::format("B x split_kv = {} x {}", f.B, d.split_kv))})
    if (!s.ok()) return s;
  KernelStage attention;
  attention.role = "attention";
  attention.spec = std::move(spec);
  attention.grid = {g.q_tiles, f.H_kv, f.B * d.split_kv};
  attention.block = g.threads;
  attention.smem_bytes = smem_bytes;
  out.stages.push_back(std::move(attention));
  if (!writes_partials(f, d)) return Status::success();
  Result<KernelStage> combine = combine_stage(f, row, f.device.arch_name());
  if (!combine.ok()) return combine.status();
  out.stages.push_back(combine.value());
  return Status::success();
}

void fill_combine_params(const Facts& f, const Config& c, const Bindings& b, StageParams& out, size_t index) {
  if (!writes_partials(f, c.decision)) return;
  const CombineParams combine = combine_params(f, c, b);
  std::memcpy(out[index].bytes, &combine, sizeof(combine));
}

}  // namespace rime::engines
