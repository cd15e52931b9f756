// Cycles of the FP8 kernels' per-tile softmax as they compile it (engines/sdpa_sm90/softmax.cuh: online_softmax_raw
// over S of 64 x 128 keys per warpgroup, then pack_p_fp8), for one, two and three warps on each SM sub-partition,
// against the MUFU floor (66 MUFU.EX2 per thread per tile: 528 cycles per warp at 4 per clock per sub-partition).
// In the ping-pong a consumer's softmax runs while the other consumer waits on its wgmmas: one warp per
// sub-partition (and the producer's). Variants: 0 the kernel's; 1 both rows' steps interleaved; 2 row 1's max
// chained after row 0's first exponential (the order exp/ws-softmax-chain gave the kernels); 3 the kernel's
// without the pack. Results and what they meant for the kernels: docs/perf-history.md (v18).
//   nvcc -arch=sm_90a -O3 -std=c++17 -I engines -o softmax tools/ubench/softmax.cu && ./softmax
#include <cstdio>

#include "sdpa_sm90/kernel.cuh"
#include "ubench.h"

constexpr int kNT = 16, kIters = 2048;

// Variant 1: the two rows' maxima, shuffles and exponentials interleaved (row inner), four sum chains; the same
// arithmetic per score as online_softmax_raw.
__device__ __forceinline__ void softmax_rows_interleaved(float (&s)[kNT][4], float (&m_run)[2], float (&l_run)[2],
                                                         float mul, float log2_p_scale, float (&alpha)[2]) {
  using namespace rime_dev;
  float mx[2][2];
#pragma unroll
  for (int r = 0; r < 2; ++r) mx[r][0] = mx[r][1] = neg_inf();
#pragma unroll
  for (int n = 0; n < kNT; ++n)
#pragma unroll
    for (int r = 0; r < 2; ++r) mx[r][n & 1] = fmaxf(mx[r][n & 1], fmaxf(s[n][2 * r], s[n][2 * r + 1]));
  float neg_bias[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float m_tile = quad_max(fmaxf(mx[r][0], mx[r][1])) * mul;
    const float m_new = fmaxf(m_run[r], m_tile);
    const float m_use = m_new == neg_inf() ? 0.f : m_new;
    alpha[r] = exp2_approx(m_run[r] - m_use);
    m_run[r] = m_new;
    neg_bias[r] = log2_p_scale - m_use;
  }
  float sum[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
#pragma unroll
  for (int n = 0; n < kNT; ++n)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float p0 = exp2_approx(fmaf(s[n][2 * r], mul, neg_bias[r]));
      const float p1 = exp2_approx(fmaf(s[n][2 * r + 1], mul, neg_bias[r]));
      s[n][2 * r] = p0;
      s[n][2 * r + 1] = p1;
      sum[r][n & 1] += p0 + p1;
    }
#pragma unroll
  for (int r = 0; r < 2; ++r) l_run[r] = l_run[r] * alpha[r] + (sum[r][0] + sum[r][1]);
}

// Variant 2: online_softmax_raw with row 1's max started from a value that depends on row 0's first exponential
// (fma(p, 0, -inf): -inf, or NaN, which the max ignores), so that ptxas cannot hoist row 1's max and shuffles above
// row 0's exponentials: row 0's max, shuffles and exponentials start as soon as possible, and row 1's max fills the
// issue slots between row 0's MUFUs.
__device__ __forceinline__ void softmax_row_chained(float (&s)[kNT][4], float (&m_run)[2], float (&l_run)[2],
                                                    float mul, float log2_p_scale, float (&alpha)[2]) {
  using namespace rime_dev;
  float after_row0 = neg_inf();
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float mx0 = r == 0 ? neg_inf() : after_row0, mx1 = neg_inf();
#pragma unroll
    for (int n = 0; n < kNT; n += 2) {
      mx0 = fmaxf(mx0, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
      if (n + 1 < kNT) mx1 = fmaxf(mx1, fmaxf(s[n + 1][2 * r], s[n + 1][2 * r + 1]));
    }
    const float m_tile = quad_max(fmaxf(mx0, mx1)) * mul;
    const float m_new = fmaxf(m_run[r], m_tile);
    const float m_use = m_new == neg_inf() ? 0.f : m_new;
    alpha[r] = exp2_approx(m_run[r] - m_use);
    m_run[r] = m_new;
    const float neg_bias = log2_p_scale - m_use;
    float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
    for (int n = 0; n < kNT; ++n) {
      const float p0 = exp2_approx(fmaf(s[n][2 * r], mul, neg_bias));
      const float p1 = exp2_approx(fmaf(s[n][2 * r + 1], mul, neg_bias));
      s[n][2 * r] = p0;
      s[n][2 * r + 1] = p1;
      if (r == 0 && n == 0) after_row0 = fmaf(p0, 0.f, neg_inf());
      if (n & 1) sum1 += p0 + p1;
      else sum0 += p0 + p1;
    }
    l_run[r] = l_run[r] * alpha[r] + (sum0 + sum1);
  }
}

