// Internal: the double-precision CPU reference of SPEC sections 2-3, over host copies of the graph's tensors.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "rime/inspect/facts.hpp"
#include "rime/graph.hpp"

namespace rime::reference {

// Host bytes of each tensor, by uid, laid out as its TensorDesc says.
using HostTensors = std::map<int64_t, std::vector<uint8_t>>;

struct RowResult {
  std::vector<double> o;  // D_v values, descale_v applied, scale_o NOT applied
  double lse = 0;         // natural log; -inf for a dead row (sink value with a sink and no live key)
  double max_p = 0;       // max_j P_ij (for Amax_S)
  bool live = false;      // the row is inside seq_len_q (padded rows write O = 0, LSE = -inf)
};

// One row (b, h, i). With `kv_range` set, only keys in [first, last) take part and the sink is left out: the
// partial a split writes (SPEC section 3).
struct KvRange {
  int64_t first, last;
};
RowResult attention_row(const Graph& graph, const Facts& facts, const HostTensors& tensors, int64_t b, int64_t h,
                        int64_t i, const KvRange* kv_range = nullptr);

// The same row computed as the FP8 kernels compute it (a diagnostic, not the reference): KV tiles of `kv_tile`
// keys from key 0, a running row max per tile, P = exp(s - m_run) held in E4M3 on the fixed scale 448 for the
// P.V product while the row sum takes P unquantized, then O / l. `p_terms` 2: P held as two E4M3 terms, hi and
// the rounding error of hi times 16 (MXFP8 inputs, attention.cuh). With it, an element outside SPEC section 10's
// tolerance can be told apart: a kernel error, or the rounding of P that SPEC section 2 allows.
RowResult attention_row_fp8_p(const Graph& graph, const Facts& facts, const HostTensors& tensors, int64_t b,
                              int64_t h, int64_t i, int kv_tile, int p_terms = 1);

// q_quantization e4m3_per_row (docs/graph-json.md): one row of Q rounded in place to E4M3 on its power-of-two scale
// 2^e, e the exponent that puts the row's largest magnitude in (224, 448] (0 for a row of zeros; within
// [-126, 126]), each value then e4m3(q 2^e) 2^-e, as the kernels round it.
void round_q_row_e4m3(std::vector<double>& row);

// The keys of row i that no mask removes: [lo, hi) (hi <= lo: none).
KvRange unmasked_keys(const Graph& graph, const Facts& facts, const HostTensors& tensors, int64_t b, int64_t i);

// SPEC section 3's combine of per-split partials (O_k, LSE_k) plus the sink, for one row.
RowResult combine_rows(const std::vector<RowResult>& partials, const double* sink);

// Element offset of [b, h, s, d] in a tensor.
inline int64_t offset_of(const TensorDesc& t, int64_t b, int64_t h, int64_t s, int64_t d) {
  return b * t.strides[0] + h * t.strides[1] + s * t.strides[2] + d * t.strides[3];
}

// Sequence b on one side (Q/O/Stats, or K/V): the row of its first token in the side's tensors and its length
// as the caller gave it (not clamped). Ragged (cu_seqlens): tokens cu[b] .. cu[b + 1] of [1, H, T, D]; padding:
// rows seq_start[b] .. seq_start[b] + seq_len[b] of batch b (start 0 without seq_start); else rows 0 .. S of batch
// b. The reference's row index i is the sequence's: row first + i of the tensor.
struct SeqExtent {
  int64_t batch = 0;  // the tensor's dims[0] index: b, or 0 for a ragged side
  int64_t first = 0;  // the row (dims[2] index) of the sequence's first token
  int64_t length = 0;
};
SeqExtent q_extent(const Graph& graph, const Facts& facts, const HostTensors& tensors, int64_t b);
SeqExtent kv_extent(const Graph& graph, const Facts& facts, const HostTensors& tensors, int64_t b);

// Element offset of (row i of sequence b, head h, d) on a side: offset_of at the sequence's own rows.
inline int64_t seq_offset(const TensorDesc& t, const SeqExtent& e, int64_t h, int64_t i, int64_t d) {
  return offset_of(t, e.batch, h, e.first + i, d);
}

}  // namespace rime::reference
