// sdpa_sm90: the online softmax of one KV tile in a consumer's registers (scores of 64 rows x kN keys, two rows per
// thread: the wgmma accumulator layout).
#pragma once

#include "common/attention.cuh"

namespace rime_dev {
namespace sm90 {

// The running max of a row before its first live key (log2 units): finite, so that the softmax needs no guard
// against exp2(-inf - -inf). -FLT_MAX is at or below every finite scaled score, so a row's first live key always
// moves the max (alpha 0), and exp2(masked - -FLT_MAX) is exp2(-inf), 0. A row with no live key keeps l = 0, which
// the epilogue reads as such.
constexpr float kNoKeyMax = -3.40282347e38f;

// log2(kPScale): FP8 P comes out of exp2 already on kPScale (one FFMA and one MUFU per score, no FMUL before
// the pack); l_run then carries the same factor, which the kernel removes once after the last tile.
constexpr float kLog2PScale = 8.807354922057604f;

// mx[0] = the max of mx[0 .. 2 kWidth), pairwise: log2(2 kWidth) dependent FMNMX (a template instance per level,
// so that the array stays in registers: a loop over the levels left it in local memory).
template <int kWidth, int kN>
__device__ __forceinline__ void max_tree(float (&mx)[kN]) {
  if constexpr (kWidth >= 1) {
#pragma unroll
    for (int n = 0; n < kWidth; ++n) mx[n] = fmaxf(mx[n], mx[n + kWidth]);
    max_tree<kWidth / 2>(mx);
  }
}

// The online softmax over one KV tile, on raw scores: s * mul[r] is row r's score in log2 units (mul > 0, so the
// largest raw score is the largest scaled one: the max runs on raw s and the scale rides in the exponent's
// FFMA; a row's own factor, a 16-bit Q's power of two on the FP8 kernel, rides there too). Masked scores are -inf
// in s. Per element: FMNMX, FFMA, MUFU.EX2, FADD; the maxima as below, the sums in two chains for ILP. Leaves
// P * 2^log2_p_scale in s, O's factors in alpha; m_run stays in log2 units and must start at kNoKeyMax (from -inf, a
// row with no live key yet would take exp2(-inf - -inf), NaN).
// kRowSums false: l_run is left alone (the caller sums P otherwise: rime_sm90::vt_sum_rows).
// kSlack > 0: the running max moves only when a tile's max passes it by more than kSlack (log2 units), so that most
// tiles leave O's rows as they are (alpha exactly 1, which the caller's rescale skips); P then reaches up to
// 2^kSlack times its scale (FlashAttention-4's conditional rescale). m_run is then not the row's max.
template <int kNT, bool kRowSums = true, int kSlack = 0>
__device__ __forceinline__ void online_softmax_raw(float (&s)[kNT][4], float (&m_run)[2], float (&l_run)[2],
                                                   const float (&mul)[2], float log2_p_scale, float (&alpha)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    // The row's max over the tile, from its first pairs, not from -inf: ptxas keeps an FMNMX against -inf
    // (fmaxf(-inf, NaN) is -inf, not NaN). 64-key tiles (kNT 8): a pairwise tree of the thread's 16 scores, 4
    // dependent FMNMX where two chains take 5; H200, A/B of 3 rounds in two calls: FP8 B1 H32 S16384 D 128 0.943x and
    // 0.959x the time, the other 64-key rows 0.995x-1.002x. Wider tiles keep two chains: the tree measured
    // 1.004x-1.014x on their rows (FP8 D 64 and D 256, the paged prefill, BF16 D 64).
    float m_thread;
    if constexpr (kNT == 8) {
      float mx[kNT];
#pragma unroll
      for (int n = 0; n < kNT; ++n) mx[n] = fmaxf(s[n][2 * r], s[n][2 * r + 1]);
      max_tree<kNT / 2>(mx);
      m_thread = mx[0];
    } else {
      static_assert(kNT >= 2 && kNT % 2 == 0, "two max chains of whole pairs");
      float mx0 = fmaxf(s[0][2 * r], s[0][2 * r + 1]), mx1 = fmaxf(s[1][2 * r], s[1][2 * r + 1]);
#pragma unroll
      for (int n = 2; n < kNT; n += 2) {
        mx0 = fmaxf(mx0, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
        mx1 = fmaxf(mx1, fmaxf(s[n + 1][2 * r], s[n + 1][2 * r + 1]));
      }
      m_thread = fmaxf(mx0, mx1);
    }
    const float m_tile = quad_max(m_thread) * mul[r];
    float m_new;
    if constexpr (kSlack > 0) m_new = m_tile > m_run[r] + float(kSlack) ? m_tile : m_run[r];
    else m_new = fmaxf(m_run[r], m_tile);
    // m_run starts at kNoKeyMax, not -inf, so m_new is finite even when every key so far is masked: exp2 of a
    // masked score (-inf) is 0 and alpha is 1 (then 0 at the row's first live key), with no per-row guard.
    alpha[r] = exp2_approx(m_run[r] - m_new);
    m_run[r] = m_new;
    const float neg_bias = log2_p_scale - m_new;
    float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
    for (int n = 0; n < kNT; ++n) {
      const float p0 = exp2_approx(fmaf(s[n][2 * r], mul[r], neg_bias));
      const float p1 = exp2_approx(fmaf(s[n][2 * r + 1], mul[r], neg_bias));
      s[n][2 * r] = p0;
      s[n][2 * r + 1] = p1;
      if constexpr (kRowSums) {
        if (n & 1) sum1 += p0 + p1;
        else sum0 += p0 + p1;
      }
    }
    if constexpr (kRowSums) l_run[r] = l_run[r] * alpha[r] + (sum0 + sum1);
  }
}

}  // namespace sm90
}  // namespace rime_dev
