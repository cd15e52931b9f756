// The mma.sync engine's online softmax over one KV tile of S in the accumulator layout (attention.cuh).
#pragma once

#include "common/thread_rows.cuh"

namespace rime_dev {

// The online softmax over one KV tile of scores already in log2 units: moves the running max, rescales the row
// sums, leaves P = exp2(S - m) in s and the factor that O's rows must be multiplied by in alpha.
template <int kNT>
__device__ __forceinline__ void online_softmax(float (&s)[kNT][4], float (&m_run)[2], float (&l_run)[2],
                                               float (&alpha)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float mx = neg_inf();
#pragma unroll
    for (int n = 0; n < kNT; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
    mx = quad_max(mx);
    const float m_new = fmaxf(m_run[r], mx);
    const float m_use = m_new == neg_inf() ? 0.f : m_new;  // all keys masked so far: keep exp2 finite
    alpha[r] = exp2_approx(m_run[r] - m_use);
    m_run[r] = m_new;
    float sum = 0.f;
#pragma unroll
    for (int n = 0; n < kNT; ++n)
#pragma unroll
      for (int e = 2 * r; e < 2 * r + 2; ++e) {
        s[n][e] = exp2_approx(s[n][e] - m_use);
        sum += s[n][e];
      }
    l_run[r] = l_run[r] * alpha[r] + sum;
  }
}

// One KV tile of the online softmax: scales S (kNT 8-key blocks from key0) to log2 units, masks keys outside
// each row's bounds when `edge`, then online_softmax. kSoftcap (SPEC section 2): each score becomes
// cap_out * tanh(s * cap_in) instead, cap_in = scale_log2 / (log2(e) c) and cap_out = c log2(e) for the cap c.
template <int kNT, bool kSoftcap = false>
__device__ __forceinline__ void softmax_step(float (&s)[kNT][4], float (&m_run)[2], float (&l_run)[2],
                                             const ThreadRows& rows, int key0, float scale_log2, bool edge, int t,
                                             float (&alpha)[2], float cap_in = 0.f, float cap_out = 0.f) {
#pragma unroll
  for (int n = 0; n < kNT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = e / 2, j = key0 + n * 8 + 2 * t + (e & 1);
      float v = kSoftcap ? cap_out * tanh_approx(s[n][e] * cap_in) : s[n][e] * scale_log2;
      if (edge && key_outside(rows, r, j)) v = neg_inf();
      s[n][e] = v;
    }
  online_softmax(s, m_run, l_run, alpha);
}

// O's rows (in the accumulator layout) multiplied by the online softmax's factors.
// Zeroes an array of fp32 accumulator fragments ([tiles][4]: O before the first tile, S before its first mma).
template <int kTiles>
__device__ __forceinline__ void zero_fragments(float (&x)[kTiles][4]) {
#pragma unroll
  for (int n = 0; n < kTiles; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) x[n][e] = 0.f;
}

template <int kDT>
__device__ __forceinline__ void rescale_rows(float (&o_acc)[kDT][4], const float (&alpha)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int d = 0; d < kDT; ++d) {
      o_acc[d][2 * r] *= alpha[r];
      o_acc[d][2 * r + 1] *= alpha[r];
    }
}

// softmax_step, then O rescaled by each row's factor.
template <int kNT, int kDT, bool kSoftcap = false>
__device__ __forceinline__ void softmax_tile(float (&s)[kNT][4], float (&o_acc)[kDT][4], float (&m_run)[2],
                                             float (&l_run)[2], const ThreadRows& rows, int key0, float scale_log2,
                                             bool edge, int t, float cap_in = 0.f, float cap_out = 0.f) {
  float alpha[2];
  softmax_step<kNT, kSoftcap>(s, m_run, l_run, rows, key0, scale_log2, edge, t, alpha, cap_in, cap_out);
  rescale_rows(o_acc, alpha);
}

}  // namespace rime_dev
