// Analyzer facts (SPEC section 7): one flat, immutable value per graph, computed once. Rows, heuristics and
// engines read only Facts, never the graph: every operand's uid, dims and strides are here, so that an engine
// fills its parameter blocks from Facts, the decision and the caller's buffers alone.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rime/device.hpp"
#include "rime/graph.hpp"
#include "rime/status.hpp"
#include "rime/types.hpp"

namespace rime {

struct MaskFacts {
  bool causal = false;
  // The diagonal shifted by S_kv - S_q; with per-sequence lengths by seq_len_kv[b] - seq_len_q[b] in each sequence.
  bool bottom_right = false;
  std::optional<int64_t> window_left;  // sliding window
  std::optional<int64_t> band_right;   // diagonal band right bound (causal is band_right 0)
  bool padding = false;                // per-batch seq lens
  bool any() const { return causal || window_left || band_right || padding; }
  // "none", or the features joined by '+': "causal+window+padding (bottom-right)"
  std::string describe() const;
};

// One operand slot of the op. `bound` is false for a role the graph leaves empty; every other field is then
// its default.
struct TensorFacts {
  bool bound = false;
  int64_t uid = 0;
  std::string name;
  DataType dtype = DataType::FP32;
  std::vector<int64_t> dims, strides;  // strides in elements (FP4: in FP4 elements)
  int64_t storage_bytes = 0;           // bytes the tensor's storage spans
  Layout layout = Layout::Bhsd;        // rank-4 tensors
  bool aligned16 = true;  // every non-unit stride is a multiple of 16 bytes (vector loads possible)
};

struct Facts {
  OpKind op = OpKind::Sdpa;
  int64_t B = 0, H_q = 0, H_kv = 0, group = 0, S_q = 0, S_kv = 0, D_qk = 0, D_v = 0;
  std::array<TensorFacts, kRoleCount> tensors;  // by Role
  bool is_fp8 = false;    // sdpa_fp8
  bool is_mxfp8 = false;  // sdpa_mxfp8
  MaskFacts mask;
  bool has_sink = false;
  bool wants_stats = false;
  bool stats_log2 = false;
  bool wants_amax_s = false;
  bool wants_amax_o = false;
  int o_block_scale = 0;                // 0, 16 (NVFP4) or 32 (MXFP8)
  std::optional<SfLayout> sf_o_layout;  // when o_block_scale != 0
  int64_t sf_o_rows = 0, sf_o_cols = 0;  // R and C of sf_o
  bool has_scale_o = false;
  // descale_q, descale_k or descale_v is per (batch, kv head) ([B, H_kv, 1, 1]) rather than per tensor.
  bool per_head_descales = false;
  bool decode = false;  // S_q == 1
  // Paged K/V (a page_table is bound): K and V are pools of num_pages pages of page_size keys; S_kv is then the
  // longest sequence the table can address, max_pages x page_size (each sequence's length is seq_len_kv[b]).
  bool paged = false;
  int64_t page_size = 0, num_pages = 0, max_pages = 0;
  // Ragged (THD) sides (cu_seqlens_q / cu_seqlens_kv bound): the side's tensors are token-major [1, H, T, D] with
  // T tokens; B comes from the offsets, and S_q / S_kv are the longest sequence a side may hold (max_seqlen_q /
  // max_seqlen_kv, default T).
  bool ragged_q = false, ragged_kv = false;
  int64_t T_q = 0, T_kv = 0;
  // Per-sequence starts (seq_start_q / seq_start_kv bound; SPEC section 2): a side's sequences begin at their
  // own row or key position, not at 0 (left padding).
  bool seq_start_q = false, seq_start_kv = false;
  // Context parallelism (PlanOptions::context_parallel): world > 0 when the plan's K/V are one rank's shard; its
  // split partials go to slot rank of world x split_kv partials, which the combine merges after an all-gather.
  struct ContextParallelFacts {
    int rank = 0, world = 0;
  } context_parallel;
  bool split_eligible = false;
  std::string split_ineligible_reason;  // empty when eligible
  float attn_scale = 1.0f;
  float logit_softcap = 0.0f;  // the cap c of c * tanh(s / c); 0: none
  // A 16-bit Q over FP8 K/V rounded to E4M3 per row before Q.K^T (SdpaAttributes::q_quantization).
  QQuantization q_quantization = QQuantization::None;
  std::optional<int> pinned_split;
  std::optional<TileShape> pinned_tile;
  DeviceDesc device;

  const TensorFacts& operand(Role role) const { return tensors[static_cast<int>(role)]; }
  bool has(Role role) const { return operand(role).bound; }
  const TensorFacts& q() const { return operand(Role::Q); }
  // sdpa_fp8 with a 16-bit Q over FP8 K/V (an FP8 K/V cache read by a BF16/FP16 model).
  bool q16_over_fp8_kv() const { return is_fp8 && operand(Role::Q).dtype != operand(Role::K).dtype; }
  const TensorFacts& k() const { return operand(Role::K); }
  const TensorFacts& v() const { return operand(Role::V); }
  const TensorFacts& o() const { return operand(Role::O); }
  // The O format rows compare against: the O dtype, or "NVFP4" / "MXFP8" for block-scaled O.
  std::string o_format() const;
};

// Derives the facts of a graph for a device. Validates the graph first (InvalidGraph on failure): this is the
// one validation a plan build runs.
Result<Facts> analyze(const Graph& graph, const DeviceDesc& device);

}  // namespace rime
