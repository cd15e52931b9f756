// One batch's extents (its rows, its keys, where each sequence starts) and the dense row that holds a sequence's
// row: what every stage of the attention engines reads first.
#pragma once

#include "common/device.cuh"

namespace rime_dev {

// The valid extents of one batch: rows past seq_q are padding, keys past kv_limit are masked. diag_shift is the
// bottom-right alignment's shift for this batch: with per-batch lengths the batch's own seq_len_kv - seq_len_q
// (SPEC section 2, as cuDNN and FlashAttention's varlen: the last query of a sequence sees its last key), else
// the tensors' S_kv - S_q (0 for top-left). q_tok0 / kv_tok0: the row (dims[2] index) of the batch's first
// token in a ragged side's token-major tensors, or of its first position under per-sequence starts (clamped to
// [0, S], and the length to what lies past it, so that no start reads or writes outside the tensors), 0
// otherwise.
struct BatchExtent {
  int seq_q, kv_limit, right_bound;  // right_bound -1: no upper key bound beyond kv_limit
  int diag_shift;
  int q_tok0, kv_tok0;
};

// descale_q / k / v of (batch b, kv head h_kv): per tensor (strides 0) or per (batch, kv head).
__device__ __forceinline__ float descale_at(const float* d, const int (&stride)[2], int b, int h_kv) {
  return d[b * stride[0] + h_kv * stride[1]];
}

template <int kFeatures>
__device__ __forceinline__ BatchExtent batch_extent(const SdpaParams& p, int b) {
  constexpr bool kPadding = (kFeatures & RIME_F_PADDING) != 0;
  constexpr bool kRaggedQ = (kFeatures & RIME_F_RAGGED_Q) != 0, kRaggedKv = (kFeatures & RIME_F_RAGGED_KV) != 0;
  static_assert((!kRaggedQ && !kRaggedKv) || kPadding, "ragged sides have per-sequence lengths (padding)");
  BatchExtent e;
  constexpr bool kStarts = (kFeatures & RIME_F_STARTS) != 0;
  static_assert(!kStarts || kPadding, "per-sequence starts come with per-sequence lengths (padding)");
  e.q_tok0 = kRaggedQ ? p.cu_seqlens_q[b] : 0;
  e.kv_tok0 = kRaggedKv ? p.cu_seqlens_kv[b] : 0;
  const int len_q = kRaggedQ ? p.cu_seqlens_q[b + 1] - e.q_tok0 : (kPadding ? p.seq_len_q[b] : p.S_q);
  const int len_kv = kRaggedKv ? p.cu_seqlens_kv[b + 1] - e.kv_tok0 : (kPadding ? p.seq_len_kv[b] : p.S_kv);
  if constexpr (kStarts) {
    if (p.seq_start_q) e.q_tok0 = min(max(p.seq_start_q[b], 0), p.S_q);
    if (p.seq_start_kv) e.kv_tok0 = min(max(p.seq_start_kv[b], 0), p.S_kv);
  }
  e.seq_q = kPadding ? min(p.S_q - (kStarts ? e.q_tok0 : 0), len_q) : p.S_q;
  e.kv_limit = kPadding ? max(0, min(p.S_kv - (kStarts ? e.kv_tok0 : 0), len_kv)) : p.S_kv;
  e.right_bound = p.causal ? 0 : p.band_right;
  e.diag_shift = kPadding && p.bottom_right ? e.kv_limit - max(0, e.seq_q) : p.diag_shift;
  return e;
}

// The dense row (dims[2] index) of Q, O and Stats that holds the batch's row i: tok0 + i. Under per-sequence starts
// the rows past the sequence (i >= seq_q, written as empty rows) wrap around to the rows before its start, so that
// rows 0 .. S_q - 1 of the batch are each written once: dense row (start + i) mod S_q (start <= S_q, i < S_q).
template <int kFeatures>
__device__ __forceinline__ int q_token(const SdpaParams& p, int tok0, int i) {
  if constexpr ((kFeatures & RIME_F_STARTS) != 0) {
    const int r = tok0 + i;
    return r >= p.S_q ? r - p.S_q : r;
  } else {
    return tok0 + i;
  }
}

}  // namespace rime_dev