template <int kVariant>
__global__ void softmax_kernel(unsigned* out, long long* cycles, float mul) {
  using namespace rime_dev;
  float s[kNT][4];
#pragma unroll
  for (int n = 0; n < kNT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[n][e] = float((threadIdx.x * 7 + n * 13 + e * 5) % 97) * 0.25f;
  float m_run[2] = {neg_inf(), neg_inf()}, l_run[2] = {0.f, 0.f};
  unsigned acc = 0;
  __syncthreads();
  const long long t0 = clock64();
  for (int it = 0; it < kIters; ++it) {
    // A fresh S each tile as far as the compiler knows (no instructions: the registers are declared rewritten).
#pragma unroll
    for (int n = 0; n < kNT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(s[n][e]));
    float alpha[2];
    if constexpr (kVariant == 0 || kVariant == 3) {
      const float row_mul[2] = {mul, mul};
      sm90::online_softmax_raw(s, m_run, l_run, row_mul, sm90::kLog2PScale, alpha);
    } else if constexpr (kVariant == 1) {
      softmax_rows_interleaved(s, m_run, l_run, mul, sm90::kLog2PScale, alpha);
    } else {
      softmax_row_chained(s, m_run, l_run, mul, sm90::kLog2PScale, alpha);
    }
    u32 pa[kNT / 4][4];
    if constexpr (kVariant == 3) {  // no pack: P's FP32 values stand in for its fragments
#pragma unroll
      for (int c = 0; c < kNT / 4; ++c)
#pragma unroll
        for (int k = 0; k < 4; ++k) pa[c][k] = __float_as_uint(s[4 * c + k][k]);
    } else {
#pragma unroll
      for (int c = 0; c < kNT / 4; ++c) pack_p_fp8<kNT, true>(s, c, pa[c]);
    }
    // Every word of P is used (an empty asm on them was not enough: nvcc kept 4 of the 32 F2FP).
#pragma unroll
    for (int c = 0; c < kNT / 4; ++c)
#pragma unroll
      for (int k = 0; k < 4; ++k) acc ^= pa[c][k];
    acc ^= __float_as_uint(alpha[0] + alpha[1]);
  }
  const long long t1 = clock64();
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc ^ __float_as_uint(l_run[0] + l_run[1] + m_run[0]);
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

int main() {
  int sms = 0;
  UBENCH_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  if (sms > 1024) sms = 1024;  // the cycle counts are read into an array of 1024
  unsigned* out;
  long long* cycles;
  UBENCH_CHECK(cudaMalloc(&out, sizeof(unsigned) * sms * 512));
  UBENCH_CHECK(cudaMalloc(&cycles, sizeof(long long) * sms));
  auto run = [&](auto kernel, const char* name) {
    for (int warps : {4, 8, 12}) {
      kernel<<<sms, 32 * warps>>>(out, cycles, 0.1f);
      kernel<<<sms, 32 * warps>>>(out, cycles, 0.1f);
      UBENCH_CHECK(cudaGetLastError());
      long long c[1024], mx = 0;
      UBENCH_CHECK(cudaMemcpy(c, cycles, sizeof(long long) * sms, cudaMemcpyDeviceToHost));
      for (int i = 0; i < sms; ++i) mx = c[i] > mx ? c[i] : mx;
      printf("%s, %d warp(s) per sub-partition: %.0f cycles per tile (MUFU floor %d)\n", name, warps / 4,
             double(mx) / kIters, 528 * warps / 4);
    }
  };
  run(softmax_kernel<0>, "online_softmax_raw + pack (the kernel's)");
  run(softmax_kernel<1>, "rows interleaved + pack");
  run(softmax_kernel<3>, "online_softmax_raw, no pack");
  run(softmax_kernel<2>, "row 1's max chained after row 0's first exp + pack");
  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}
