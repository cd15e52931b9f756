// analyze(): the one place that reads a graph to derive what every later stage needs.
#include <fmt/format.h>

#include "graph/geometry.hpp"
#include "rime/inspect/facts.hpp"
#include "status_macros.hpp"

namespace rime {

std::string MaskFacts::describe() const {
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : "+") + part; };
  if (causal) add("causal");
  if (window_left) add(fmt::format("window({})", *window_left));
  if (band_right) add(fmt::format("band({})", *band_right));
  if (padding) add("padding");
  if (s.empty()) return "none";
  if ((causal || window_left || band_right) && bottom_right) s += " (bottom-right)";
  return s;
}

std::string Facts::o_format() const {
  if (o_block_scale == 16) return "NVFP4";
  if (o_block_scale == 32) return "MXFP8";
  return std::string(to_string(o().dtype));
}

namespace {
TensorFacts tensor_facts(const TensorDesc& t) {
  TensorFacts f;
  f.bound = true;
  f.uid = t.uid;
  f.name = t.name;
  f.dtype = t.dtype;
  f.dims = t.dims;
  f.strides = t.strides;
  f.storage_bytes = tensor_storage_bytes(t);
  f.layout = classify_layout(t.dims, t.strides);
  // 16-byte vectors need every stride but the unit one to be a multiple of 16 bytes.
  const int bits = bits_of(t.dtype);
  for (size_t i = 0; i + 1 < t.strides.size(); ++i)
    if (t.dims[i] > 1 && (t.strides[i] * bits) % 128 != 0) f.aligned16 = false;
  if ((t.dims.back() * bits) % 128 != 0) f.aligned16 = false;
  return f;
}
}  // namespace

Result<Facts> analyze(const Graph& graph, const DeviceDesc& device) {
  RIME_RETURN_IF_ERROR(validate(graph));
  const SdpaOp& op = *graph.op();
  const SdpaAttributes& a = op.attributes;
  const TensorDesc &q = *graph.operand(Role::Q), &k = *graph.operand(Role::K), &v = *graph.operand(Role::V),
                   &o = *graph.operand(Role::O);
  Facts f;
  f.op = op.kind;
  f.B = q.dims[0];
  f.H_q = q.dims[1];
  f.S_q = q.dims[2];
  f.D_qk = q.dims[3];
  f.H_kv = k.dims[1];
  f.S_kv = k.dims[2];
  f.D_v = v.dims[3];
  f.group = f.H_q / f.H_kv;
  for (int r = 0; r < kRoleCount; ++r)
    if (const TensorDesc* t = graph.operand(static_cast<Role>(r))) f.tensors[r] = tensor_facts(*t);
  f.is_fp8 = op.kind == OpKind::SdpaFp8;
  f.is_mxfp8 = op.kind == OpKind::SdpaMxfp8;
  f.mask.causal = a.causal;
  f.mask.bottom_right = a.alignment == DiagonalAlignment::BottomRight;
  f.mask.window_left = a.window_left;
  f.mask.band_right = a.band_right;
  f.mask.padding = a.padding_mask;
  f.has_sink = graph.operand(Role::Sink) != nullptr;
  f.seq_start_q = graph.operand(Role::SeqStartQ) != nullptr;
  f.seq_start_kv = graph.operand(Role::SeqStartKv) != nullptr;
  f.wants_stats = graph.operand(Role::Stats) != nullptr;
  f.stats_log2 = a.stats_log2;
  f.wants_amax_s = graph.operand(Role::AmaxS) != nullptr;
  f.wants_amax_o = graph.operand(Role::AmaxO) != nullptr;
  if (const TensorDesc* sf = graph.operand(Role::SfO)) {
    f.o_block_scale = o.dtype == DataType::FP4_E2M1 ? 16 : 32;
    f.sf_o_layout = classify_sf_layout(sf->dims, sf->strides);
    f.sf_o_rows = sf->dims[2];
    f.sf_o_cols = sf->dims[3];
  }
  f.has_scale_o = graph.operand(Role::ScaleO) != nullptr;
  for (Role r : {Role::DescaleQ, Role::DescaleK, Role::DescaleV})
    if (const TensorDesc* d = graph.operand(r); d && d->dims[0] * d->dims[1] > 1) f.per_head_descales = true;
  if (const TensorDesc* cu = graph.operand(Role::CuSeqlensQ)) {
    f.ragged_q = true;
    f.B = cu->dims[0] - 1;
    f.T_q = q.dims[2];
    f.S_q = a.max_seqlen_q.value_or(f.T_q);
  }
  if (graph.operand(Role::CuSeqlensKv)) {
    f.ragged_kv = true;
    f.T_kv = k.dims[2];
    f.S_kv = a.max_seqlen_kv.value_or(f.T_kv);
  }
  if (const TensorDesc* table = graph.operand(Role::PageTable)) {
    f.paged = true;
    f.page_size = k.dims[2];
    f.num_pages = k.dims[0];
    f.max_pages = table->dims[1];
    f.S_kv = f.max_pages * f.page_size;
  }
  f.decode = f.S_q == 1;  // after a ragged Q's S_q (max_seqlen_q)
  // Split-KV recombines normalized partials through their LSE, which every kernel can produce. Amax_S is the
  // exception: each split normalizes P by its own l, so a max over partial P over-reports, and recovering it
  // would need per-split row maxima in the workspace, which no engine writes.
  if (f.wants_amax_s) {
    f.split_ineligible_reason = "Amax_S is requested: a max over per-split P over-reports the recombined P";
  } else {
    f.split_eligible = true;
  }
  f.attn_scale = effective_attn_scale(graph);
  f.logit_softcap = a.logit_softcap.value_or(0.0f);
  f.q_quantization = a.q_quantization;
  f.pinned_split = a.split_kv;
  f.pinned_tile = a.tile;
  f.device = device;
  return f;
}

}  // namespace rime
