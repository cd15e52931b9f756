// sdpa_mma: the tensor-core steps of one KV tile for one warp's 16 rows: S = Q K^T (MXFP8 inputs scaled per k step),
// the FP8 V tile transposed in shared memory, O += P V for 16-bit inputs and for FP8 through that transpose, the MXFP8
// scales of a KV tile, and the FP8 decode tiles' O^T back to the accumulator layout the epilogue takes (their
// O^T += V^T P^T stays in kernel.cuh's loop). Some arrays a step writes are the caller's: sdpa_mma_tile says which
// and why.
#pragma once

#include "sdpa_mma/config.cuh"

namespace rime_dev {
namespace mma_engine {

// MXFP8: KV tile kt's K and V scales as fp32, K [key][k step] and V [d][32-key block]; keys past S_kv (zero-filled
// K/V rows) get 0, never the pads of SF_K / SF_V.
template <class C>
__device__ __forceinline__ void stage_mx_scales(const SdpaParams& p, const u8* sf_k_plane, const u8* sf_v_plane,
                                                float* sSk, float* sSv, int kt, int tid) {
  for (int n = tid; n < C::kTileKv * C::kKSteps; n += C::kThreads) {
    const int j = kt * C::kTileKv + n / C::kKSteps;
    sSk[n] = j < p.S_kv ? rime_bs::ue8m0_value(sf_k_plane[rime_bs::f8_128x4_offset(j, n % C::kKSteps, p.sf_k_cols)]) : 0.f;
  }
  for (int n = tid; n < C::kDv * C::kVBlocks; n += C::kThreads) {
    const int kvb = kt * C::kVBlocks + n % C::kVBlocks;
    sSv[n] = kvb * 32 < p.S_kv ? rime_bs::ue8m0_value(sf_v_plane[rime_bs::f8_128x4_offset(n / C::kVBlocks, kvb, p.sf_v_cols)])
                               : 0.f;
  }
}

// The FP8 V tile tv transposed into sVt (keys permuted, see kernel.cuh's header comment), 4 keys x 4 columns per
// step; w holds a step's four words.
template <class C>
__device__ __forceinline__ void transpose_v_to_vt(const u8* tv, u8* sVt, int tid, u32 (&w)[4]) {
  constexpr int kTileKv = C::kTileKv, kRowV = C::kRowV, kRowVt = C::kRowVt;
  for (int blk = tid; blk < (kTileKv / 4) * (C::kDv / 4); blk += C::kThreads) {
    const int p0 = (blk % (kTileKv / 4)) * 4, d0 = (blk / (kTileKv / 4)) * 4;
    const int base = (p0 / 16) * 16, tq = (p0 % 16) / 4;
    for (int i = 0; i < 4; ++i) {
      const int kv = base + 8 * (i >> 1) + 2 * tq + (i & 1);
      w[i] = *reinterpret_cast<const u32*>(tv + kv * kRowV + d0);
    }
    const u32 lo01 = __byte_perm(w[0], w[1], 0x5140), lo23 = __byte_perm(w[2], w[3], 0x5140);
    const u32 hi01 = __byte_perm(w[0], w[1], 0x7362), hi23 = __byte_perm(w[2], w[3], 0x7362);
    *reinterpret_cast<u32*>(sVt + (d0 + 0) * kRowVt + p0) = __byte_perm(lo01, lo23, 0x5410);
    *reinterpret_cast<u32*>(sVt + (d0 + 1) * kRowVt + p0) = __byte_perm(lo01, lo23, 0x7632);
    *reinterpret_cast<u32*>(sVt + (d0 + 2) * kRowVt + p0) = __byte_perm(hi01, hi23, 0x5410);
    *reinterpret_cast<u32*>(sVt + (d0 + 3) * kRowVt + p0) = __byte_perm(hi01, hi23, 0x7632);
  }
}

// S = Q K^T for this warp's 16 rows (warp_q, or q_frag where Q stays in registers) and the kTileKv keys of tk; part
// holds MXFP8's per-k-step partials.
template <class C>
__device__ __forceinline__ void qk_scores(float (&s)[C::kNT][4], const u8* warp_q,
                                          const u32 (&q_frag)[C::kQFragSteps][4], const u8* tk,
                                          const float (&q_scale)[2][C::kMxKSteps], const float* sSk, int lane, int t,
                                          float (&part)[2][4]) {
  constexpr int kIn = C::kIn, kRowQ = C::kRowQ, kRowK = C::kRowK, kKSteps = C::kKSteps;
  zero_fragments(s);
  for (int kk = 0; kk < kKSteps; ++kk) {
    u32 a_local[4];
    if constexpr (!C::kQInRegs)
      ldmatrix_x4(a_local, warp_q + ((lane & 7) + ((lane >> 3) & 1) * 8) * kRowQ + kk * 32 + ((lane >> 4) & 1) * 16);
    const u32(&a)[4] = C::kQInRegs ? q_frag[C::kQInRegs ? kk : 0] : const_cast<const u32(&)[4]>(a_local);
    for (int jj = 0; jj < C::kNT / 2; ++jj) {
      u32 bk[4];
      ldmatrix_x4(bk, tk + (jj * 16 + (lane & 7) + ((lane >> 4) & 1) * 8) * kRowK + kk * 32 + ((lane >> 3) & 1) * 16);
      if constexpr (C::kMx) {
        // Two 8-key tiles at a time into zeroed partials (few live registers), then scaled and added.
        zero_fragments(part);
        mma<kIn, kIn>(part[0], a, bk[0], bk[1]);
        mma<kIn, kIn>(part[1], a, bk[2], bk[3]);
#pragma unroll
        for (int u = 0; u < 2; ++u)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int n = 2 * jj + u;
            s[n][e] += part[u][e] * (q_scale[e / 2][kk] * sSk[(n * 8 + 2 * t + (e & 1)) * kKSteps + kk]);
          }
      } else {
        mma<kIn, kIn>(s[2 * jj], a, bk[0], bk[1]);
        mma<kIn, kIn>(s[2 * jj + 1], a, bk[2], bk[3]);
      }
    }
  }
}

// FP8 O += P V through the transposed tile sVt; MXFP8 inputs scale each 32-key block's partial by V's scales.
// a / a_lo: P's fragment (two E4M3 terms for MXFP8); part / part_lo: the MXFP8 partials.
template <class C>
__device__ __forceinline__ void pv_fp8(float (&o_acc)[C::kDT][4], const float (&s)[C::kNT][4], const u8* sVt,
                                       const float* sSv, int g, int t, u32 (&a)[4], u32 (&a_lo)[C::kMx ? 4 : 1],
                                       float (&part)[4], float (&part_lo)[4]) {
  constexpr int kIn = C::kIn, kRowVt = C::kRowVt, kVBlocks = C::kVBlocks;
#pragma unroll
  for (int c = 0; c < C::kTileKv / 32; ++c) {
    // MXFP8 inputs carry P in two E4M3 terms (p_pack.cuh, pack_p_fp8_two_terms); the others in one.
    if constexpr (C::kMx) pack_p_fp8_two_terms(s, c, a, a_lo);
    else pack_p_fp8(s, c, a);
#pragma unroll
    for (int d = 0; d < C::kDT; ++d) {
      const u8* vrow = sVt + (d * 8 + g) * kRowVt + c * 32 + t * 4;
      const u32 b0 = *reinterpret_cast<const u32*>(vrow), b1 = *reinterpret_cast<const u32*>(vrow + 16);
      if constexpr (C::kMx) {
        part[0] = part[1] = part[2] = part[3] = 0.f;
        part_lo[0] = part_lo[1] = part_lo[2] = part_lo[3] = 0.f;
        mma<RIME_T_E4M3, kIn>(part, a, b0, b1);
        mma<RIME_T_E4M3, kIn>(part_lo, a_lo, b0, b1);
        const float s0 = sSv[(d * 8 + 2 * t) * kVBlocks + c], s1 = sSv[(d * 8 + 2 * t + 1) * kVBlocks + c];
        constexpr float kLo = 1.f / kPLoScale;
        o_acc[d][0] += (part[0] + part_lo[0] * kLo) * s0;
        o_acc[d][1] += (part[1] + part_lo[1] * kLo) * s1;
        o_acc[d][2] += (part[2] + part_lo[2] * kLo) * s0;
        o_acc[d][3] += (part[3] + part_lo[3] * kLo) * s1;
      } else {
        mma<RIME_T_E4M3, kIn>(o_acc[d], a, b0, b1);
      }
    }
  }
}

// 16-bit O += P V: P packed to the input type, V's fragments by ldmatrix.trans from the V tile tv.
template <class C>
__device__ __forceinline__ void pv_16bit(float (&o_acc)[C::kDT][4], const float (&s)[C::kNT][4], const u8* tv,
                                         int lane) {
  constexpr int kIn = C::kIn, kRowV = C::kRowV, kEB = C::kEB;
#pragma unroll
  for (int c = 0; c < C::kTileKv / 16; ++c) {
    u32 a[4];
    a[0] = pack2<kIn>(s[2 * c][0], s[2 * c][1]);
    a[1] = pack2<kIn>(s[2 * c][2], s[2 * c][3]);
    a[2] = pack2<kIn>(s[2 * c + 1][0], s[2 * c + 1][1]);
    a[3] = pack2<kIn>(s[2 * c + 1][2], s[2 * c + 1][3]);
    for (int dd = 0; dd < C::kDT / 2; ++dd) {
      u32 bv[4];
      ldmatrix_x4_trans(bv, tv + (c * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kRowV +
                                (dd * 16 + ((lane >> 4) & 1) * 8) * kEB);
      mma<kIn, kIn>(o_acc[2 * dd], a, bv[0], bv[1]);
      mma<kIn, kIn>(o_acc[2 * dd + 1], a, bv[2], bv[3]);
    }
  }
}

// The FP8 decode tiles' O^T (kernel.cuh) back to the accumulator layout the epilogue takes, through the K/V stages'
// shared memory sK (free: the main loop ended on a barrier and no copy is in flight).
template <class C>
__device__ __forceinline__ void ot_to_o_acc(float (&o_acc)[C::kDT][4], const float (&ot)[C::kOtTiles][2][4], u8* sK,
                                            int warp, int g, int t) {
  constexpr int kPitch = C::kDv + 4;  // floats
  static_assert(C::kTileQ * kPitch * 4 <= 2 * C::kTileKv * (C::kRowK + C::kRowV), "O^T staging fits in the K/V stages");
  float* staged = reinterpret_cast<float*>(sK) + warp * 16 * kPitch;  // this warp's 16 rows
#pragma unroll
  for (int m = 0; m < C::kDv / 16; ++m)
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        staged[(8 * n + 2 * t + (e & 1)) * kPitch + 32 * (m / 2) + 16 * (e / 2) + 2 * g + (m & 1)] = ot[m][n][e];
  __syncthreads();
#pragma unroll
  for (int d = 0; d < C::kDT; ++d)
#pragma unroll
    for (int e = 0; e < 4; ++e) o_acc[d][e] = staged[(g + 8 * (e / 2)) * kPitch + 8 * d + 2 * t + (e & 1)];
}

}  // namespace mma_engine
}  // namespace rime_dev
