// sdpa_sm90: warp-specialized Hopper forward for FP8 (E4M3/E5M2) and BF16/FP16, D 64, 128, 256, and D_qk 192
// with D_v 128 (MLA-style prefill).
//
// A CTA owns 64, 128 or 192 packed rows of one (batch, kv head) (GQA packs the q heads of a kv head into rows, as
// in the other engines) and is one producer and kC = 1, 2 or 3 consumer warpgroups (one: two CTAs per SM):
//   producer (warpgroup 0, 56 registers after setmaxnreg, 72 beside one FP8 consumer, 32 beside three 16-bit ones): one
//     thread issues TMA loads of K and V tiles into a ring of rime_sm90::kStages (2) stages guarded by mbarriers (k_full
//     / k_empty, v_full) (paged K/V: one box per page, the first warp's lanes loading the next tile's page ids); for
//     FP8 all 128 threads then transpose each V tile into V^T (FP8 wgmma takes B k-major only; by ldmatrix / stmatrix),
//     keys in P's register order, keys past the batch's valid length zeroed, and signal pv_full (paged FP8: the first
//     warp only issues, the other three transpose and release the raw V stage on v_empty); for 16-bit types V is used
//     as it lands (wgmma reads it N-major): the consumers wait for the TMA itself, or, with per-batch padding, for the
//     producer to zero the rows past the valid length and signal pv_full.
//   consumers (warpgroups 1 .. kC, 184 registers for one FP8 consumer, 224 for two, 152 for three FP8 and 160 for
//     three 16-bit ones): 64 rows each.
//     One consumer takes no turns (the SM's other CTA is its partner at the tensor cores). Per KV tile j a
//     consumer issues S(j) = Q K_j^T and, in the same batch, O += P(j-1) V_{j-1}; waits for S(j), runs the online
//     softmax on it, waits for P.V, rescales O and packs P(j). (ptxas schedules the wait for P.V near the top of
//     the softmax's block, so the exponentials do not overlap this consumer's own P.V; holding the wait below
//     them measured slower: docs/perf-history.md.) The consumers take turns issuing, 0, 1, (2,) 0, ... (a named
//     barrier per consumer's turn, ping-pong), so one's softmax runs while another's wgmmas use the tensor cores.
//     Of three consumers, one whose own rows need fewer of the CTA's KV tiles (none: rows past the end; causal: keys
//     past its rows' diagonal) takes ghost turns past them: its place in the ring and its barrier arrivals, no work.
//   Masked grids (without per-batch lengths) run their partial row tile first, so that it is the lightest.
// Q is loaded by each consumer for its own rows with cp.async into the same swizzled layout the TMA writes for
// K. The epilogue (normalisation, sink, Stats, Amax, every O format, split partials) is common/attention.cuh's.
//
// Shared-memory operands are stored as sub-tiles of rows of 128 bytes (64 for FP8 D 64) with the matching TMA /
// wgmma swizzle: the 16-byte chunk c of row r sits at c ^ (r % 8) (128-byte) or c ^ ((r / 2) % 4) (64-byte).
#pragma once

#include "common/attention.cuh"
#include "common/wgmma_ops.cuh"
#include "sdpa_sm90/layout.h"

namespace rime_dev {
namespace sm90 {

// ---- mbarriers, TMA, named barriers, register reallocation -------------------------------------------------

__device__ __forceinline__ void mbar_init(u64* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
// Adds `bytes` to the barrier's expected transaction count and arrives once (the producer, before its TMA).
__device__ __forceinline__ void mbar_expect_tx(u64* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u64* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(u64* bar, unsigned parity) {
  u32 done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(smem_addr(bar)), "r"(parity)
      : "memory");
  return done != 0;
}
// Waits until the phase of parity `parity` has completed (a fresh barrier is in phase 0: parity 1 passes).
__device__ __forceinline__ void mbar_wait(u64* bar, unsigned parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}
// One box of a 4-D tensor map (coordinates innermost first, in elements) into shared memory; completes on bar.
__device__ __forceinline__ void tma_load_4d(void* dst, const RimeTensorMap* map, int c0, int c1, int c2, int c3,
                                            u64* bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar))
      : "memory");
}
__device__ __forceinline__ void prefetch_tensor_map(const RimeTensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<u64>(map)) : "memory");
}
__device__ __forceinline__ void named_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_fence_all() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit_group() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Ties every accumulator register to this point: after a wgmma wait, the compiler may not move reads or writes
// of the accumulators above it (they would race with the asynchronous wgmma).
template <int M>
__device__ __forceinline__ void fence_operands(float (&x)[M][4]) {
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(x[m][e])::"memory");
}

// ---- shared-memory layouts and descriptors -----------------------------------------------------------------

// Byte offset of byte `b` of row `r` in a swizzled tile of kRowBytes-byte rows (128 or 64).
template <int kRowBytes>
__device__ __forceinline__ int swz(int r, int b) {
  constexpr int kShift = kRowBytes == 128 ? 0 : 1;
  constexpr int kMask = kRowBytes == 128 ? 7 : 3;
  return r * kRowBytes + ((((b >> 4) ^ ((r >> kShift) & kMask)) << 4) | (b & 15));
}
// K-major operand (rows of kRowBytes, the K dimension contiguous): 8-row groups kRowBytes * 8 apart (SBO), the
// swizzle of the row width; the start advances by 32 bytes per k step inside a row.
template <int kRowBytes>
__device__ __forceinline__ u64 desc_k_major(const void* p) {
  const u64 mode = kRowBytes == 128 ? 1 : 2;
  return ((u64(smem_addr(p)) & 0x3FFFF) >> 4) | (u64(1) << 16) | (u64((kRowBytes * 8) >> 4) << 32) | (mode << 62);
}
// N-major 16-bit operand (V as it lands: rows of keys, 64 d per 128-byte row, 128-byte swizzle): 8 keys (one
// swizzle atom) 1024 bytes apart (SBO), the next 64 d `lbo` bytes on (LBO: the next sub-tile).
__device__ __forceinline__ u64 desc_n_major_sw128(const void* p, int lbo) {
  return ((u64(smem_addr(p)) & 0x3FFFF) >> 4) | (u64(lbo >> 4) << 16) | (u64(1024 >> 4) << 32) | (u64(1) << 62);
}

// ---- the wgmmas of one KV tile -----------------------------------------------------------------------------

// S (64 x kN) = Q (64 x D, this warpgroup's rows) K^T, K-major both, one k step of 32 bytes at a time.
template <int kIn, int kN>
__device__ __forceinline__ void wgmma_qk(float (&s)[kN / 8][4], u64 a, u64 b, int acc) {
  if constexpr (kIn == RIME_T_E4M3) {
    if constexpr (kN == 64) wgmma_ss_m64n64_e4m3_e4m3(s, a, b, acc);
    else if constexpr (kN == 256) wgmma_ss_m64n256_e4m3_e4m3(s, a, b, acc);
    else wgmma_ss_m64n128_e4m3_e4m3(s, a, b, acc);
  } else if constexpr (kIn == RIME_T_E5M2) {
    if constexpr (kN == 64) wgmma_ss_m64n64_e5m2_e5m2(s, a, b, acc);
    else if constexpr (kN == 256) wgmma_ss_m64n256_e5m2_e5m2(s, a, b, acc);
    else wgmma_ss_m64n128_e5m2_e5m2(s, a, b, acc);
  } else if constexpr (kIn == RIME_T_BF16) {
    if constexpr (kN == 64) wgmma_ss_m64n64_bf16(s, a, b, acc);
    else wgmma_ss_m64n128_bf16(s, a, b, acc);
  } else {
    if constexpr (kN == 64) wgmma_ss_m64n64_f16(s, a, b, acc);
    else wgmma_ss_m64n128_f16(s, a, b, acc);
  }
}
// O (64 x D) += P (registers, one k step) V.
template <int kIn, int kD>
__device__ __forceinline__ void wgmma_pv(float (&o)[kD / 8][4], const u32 (&a)[4], u64 b) {
  if constexpr (kIn == RIME_T_E4M3) {
    if constexpr (kD == 64) wgmma_rs_m64n64_e4m3_e4m3(o, a, b, 1);
    else if constexpr (kD == 128) wgmma_rs_m64n128_e4m3_e4m3(o, a, b, 1);
    else wgmma_rs_m64n256_e4m3_e4m3(o, a, b, 1);
  } else if constexpr (kIn == RIME_T_E5M2) {  // P is E4M3, V E5M2
    if constexpr (kD == 64) wgmma_rs_m64n64_e4m3_e5m2(o, a, b, 1);
    else if constexpr (kD == 128) wgmma_rs_m64n128_e4m3_e5m2(o, a, b, 1);
    else wgmma_rs_m64n256_e4m3_e5m2(o, a, b, 1);
  } else if constexpr (kIn == RIME_T_BF16) {
    if constexpr (kD == 64) wgmma_rs_m64n64_bf16(o, a, b, 1);
    else if constexpr (kD == 128) wgmma_rs_m64n128_bf16(o, a, b, 1);
    else wgmma_rs_m64n256_bf16(o, a, b, 1);
  } else {
    if constexpr (kD == 64) wgmma_rs_m64n64_f16(o, a, b, 1);
    else if constexpr (kD == 128) wgmma_rs_m64n128_f16(o, a, b, 1);
    else wgmma_rs_m64n256_f16(o, a, b, 1);
  }
}

// O (64 x D) += P V as wgmma_pv, with 8 more columns into e: V^T's 8 rows of ones after its D rows make them
// the rows' sums of P (rime_sm90::vt_sum_rows).
template <int kIn, int kD>
__device__ __forceinline__ void wgmma_pv_sum(float (&o)[kD / 8][4], float (&e)[4], const u32 (&a)[4], u64 b) {
  static_assert(kIn == RIME_T_E4M3 || kIn == RIME_T_E5M2, "FP8 only");
  if constexpr (kIn == RIME_T_E4M3) {
    if constexpr (kD == 64) wgmma_rs_sum_m64n72_e4m3_e4m3(o, e, a, b, 1);
    else wgmma_rs_sum_m64n136_e4m3_e4m3(o, e, a, b, 1);
  } else {  // P is E4M3, V E5M2
    if constexpr (kD == 64) wgmma_rs_sum_m64n72_e4m3_e5m2(o, e, a, b, 1);
    else wgmma_rs_sum_m64n136_e4m3_e5m2(o, e, a, b, 1);
  }
}

// The FP8 transpose of one V tile (kN keys of kDv bytes, as the TMA wrote it: sub-tiles of kRowV-byte rows) into
// V^T (kDv rows of kN key bytes, as sub-tiles of row_bytes(kN)-byte rows along the keys, each with the swizzle
// of its row width), keys permuted within each 16 as pack_p_fp8's P fragment holds them (vt_key_of_position),
// keys at or past kv_end zeroed. A warp moves a unit of 16 keys x 32 d with one ldmatrix.x4.trans, four byte
// permutes and one stmatrix.x4:
//   the four 8x8 b16 matrices loaded are keys 0-7 / 8-15 (m & 1) x d 0-15 / 16-31 (m >> 1); transposed, lane
//   (c = lane / 4, q = lane % 4) holds, per matrix, keys 2q and 2q + 1 of the b16 column c (d 2c and 2c + 1), so
//   bytes 0 and 2 of matrices 0 and 1 are row d = 2c of V^T at positions 4q .. 4q + 3 (keys 2q, 2q + 1, 8 + 2q,
//   9 + 2q: exactly vt_key_of_position's order), bytes 1 and 3 row 2c + 1;
//   the four words are stored as stmatrix rows: row c of stored matrix 0 is V^T row 2c for c < 4 and 2c + 1 for
//   c >= 4 (matrix 1 the other one; 2 and 3 the same 16 d on), so that a stored matrix's 8 rows have 8 distinct
//   row % 8 and its 16-byte writes fall in 8 different bank groups under the swizzle.
// Loads are conflict-free too: a loaded matrix is 8 consecutive keys at one 16-byte chunk, which the TMA swizzle
// spreads over 8 bank groups. (The 32-bit-load form this replaces issued ~460 instructions per producer warp per
// FP8 D 128 tile, as many as a consumer warp: docs/perf-history.md.)
// kWarps: the warps that share the tile (ptid counts their threads from 0): 4, or 3 beside a warp that only issues
// loads (paged FP8: see the producer).
// kOpaqueLane: the lane passes through an opaque move, once per tile, so that what derives from it (each unit's two
// addresses) is not loop-invariant across the producer's tile loop: ptxas then computes the addresses where they
// are used, where otherwise it hoists every unit's addresses out of the loop and spills them under the producer's
// 56-72 registers (nvcc 13.0: 56 bytes in the FP8 two-consumer kernels, 136-220 in the paged ones, reloaded in
// every tile's transpose; none with the move), at ~14 more ALU instructions per unit. Measured (H200, one call,
// docs/perf-history.md): the one-consumer 8-token paged decode 0.906x-0.916x the time, but the two- and three-consumer
// FP8 prefill rows 1.02x-1.17x and the paged prefill 1.135x: where the consumers bind, the extra instructions take
// issue slots of their SM sub-partitions; where the producer's tile chain binds (decode), the reloads cost more.
// So one consumer only.
// kVtRows: the rows of a V^T sub-tile (kDv, + rime_sm90::vt_sum_rows rows of ones, which this leaves alone).
template <int kDv, int kRowV, int kN, int kWarps = 4, bool kOpaqueLane = false, int kVtRows = kDv>
__device__ __forceinline__ void transpose_v_tile(const u8* sv, u8* svt, int ptid, int kv_end) {
  constexpr int kVtRow = rime_sm90::row_bytes(kN);  // V^T sub-tiles along the keys: [kVtRows rows][kVtRow bytes]
  constexpr int kGroups = kN / 16, kUnits = kGroups * (kDv / 32);
  static_assert(kWarps != 4 || kUnits % 4 == 0, "whole units per producer warp");
  constexpr int kPerWarp = (kUnits + kWarps - 1) / kWarps;
  int lane = ptid % 32;
  if constexpr (kOpaqueLane) asm volatile("mov.b32 %0, %0;\n" : "+r"(lane));
  const int warp = ptid / 32;
  const int m = lane / 8, r = lane % 8;  // this lane's addresses: row r of matrix m
  const int c = lane / 4, q = lane % 4;  // this lane's fragment: b16 column c, key positions 4q .. 4q + 3
  // Word 0 (2) takes bytes 0 and 2 (row 2c) for c < 4 and bytes 1 and 3 (row 2c + 1) for c >= 4; word 1 (3) the
  // other row.
  const u32 sel_lo = c < 4 ? 0x6420u : 0x7531u, sel_hi = c < 4 ? 0x7531u : 0x6420u;
  const int ld_key = (m & 1) * 8 + r, ld_d = (m >> 1) * 16;
  const int st_d = (m >> 1) * 16 + 2 * r + ((m & 1) ^ (r >= 4 ? 1 : 0));
  // Fully unrolled (8 units per warp for every tile shape), except for 256-key tiles, whose 8 units' addresses
  // (two V^T sub-tiles) then spilled past the producer's 56 registers. (Unrolled by 4, the D 256 kernel measured
  // 17% slower: docs/perf-history.md.)
  constexpr int kUnroll = kN > 128 ? 4 : kPerWarp;
#pragma unroll kUnroll
  for (int i = 0; i < kPerWarp; ++i) {
    const int u = warp + kWarps * i;
    if (kUnits % kWarps != 0 && u >= kUnits) break;  // the last round of three warps: not every warp has a unit
    const int g = u % kGroups, d0 = (u / kGroups) * 32;
    const int key = g * 16 + ld_key, d = d0 + ld_d;
    u32 v[4];
    ldmatrix_x4_trans(v, sv + (d / kRowV) * (kN * kRowV) + swz<kRowV>(key, d % kRowV));
    u32 w[4] = {__byte_perm(v[0], v[1], sel_lo), __byte_perm(v[0], v[1], sel_hi), __byte_perm(v[2], v[3], sel_lo),
                __byte_perm(v[2], v[3], sel_hi)};
    if (kv_end < kN) {  // the last tile of the keys (or of a batch's padding): zero keys at or past kv_end
      const int lim = kv_end - g * 16;
      const u32 keep = (2 * q < lim ? 0xFFu : 0u) | (2 * q + 1 < lim ? 0xFF00u : 0u) |
                       (8 + 2 * q < lim ? 0xFF0000u : 0u) | (9 + 2 * q < lim ? 0xFF000000u : 0u);
#pragma unroll
      for (int k = 0; k < 4; ++k) w[k] &= keep;
    }
    const int pos = g * 16;  // this unit's 16 key positions: in sub-tile pos / kVtRow
    stmatrix_x4(svt + (pos / kVtRow) * (kVtRows * kVtRow) + swz<kVtRow>(d0 + st_d, pos % kVtRow), w);
  }
}

// The running max of a row before its first live key (log2 units): finite, so that the softmax needs no guard
// against exp2(-inf - -inf). -FLT_MAX is at or below every finite scaled score, so a row's first live key always
// moves the max (alpha 0), and exp2(masked - -FLT_MAX) is exp2(-inf), 0. A row with no live key keeps l = 0, which
// the epilogue reads as such.
constexpr float kNoKeyMax = -3.40282347e38f;

// log2(kPScale): FP8 P comes out of exp2 already on kPScale (one FFMA and one MUFU per score, no FMUL before
// the pack); l_run then carries the same factor, which the kernel removes once after the last tile.
constexpr float kLog2PScale = 8.807354922057604f;

// The online softmax over one KV tile, on raw scores: s * mul is the score in log2 units (mul > 0, so the
// largest raw score is the largest scaled one: the max runs on raw s and the scale rides in the exponent's
// FFMA). Masked scores are -inf in s. Per element: FMNMX, FFMA, MUFU.EX2, FADD; maxima and sums in two
// chains for ILP. Leaves P * 2^log2_p_scale in s, O's factors in alpha; m_run stays in log2 units and must start
// at kNoKeyMax (from -inf, a row with no live key yet would take exp2(-inf - -inf), NaN).
// kRowSums false: l_run is left alone (the caller sums P otherwise: rime_sm90::vt_sum_rows).
// kSlack > 0: the running max moves only when a tile's max passes it by more than kSlack (log2 units), so that most
// tiles leave O's rows as they are (alpha exactly 1, which the caller's rescale skips); P then reaches up to
// 2^kSlack times its scale (FlashAttention-4's conditional rescale). m_run is then not the row's max.
template <int kNT, bool kRowSums = true, int kSlack = 0>
__device__ __forceinline__ void online_softmax_raw(float (&s)[kNT][4], float (&m_run)[2], float (&l_run)[2],
                                                   float mul, float log2_p_scale, float (&alpha)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    // Each chain starts from its first pair, not from -inf: ptxas keeps an FMNMX against -inf (fmaxf(-inf, NaN)
    // is -inf, not NaN), one per chain and row.
    static_assert(kNT >= 2 && kNT % 2 == 0, "two max chains of whole pairs");
    float mx0 = fmaxf(s[0][2 * r], s[0][2 * r + 1]), mx1 = fmaxf(s[1][2 * r], s[1][2 * r + 1]);
#pragma unroll
    for (int n = 2; n < kNT; n += 2) {
      mx0 = fmaxf(mx0, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
      mx1 = fmaxf(mx1, fmaxf(s[n + 1][2 * r], s[n + 1][2 * r + 1]));
    }
    const float m_tile = quad_max(fmaxf(mx0, mx1)) * mul;
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
      const float p0 = exp2_approx(fmaf(s[n][2 * r], mul, neg_bias));
      const float p1 = exp2_approx(fmaf(s[n][2 * r + 1], mul, neg_bias));
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

// kDqk: the head dim of Q and K; kDv: of V and O (192 / 128 for MLA-style prefill, else equal).
// kC: consumer warpgroups (1, 2 or 3; rime_sm90::three_consumers_fit says where 1 and 3 fit).
template <int kIn, int kOut, int kDqk, int kDv, int kFeatures, int kC>
__global__ void __launch_bounds__(rime_sm90::threads(kC), rime_sm90::ctas_per_sm(kC)) sdpa_sm90_fwd(const __grid_constant__ SdpaSm90Params params) {
  using namespace sm90;
  const SdpaParams& p = params.p;
  constexpr bool kFp8 = kIn == RIME_T_E4M3 || kIn == RIME_T_E5M2;
  constexpr int kEB = kFp8 ? 1 : 2;
  static_assert(kC == 1 || kC == 2 || (kC == 3 && rime_sm90::three_consumers_fit(kDqk, kDv)), "consumer warpgroups");
  constexpr int kTileQ = rime_sm90::tile_q(kC);
  constexpr int kN = rime_sm90::tile_kv(kEB, kDqk, kC);
  constexpr int kNT = kN / 8, kDT = kDv / 8;
  constexpr int kRow = rime_sm90::row_bytes(kDqk * kEB);  // sub-tile row width of Q and K
  constexpr int kSubs = kDqk * kEB / kRow;              // sub-tiles along d of Q and K
  constexpr int kRowV = rime_sm90::row_bytes(kDv * kEB);  // and of V
  constexpr int kSubsV = kDv * kEB / kRowV;
  constexpr int kKSteps = kDqk * kEB / 32;              // 32-byte k steps of Q.K^T
  constexpr bool kSplit = (kFeatures & RIME_F_SPLIT) != 0;
  constexpr bool kPadding = (kFeatures & RIME_F_PADDING) != 0;
  constexpr bool kMask = (kFeatures & RIME_F_MASK) != 0;
  // Masked grids with the same lengths in every batch order their row tiles by weight (grid_work): launched
  // heaviest first, and the partial row tile at the start of the rows, where it is the lightest.
  constexpr bool kMaskedRowOrder = kMask && !kPadding;
  constexpr int kBlock = OutFormat<kOut>::kBlock;
  // FP8 with 2-3 consumers and D_v <= 128: V^T sub-tiles have room for 8 rows of ones (rime_sm90::vt_sum_rows), and
  // where no LSE is written the tensor cores sum P with them. The sum of P as held in E4M3 normalizes O by the
  // weights P.V used, but as an LSE it is off the exact one by up to 0.03 on short rows, past SPEC's Stats tolerance
  // (docs/perf-history.md): Stats, split partials and Amax_S keep the fp32 sums of the unquantized P.
  constexpr int kSumRows = rime_sm90::vt_sum_rows(kFp8, kDv, kC);
  constexpr bool kMmaSums = kSumRows > 0 && (kFeatures & (RIME_F_STATS | RIME_F_SPLIT | RIME_F_AMAX_S)) == 0;
  constexpr int kVtRows = kDv + kSumRows;  // rows of a V^T sub-tile (FP8): V's d, then the rows of ones
  constexpr rime_sm90::Smem kSmem =
      rime_sm90::smem(kEB, kDqk, kDv, kC, kFp8, kBlock > 0 && !kSplit, rime_sm90::kSmemLimit);
  static_assert((kFeatures & RIME_F_MX_INPUTS) == 0, "MXFP8 inputs run on sdpa_mma_mxfp8");

  extern __shared__ __align__(1024) u8 smem_raw[];
  u8* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  u8* sQ = smem + kSmem.q;
  u8* sK = smem + kSmem.k;
  u8* sV = smem + kSmem.v;
  u8* sVt = smem + kSmem.vt;
  // The ring: the j-th KV tile this CTA walks (over all its pieces when balanced) uses stage j % kStages in phase
  // (j / kStages) % 2 of its barriers.
  constexpr int kStages = rime_sm90::kStages;
  // The stage and phase of tile j in unsigned arithmetic (the count never goes negative; signed % and / cost sign
  // fix-ups in every tile), except in the D_qk 192 / D_v 128 kernels: there ptxas scheduled the unsigned form 2-3%
  // slower (FP8 MLA prefill on the H200, one run: signed 0.989x of the earlier kernel's time, unsigned 1.020x).
  constexpr bool kUnsignedRing = kDqk == kDv;
  u64* bars = reinterpret_cast<u64*>(smem + kSmem.barriers);
  u64* k_full = bars;                  // [kStages] TMA of K landed
  u64* k_empty = bars + kStages;       // [kStages] every consumer done with K (lane 0 of each of their warps)
  u64* v_full = bars + 2 * kStages;    // [kStages] TMA of V landed (the producer waits; the consumers too for
                                       // 16-bit V as is)
  u64* pv_full = bars + 3 * kStages;   // [kStages] the P.V operand is ready (V^T for FP8, V for 16-bit): the
                                       // producer threads (128; the 96 that transpose beside an issuing warp)
  u64* pv_empty = bars + 4 * kStages;  // [kStages] every consumer done with it
  // Paged FP8: a paged tile is kN / page_size boxes each of K and V (16 TMA instructions for 16-key pages and
  // 128-key tiles), which the first producer warp issues one by one. Issuing and then taking its share of the
  // transposes made that warp the producer's critical path: ncu of the 8-token decode sampled the other three
  // producer warps waiting at the producer's per-tile barrier for it 24% of the time, and the consumers waiting
  // for K and for V^T. So there the first warp only issues loads and the other three transpose, and the raw V
  // stage's release is a barrier of its own (v_empty: the three warps' threads arrive once they have read it).
  constexpr bool kIssuerWarp = kFp8 && (kFeatures & RIME_F_PAGED) != 0;
  constexpr int kTransposeThreads = kIssuerWarp ? 96 : 128;
  u64* v_empty = bars + 5 * kStages;  // [kStages] (kIssuerWarp) the transposing threads done reading raw V
  static_assert(6 * kStages <= 16, "the barriers reserved in rime_sm90::smem");
  // 16-bit V with no rows to zero (no per-batch padding) is read as the TMA left it: the consumers wait for the
  // load itself. Routing it through the producer's pv_full made V_j's readiness wait for the producer's issue of
  // tile j + 1, which waits for both consumers' release of V_(j-1): a chain across the two consumers' turns.
  constexpr bool kVDirect = !kFp8 && !kPadding;
  u64* pv_ready = kVDirect ? v_full : pv_full;
  // Named barriers (0 is __syncthreads): the consumers' turns (1 .. kC), the producer warpgroup's own, and each
  // consumer's own (its Q load and its staged epilogue). With two consumers the ids (1, 2; 3; 4, 5) and the turn
  // expressions are those of the kernel before three existed, and its SASS is the same: with other ids and
  // expressions ptxas scheduled the BF16 D 64 specialization differently and it measured 7% slower (A/B, 3 rounds).
  constexpr int kTurnBar = 1, kProducerBar = kTurnBar + kC, kOwnBar = kProducerBar + 1;
  static_assert(kOwnBar + kC <= 16, "16 named barriers");

  pdl_launch_dependents();  // the combine waits for this grid's completion itself
  // The warpgroup index through a shuffle from lane 0: the compiler then knows it is warp-uniform and keeps what
  // derives from it (the consumer's Q address, its wgmma descriptors) in uniform registers.
  const int tid = threadIdx.x, wg = __shfl_sync(0xffffffffu, tid / 128, 0);
  // The CTA's work: one row tile's KV tiles (the grid of row tiles x kv heads x batches and splits) or, balanced,
  // the pieces for_each_balanced_item gives this CTA, one after the other; `base` counts the KV tiles of the
  // pieces before, so that the ring's stages and phases run on across pieces.
  struct Work {
    int b, h_kv, split, q_tile, row0, kt_begin, n_tiles, base;
    BatchExtent ext;
  };
  constexpr bool kBalanced = (kFeatures & RIME_F_BALANCED) != 0;
  static_assert(!kBalanced || (kC == 1 && kSplit && kPadding), "balanced: one consumer, a split decode over lengths");
  // The grid's work, computed before the roles part and in the order the kernel did before it had pieces (the
  // two-consumer kernels' SASS is sensitive to such moves, docs/perf-history.md).
  const Work grid_work = [&]() {
    if constexpr (kBalanced) {
      return Work{};
    } else {
      // The CTA's (row tile, kv head, batch, split).
      int q_tile, h_kv, b, split;
      if constexpr (kMaskedRowOrder) {
        // Masked (causal, window): row tile q has up to q + 1 KV tiles, and in launch order (x fastest) the grid
        // ended on the heaviest tiles of its last slices, a tail of up to one slice's longest CTA (list scheduling
        // of B4 H32 S4096 on 132 SMs: 1.039x the ideal time). Launch order now takes the row tiles heaviest first
        // within groups of kGroup (kv head, batch x split) slices: 1.002x (tools/bench/causal_order_sim.py), and
        // the CTAs in flight still share the K/V of a few heads in L2 (132 CTAs span ~kGroup slices, as before).
        // Measured (H200, A/B of 3 and 5 rounds): FP8 causal B4 H32 S4096 0.983x-0.992x the time, BF16 0.983x; with
        // per-batch lengths (padded, ragged, paged) the highest row tile is not the heaviest one, and the padded
        // and ragged B16 rows ran 1.011x-1.022x slower, so those keep launch order (docs/perf-history.md).
        constexpr int kGroup = 4;
        const int nq = gridDim.x, slices = gridDim.y * gridDim.z;
        const int linear = blockIdx.x + nq * (blockIdx.y + gridDim.y * blockIdx.z);
        const int group = linear / (nq * kGroup), r = linear % (nq * kGroup);
        const int in_group = min(kGroup, slices - group * kGroup);
        const int slice = group * kGroup + r % in_group;
        q_tile = nq - 1 - r / in_group;
        h_kv = slice % gridDim.y;
        b = slice / gridDim.y % p.B;
        split = slice / gridDim.y / p.B;
      } else {
        q_tile = blockIdx.x;
        h_kv = blockIdx.y;
        b = blockIdx.z % p.B;
        split = blockIdx.z / p.B;
      }
      // Masked grids put the partial row tile first (rows from -pad, the pad rows exist nowhere): its keys then end
      // at its own last row instead of the last row tile's S_kv. At the end of the rows, a 192-row tile with 64 live
      // rows (S_q 4096) ran all 64 KV tiles of the sequence in each of its three consumers, 5.6% of a causal
      // head's work for rows that do not exist; at the start, it runs one tile.
      int row0 = q_tile * kTileQ;
      if constexpr (kMaskedRowOrder) row0 -= int(gridDim.x) * kTileQ - p.packed_rows;
      const BatchExtent ext = batch_extent<kFeatures>(p, b);
      int kt_begin, kt_end;
      kv_tile_range<kTileQ, kN, kMask, kSplit, kPadding>(p, ext, row0, split, kt_begin, kt_end);
      return Work{b, h_kv, split, q_tile, row0, kt_begin, kt_end - kt_begin, 0, ext};
    }
  }();
  // Balanced: each role's first warp walks this CTA's pieces (for_each_balanced_item) and lists up to kMaxPieces
  // of them in the role's own list in shared memory (the producer's first warp also writes the LSE of the split
  // slots no piece fills as it goes); then the role runs the listed pieces in a plain loop (more pieces: further
  // rounds). Running the pieces inside the walk's own loops (its shuffles and early exits) made ptxas serialize
  // every wgmma (C7520: warpgroup.arrive in a divergent path). One list per role, each behind the role's own named
  // barrier: with one list behind a barrier of both roles (256 threads, met at two places in the code),
  // compute-sanitizer's synccheck reported every consumer warp divergent at it. The lists live in the kernel's
  // scope: a __shared__ variable declared inside for_each_work (a generic lambda) is one per instantiation, and
  // which role reads which must not depend on that.
  constexpr int kMaxPieces = 16;
  struct Piece {
    int b, h_kv, piece, kt_begin, n_tiles;
  };
  struct PieceList {
    Piece pieces[kMaxPieces];
    int n_pieces, more_pieces;
  };
  PieceList* piece_lists = nullptr;  // [2]: the producer's, the consumer's
  if constexpr (kBalanced) {
    __shared__ PieceList balanced_lists[2];
    piece_lists = balanced_lists;
  }
  auto for_each_work = [&](auto&& run) {
    if constexpr (kBalanced) {
      const bool producer = wg == 0;
      PieceList& list = piece_lists[producer ? 0 : 1];
      const int rtid = tid - (producer ? 0 : 128);  // the thread within its role's warpgroup (one consumer)
      const int list_bar = producer ? kProducerBar : kOwnBar;
      int base = 0;
      for (int first = 0;; first += kMaxPieces) {
        if (rtid < 32) {
          int item = 0, listed = 0;
          for_each_balanced_item<kTileQ, kN, kMask, kFeatures>(
              p, [&](int b, int h_kv, int piece, int kt_begin, int kt_end, bool last_piece) {
                const int k = item++;
                if (k < first || k >= first + kMaxPieces) return;  // another round's
                if (piece >= 0) {
                  if (rtid == 0) list.pieces[listed] = Piece{b, h_kv, piece, kt_begin, kt_end - kt_begin};
                  ++listed;
                }
                // Slots past the pair's last piece (all of them for a pair with no keys) hold no keys: LSE -inf.
                if (producer && last_piece) {
                  const BatchExtent e = batch_extent<kFeatures>(p, b);
                  for (int s = piece + 1; s < p.num_splits; ++s)
                    write_empty_chunk_lse<kTileQ, (kFeatures & RIME_F_RAGGED_Q) != 0>(p, e, b, s, h_kv, 0, rtid, 32);
                }
              });
          if (rtid == 0) {
            list.n_pieces = listed;
            list.more_pieces = item > first + kMaxPieces;  // the walk has items past this round's
          }
        }
        named_sync(list_bar, 128);
        const int n = list.n_pieces;
        const bool more = list.more_pieces != 0;
        for (int i = 0; i < n; ++i) {
          const Piece q = list.pieces[i];
          run(Work{q.b, q.h_kv, q.piece, 0, 0, q.kt_begin, q.n_tiles, base, batch_extent<kFeatures>(p, q.b)});
          base += q.n_tiles;
        }
        named_sync(list_bar, 128);  // every thread of the role has read the list before the next round's
        if (!more) break;
      }
    } else {
      run(grid_work);
    }
  };

  if (tid == 0) {
    for (int i = 0; i < kStages; ++i) {
      mbar_init(&k_full[i], 1);
      mbar_init(&k_empty[i], 4 * kC);
      mbar_init(&v_full[i], 1);
      mbar_init(&pv_full[i], kTransposeThreads);
      if (kIssuerWarp) mbar_init(&v_empty[i], kTransposeThreads);
      mbar_init(&pv_empty[i], 4 * kC);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if constexpr (kMmaSums) {
    // The rows of ones after each V^T sub-tile's kDv rows, in every stage: written once (the transposes write
    // rows below kDv only). 1.0 in V's type; every byte of a row is the same, so the swizzle does not matter.
    constexpr int kVtRow = rime_sm90::row_bytes(kN), kSubTiles = kN / kVtRow, kWordsPerSub = kSumRows * kVtRow / 4;
    constexpr u32 kOnes = kIn == RIME_T_E5M2 ? 0x3C3C3C3Cu : 0x38383838u;
    for (int i = tid; i < kStages * kSubTiles * kWordsPerSub; i += blockDim.x) {
      const int stage = i / (kSubTiles * kWordsPerSub), sub = i / kWordsPerSub % kSubTiles, w = i % kWordsPerSub;
      reinterpret_cast<u32*>(sVt + stage * kSmem.vt_stage_bytes + sub * kVtRows * kVtRow + kDv * kVtRow)[w] = kOnes;
    }
    fence_proxy_async_shared();  // generic-proxy writes, then the consumers' wgmma reads
  }
  __syncthreads();

  if (wg == 0) {
    // ---- producer -------------------------------------------------------------------------------------------
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(rime_sm90::producer_regs(kC, kFp8)) : "memory");
    const int ptid = tid;
    const bool issuer = ptid == 0;
    if (issuer) {
      prefetch_tensor_map(&params.k_map);
      prefetch_tensor_map(&params.v_map);
    }
    constexpr unsigned kKBytes = kN * kDqk * kEB, kVBytes = kN * kDv * kEB;
    auto produce = [&](const Work& w) {
      const int b = w.b, h_kv = w.h_kv, kt_begin = w.kt_begin, n_tiles = w.n_tiles;
      const BatchExtent& ext = w.ext;
      auto stage_of = [&](int j) {
        return kUnsignedRing ? int(unsigned(w.base + j) % kStages) : (w.base + j) % kStages;
      };
      auto phase_of = [&](int j) {
        return kUnsignedRing ? unsigned(w.base + j) / kStages & 1u : unsigned((w.base + j) / kStages) & 1u;
      };
      // Ragged K/V: the maps are (d, T, h, 1) and the batch's keys start at token kv_tok0. A tile running past the
      // batch's end reads the next sequence's tokens (or TMA's zeros past T): masked in S, and V's rows past the
      // length are zeroed below, as for any padded batch.
      constexpr bool kRaggedKv = (kFeatures & RIME_F_RAGGED_KV) != 0;
      const int kv_b = kRaggedKv ? 0 : b;
      // Paged K/V: the maps are (d, slot, h, page) over the pools, boxes of min(page_size, kN) keys, and a tile is
      // kN / box boxes, each from the page the table gives its first key. A box of >= 16 keys lands at a multiple
      // of 16 rows of its sub-tile, a whole number of the swizzle's atoms (8 rows of 128 bytes, or of 64), so the
      // stage is laid out as a dense tile's and the consumers read it the same way. A box whose first key is at
      // or past the sequence's length (its page id may be anything: the contract covers only pages holding keys
      // below seq_len_kv) reads page 0 instead, which exists: those keys are masked in S and V's rows past the
      // length are zeroed below, as for any padded batch. The expected byte count of a stage is unchanged.
      constexpr bool kPagedKv = (kFeatures & RIME_F_PAGED) != 0;
      constexpr int kMaxBoxes = kPagedKv ? kN / 16 : 1;
      static_assert(kMaxBoxes <= 32, "a lane of the issuing warp holds one box's page id");
      const int box_log2 = kPagedKv ? min(p.page_size_log2, rime_sm90::log2_floor(kN)) : 0;
      const int* page_row = kPagedKv ? p.page_table + i64(b) * p.page_table_stride : nullptr;
      // Paged: the whole first warp issues; lane q loads box q's page id (all of a tile's ids in flight at once,
      // one register each: held by one thread they spilled under the producer's 56 registers), and lane 0 issues
      // the boxes, taking each id by a shuffle. Dense: thread 0 alone.
      const bool issues = kPagedKv ? ptid < 32 : issuer;
      // A box's first slot is its first key's place in the page (0 unless the page is larger than the tile); a
      // box at or past the length reads slot 0 of page 0.
      auto box_used = [&](int key0, int q) { return (q << box_log2) < kN && key0 + (q << box_log2) < ext.kv_limit; };
      auto page_id = [&](int j) {  // this lane's box of tile j: its page id
        const int key0 = ext.kv_tok0 + (kt_begin + j) * kN;
        return ptid < kMaxBoxes && j < n_tiles && box_used(key0, ptid)
                   ? __ldg(page_row + ((key0 + (ptid << box_log2)) >> p.page_size_log2))
                   : 0;
      };
      // Paged: tile j + 1's page ids are loaded when tile j is issued, so that their latency (a dependent global
      // load before every tile's TMA) overlaps the issue of a whole tile (8-token decode: 2% faster, docs/perf-history.md).
      int next_page = 0;
      if constexpr (kPagedKv) next_page = page_id(0);
      auto issue = [&](int j) {  // the loads of the j-th tile of this CTA's range into its stage
        const int s = stage_of(j);
        const unsigned ph = phase_of(j);
        const int key0 = ext.kv_tok0 + (kt_begin + j) * kN;
        int lane_page = 0;
        if constexpr (kPagedKv) {
          lane_page = next_page;
          next_page = page_id(j + 1);
        }
        auto load = [&](u8* stage, const RimeTensorMap* map, int subs, int row, u64* bar) {
          if constexpr (kPagedKv) {
            const int slot_mask = (1 << p.page_size_log2) - 1;
#pragma unroll
            for (int q = 0; q < kMaxBoxes; ++q) {
              if ((q << box_log2) >= kN) break;  // uniform across the warp
              const int page = __shfl_sync(0xffffffffu, lane_page, q);
              if (issuer) {
                const int slot = box_used(key0, q) ? (key0 + (q << box_log2)) & slot_mask : 0;
#pragma unroll
                for (int c = 0; c < subs; ++c)
                  tma_load_4d(stage + c * kN * row + (q << box_log2) * row, map, c * (row / kEB), slot, h_kv, page, bar);
              }
            }
          } else {
#pragma unroll
            for (int c = 0; c < subs; ++c)
              tma_load_4d(stage + c * kN * row, map, c * (row / kEB), key0, h_kv, kv_b, bar);
          }
        };
        mbar_wait(&k_empty[s], ph ^ 1);
        if (issuer) mbar_expect_tx(&k_full[s], kKBytes);
        load(sK + s * kSmem.k_stage_bytes, &params.k_map, kSubs, kRow, &k_full[s]);
        // FP8: V lands in a raw stage the producer itself reads (the transpose of tile j - kStages finished before
        // the producers' barrier at the end of its iteration); 16-bit: the consumers read it, so wait for them.
        if constexpr (!kFp8) mbar_wait(&pv_empty[s], ph ^ 1);
        if constexpr (kIssuerWarp) mbar_wait(&v_empty[s], ph ^ 1);  // the transposes of tile j - kStages read it
        if (issuer) mbar_expect_tx(&v_full[s], kVBytes);
        load(sV + s * kSmem.v_stage_bytes, &params.v_map, kSubsV, kRowV, &v_full[s]);
      };
      if constexpr (kVDirect) {
        // Nothing to do to V between the TMA and the consumers: only the loads, each as soon as its stage is free.
        if (issues)
          for (int j = 0; j < n_tiles; ++j) issue(j);
        return;
      }
      // Paged FP8 (kIssuerWarp): the first warp issues every tile's loads as soon as its stages are free (k_empty,
      // v_empty), and the other three transpose each tile as it lands. Otherwise the issuing thread also
      // transposes: it keeps the loads kStages - 1 tiles ahead of its transpose (the raw V stage a load overwrites
      // is that of the tile transposed in the previous iteration).
      if constexpr (kIssuerWarp) {
        static_assert(kPagedKv, "the whole first warp issues (issues == ptid < 32): paged only");
        if (ptid < 32) {
          for (int j = 0; j < n_tiles; ++j) issue(j);
          return;
        }
      }
      constexpr int kTransposeWarps = kTransposeThreads / 32, kFirstTransposer = 128 - kTransposeThreads;
      constexpr int kAhead = kStages - 1;
      if (!kIssuerWarp && issues)
        for (int j = 0; j < kAhead && j < n_tiles; ++j) issue(j);
      for (int j = 0; j < n_tiles; ++j) {
        const int s = stage_of(j);
        const unsigned ph = phase_of(j);
        if (!kIssuerWarp && issues && j + kAhead < n_tiles) issue(j + kAhead);
        mbar_wait(&v_full[s], ph);
        const int kv_end = ext.kv_limit - (kt_begin + j) * kN;  // keys of this tile at or past it are zero
        if constexpr (kFp8) {
          mbar_wait(&pv_empty[s], ph ^ 1);
          // One consumer (decode): the opaque lane (transpose_v_tile) where the producer's tile chain binds.
          transpose_v_tile<kDv, kRowV, kN, kTransposeWarps, kC == 1, kVtRows>(
              sV + s * kSmem.v_stage_bytes, sVt + s * kSmem.vt_stage_bytes, ptid - kFirstTransposer, kv_end);
        } else if (kPadding && kv_end < kN) {
          // Rows of V past the batch's valid length hold the caller's data (seq_len_kv < S_kv): zero them.
          u8* tile = sV + s * kSmem.v_stage_bytes;
          for (int e = ptid * 16; e < kSubsV * kN * kRowV; e += 128 * 16) {
            const int key = (e % (kN * kRowV)) / kRowV;
            if (key >= kv_end) *reinterpret_cast<uint4*>(tile + e) = make_uint4(0, 0, 0, 0);
          }
        }
        fence_proxy_async_shared();  // generic-proxy writes (V^T, zeroed rows), then the consumers' wgmma reads
        mbar_arrive(&pv_full[s]);
        // The transposing threads are done reading the raw V stage: the issuing warp waits for them on v_empty,
        // or, where the issuing thread transposes too, every producer thread meets here.
        if constexpr (kIssuerWarp) mbar_arrive(&v_empty[s]);
        else if constexpr (kFp8) named_sync(kProducerBar, 128);
      }
    };
    for_each_work(produce);
    return;
  }

  // ---- consumers --------------------------------------------------------------------------------------------
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(rime_sm90::consumer_regs(kC, kFp8)) : "memory");
  const int cw = wg - 1;                      // consumer 0 .. kC - 1
  const int ctid = tid - 128 * wg;            // thread within the consumer warpgroup
  const int warp = ctid / 32, lane = ctid % 32, g = lane / 4, t = lane % 4;
  // Ping-pong: named barrier kTurnBar + c is consumer c's turn, which consumer c - 1 (mod kC) opens after issuing.
  const int my_bar = kTurnBar + cw, next_bar = kC == 2 ? kTurnBar + 1 - cw : kTurnBar + (cw + 1) % kC;
  u8* sQw = sQ + cw * 64 * kDqk * kEB;

  auto consume = [&](const Work& w) {
    const int b = w.b, h_kv = w.h_kv, split = w.split, q_tile = w.q_tile, kt_begin = w.kt_begin, n_tiles = w.n_tiles;
    const int row0 = w.row0;
    const BatchExtent& ext = w.ext;
    auto stage_of = [&](int j) {
      return kUnsignedRing ? int(unsigned(w.base + j) % kStages) : (w.base + j) % kStages;
    };
    auto phase_of = [&](int j) {
      return kUnsignedRing ? unsigned(w.base + j) / kStages & 1u : unsigned((w.base + j) / kStages) & 1u;
    };
    // This warpgroup's 64 Q rows, cp.async into sub-tiles [kSubs][64][kRow], swizzled like the TMA tiles.
    {
      const u8* q_base = static_cast<const u8*>(p.q);
      constexpr int kChunks = kDqk * kEB / 16;
      for (int c = ctid; c < 64 * kChunks; c += 128) {
        const int r = c / kChunks, ch = c % kChunks, pr = row0 + cw * 64 + r;
        // Ragged Q: rows past the sequence's length are other sequences' tokens, or past the tensor's end. A masked
        // grid's first row tile starts at a negative row (grid_work).
        const bool ok = (!kMaskedRowOrder || pr >= 0) && pr < p.packed_rows &&
                        ((kFeatures & RIME_F_RAGGED_Q) == 0 || pr / p.group < ext.seq_q);
        const int i = ok ? pr / p.group : 0, h = h_kv * p.group + (ok ? pr % p.group : 0);
        const u8* src = q_base + (i64(b) * p.q_stride[0] + i64(h) * p.q_stride[1] + i64(ext.q_tok0 + i) * p.q_stride[2]) * kEB;
        const int byte = ch * 16;
        cp_async_16(sQw + (byte / kRow) * (64 * kRow) + swz<kRow>(r, byte % kRow), ok ? src + byte : q_base, ok);
      }
      cp_async_commit();
      cp_async_wait<0>();
      fence_proxy_async_shared();
      named_sync(kOwnBar + cw, 128);
    }

    float scale_log2 = p.attn_scale * kLog2e;
    if constexpr (kFp8) scale_log2 *= p.descale_q[0] * p.descale_k[0];
    const ThreadRows rows = thread_rows<kMask, (kFeatures & RIME_F_RAGGED_Q) != 0>(p, ext, row0 + cw * 64 + warp * 16 + g, h_kv);

    float o_acc[kDT][4];
    float s[kNT][4];
    zero_fragments(o_acc);
    zero_fragments(s);
    float m_run[2] = {kNoKeyMax, kNoKeyMax};
    float l_run[2] = {0.f, 0.f};
    // kMmaSums: P.V's 8 columns of row sums (row g: 0, 1; row g + 8: 2, 3), one tile's at a time. They are moved
    // into l_run (fp32 adds) and cleared after every P.V: accumulated over a whole row inside the FP8 wgmma, whose
    // accumulation keeps far fewer bits than fp32, the positive sum lost its small late terms (B1 S16384: O rel L2
    // 0.41 against main's 0.11 on the H200). Cleared by a multiply with an opaque zero: assigning 0.f made ptxas
    // serialize every wgmma (C7511, insufficient registers for the wgmma pipeline; 1.43x slower at S16384).
    float l_acc[1][4] = {{0.f, 0.f, 0.f, 0.f}};
    float opaque_zero;
    asm("mov.b32 %0, 0;\n" : "=f"(opaque_zero));
    constexpr int kPSteps = kFp8 ? kN / 32 : kN / 16;  // k steps of P.V
    u32 pa[kPSteps][4];                               // P of the previous tile, as wgmma A fragments

    // wgmma descriptors: built once, then moved by constant byte offsets (a descriptor's low 14 bits are the
    // address / 16, and every operand lies below 256 KB, so adding offset / 16 never carries out of the field).
    // Rebuilding each from its pointer cost ~10 uniform instructions per wgmma, and moving them was 1-3% faster on
    // every bench row (docs/perf-history.md) except 16-bit D 64, where it measured 8% slower in three A/B runs (ptxas
    // then issues the wgmmas back to back; the SASS shows no other change): that one keeps the per-wgmma form.
    constexpr bool kDescFromPointers = !kFp8 && kDqk == 64;
    const u64 q_desc = desc_k_major<kRow>(sQw);
    const u64 k_desc = desc_k_major<kRow>(sK);
    // FP8 V^T: sub-tiles of kVtRow-byte rows along the keys (256-key tiles: two of 128 bytes).
    constexpr int kVtRow = rime_sm90::row_bytes(kN);
    const u64 pv_desc = kFp8 ? desc_k_major<kVtRow>(sVt) : desc_n_major_sw128(sV, kN * 128);
    auto issue_qk = [&](int j) {
      const u64 k_stage = k_desc + u64(stage_of(j) * (kSmem.k_stage_bytes >> 4));
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk) {
        constexpr int kQSub = 64 * kRow, kKSub = kN * kRow;
        const int byte = kk * 32;
        const int q_off = (byte / kRow) * kQSub + byte % kRow, k_off = (byte / kRow) * kKSub + byte % kRow;
        if constexpr (kDescFromPointers)
          wgmma_qk<kIn, kN>(s, desc_k_major<kRow>(sQw + q_off),
                            desc_k_major<kRow>(sK + stage_of(j) * kSmem.k_stage_bytes + k_off), kk);
        else
          wgmma_qk<kIn, kN>(s, q_desc + u64(q_off >> 4), k_stage + u64(k_off >> 4), kk);
      }
    };
    auto issue_pv = [&](int j) {
      const int stage_bytes = kFp8 ? kSmem.vt_stage_bytes : kSmem.v_stage_bytes;
      const u64 v_stage = pv_desc + u64(stage_of(j) * (stage_bytes >> 4));
#pragma unroll
      for (int c = 0; c < kPSteps; ++c) {
        // FP8: V^T k-major, 32 keys (bytes) per k step, in sub-tile 32c / kVtRow; 16-bit: V N-major, 16 keys (rows
        // of 128 bytes) per k step.
        constexpr int kStepBytes = kFp8 ? 32 : 16 * 128;
        const int off = kFp8 ? (c * 32 / kVtRow) * (kVtRows * kVtRow) + (c * 32) % kVtRow : c * kStepBytes;
        if constexpr (kMmaSums)
          wgmma_pv_sum<kIn, kDv>(o_acc, l_acc[0], pa[c], v_stage + u64(off >> 4));
        else if constexpr (kDescFromPointers)
          wgmma_pv<kIn, kDv>(o_acc, pa[c], desc_n_major_sw128(sV + stage_of(j) * stage_bytes + off, kN * 128));
        else
          wgmma_pv<kIn, kDv>(o_acc, pa[c], v_stage + u64(off >> 4));
      }
    };
    // The online softmax of tile j (see online_softmax_raw). A tile needs masking only where some row of the warp
    // has a key bound inside it (causal: the diagonal tiles; padding and the end of the keys: the last one).
    // The running max moves only past a slack (online_softmax_raw), so that O's rescale, which ran in 66% of the FP8
    // D 128 tiles, is skipped on most: 8 (P up to 256) for 16-bit P; 1 for FP8, whose P then sits on kPScale / 2 so
    // that it stays within E4M3's 448. Not with Amax_S, whose epilogue takes m_run for the row's max. With the row
    // sums on the tensor cores (kMmaSums): FP8 prefill 2-7% faster, BF16 0-5% (H200, docs/perf-history.md).
    constexpr int kSlack = (kFeatures & RIME_F_AMAX_S) != 0 ? 0 : kFp8 ? 1 : 8;
    const float log2_p_scale = kFp8 ? kLog2PScale - float(kSlack) : 0.f;
    auto softmax = [&](int j, float (&alpha)[2]) {
      const int key0 = (kt_begin + j) * kN;
      float mul = scale_log2;
      if (!(scale_log2 > 0.f)) {  // attn_scale <= 0: the largest raw score is not the largest scaled one
#pragma unroll
        for (int n = 0; n < kNT; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[n][e] *= scale_log2;
        mul = 1.f;
      }
      bool edge_here = false;
#pragma unroll
      for (int r = 0; r < 2; ++r) edge_here |= key0 < rows.key_lo[r] || key0 + kN > rows.key_hi[r];
      if (__any_sync(0xffffffffu, edge_here)) {
#pragma unroll
        for (int n = 0; n < kNT; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (key_outside(rows, e / 2, key0 + n * 8 + 2 * t + (e & 1))) s[n][e] = neg_inf();
      }
      online_softmax_raw<kNT, !kMmaSums, kSlack>(s, m_run, l_run, mul, log2_p_scale, alpha);
    };
    // O's rows times alpha, skipped when no row of the warp moved its max (alpha exactly 1: most tiles past the
    // first few of a long row).
    auto rescale = [&](const float (&alpha)[2]) {
      if constexpr (kMmaSums) {  // l_run (at the previous tile's max) + the finished P.V's sums, then at the new max
#pragma unroll
        for (int r = 0; r < 2; ++r) l_run[r] = (l_run[r] + l_acc[0][2 * r]) * alpha[r];
#pragma unroll
        for (int e = 0; e < 4; ++e) l_acc[0][e] *= opaque_zero;
      }
      if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) rescale_rows(o_acc, alpha);
    };
    auto pack_p = [&]() {
#pragma unroll
      for (int c = 0; c < kPSteps; ++c) {
        if constexpr (kFp8) {
          pack_p_fp8<kNT, true>(s, c, pa[c]);
        } else {
          pa[c][0] = pack2<kIn>(s[2 * c][0], s[2 * c][1]);
          pa[c][1] = pack2<kIn>(s[2 * c][2], s[2 * c][3]);
          pa[c][2] = pack2<kIn>(s[2 * c + 1][0], s[2 * c + 1][1]);
          pa[c][3] = pack2<kIn>(s[2 * c + 1][2], s[2 * c + 1][3]);
        }
      }
    };
    auto release = [&](u64* bar) {
      if (lane == 0) mbar_arrive(bar);
    };

    // Three consumers: the KV tiles this consumer's own rows see, n_live (<= n_tiles, those of the CTA). Past them it
    // only keeps its turns and its arrivals on the ring's barriers (ghost turns, below): a consumer of the partial
    // row tile with no existing rows (0), and under a causal mask the first two consumers' tiles past their own
    // diagonal (2 and 1 KV tiles of 64 keys per CTA). The CTA lasts as long as its longest consumer's chain, which runs
    // faster beside fewer working consumers. Two consumers keep their code (its SASS is sensitive: kTurnBar).
    int n_live = n_tiles;
    if constexpr (kC == 3) {
      const int c0 = row0 + cw * 64;
      int lo_c, hi_c;
      kv_tile_range<64, kN, kMask, false, kPadding>(p, ext, c0, 0, lo_c, hi_c);
      n_live = c0 < p.packed_rows && c0 + 64 > 0 ? min(max(hi_c - kt_begin, 0), n_tiles) : 0;
    }
    // Consumer 0 goes first (one consumer takes no turns). Three consumers open the ring whether or not their last
    // has a live tile; one and two keep the code from before ghost turns (the same SASS).
    if constexpr (kC == 3) {
      if (n_tiles > 0 && cw == kC - 1) named_arrive(kTurnBar, 256);
    }
    if (kC == 3 ? n_live > 0 : n_tiles > 0) {
      if constexpr (kC == 2) {
        if (cw == kC - 1) named_arrive(kTurnBar, 256);
      }
      // Tile 0: S only.
      if constexpr (kC > 1) named_sync(my_bar, 256);
      mbar_wait(&k_full[stage_of(0)], phase_of(0));
      wgmma_fence_all();
      issue_qk(0);
      wgmma_commit_group();
      if constexpr (kC > 1) named_arrive(next_bar, 256);
      wgmma_wait_group<0>();
      fence_operands(s);
      release(&k_empty[stage_of(0)]);
      {
        float alpha[2];
        softmax(0, alpha);  // O is still zero: no rescale
        pack_p();
      }
      for (int j = 1; j < n_live; ++j) {
        if constexpr (kC > 1) named_sync(my_bar, 256);
        mbar_wait(&k_full[stage_of(j)], phase_of(j));
        wgmma_fence_all();
        issue_qk(j);
        wgmma_commit_group();
        mbar_wait(&pv_ready[stage_of(j - 1)], phase_of(j - 1));
        issue_pv(j - 1);
        wgmma_commit_group();
        if constexpr (kC > 1) named_arrive(next_bar, 256);
        wgmma_wait_group<1>();  // S(j) is done; P(j - 1).V still runs
        fence_operands(s);
        release(&k_empty[stage_of(j)]);
        float alpha[2];
        softmax(j, alpha);
        wgmma_wait_group<0>();
        fence_operands(o_acc);
        fence_operands(l_acc);
        release(&pv_empty[stage_of(j - 1)]);
        rescale(alpha);
        pack_p();
      }
      // The last P.V.
      if constexpr (kC > 1) named_sync(my_bar, 256);
      mbar_wait(&pv_ready[stage_of(n_live - 1)], phase_of(n_live - 1));
      wgmma_fence_all();
      issue_pv(n_live - 1);
      wgmma_commit_group();
      // The last consumer's last turn has no successor to wake. (Two consumers: the earlier kernel's test, which keeps
      // its SASS identical; see kTurnBar.)
      if (kC > 1 && (kC == 2 ? cw == 0 : cw != kC - 1 || n_live < n_tiles)) named_arrive(next_bar, 256);
      wgmma_wait_group<0>();
      fence_operands(o_acc);
      fence_operands(l_acc);
      release(&pv_empty[stage_of(n_live - 1)]);
    }
    if constexpr (kC == 3) {
      // Ghost turns: every consumer takes n_tiles + 1 turns (tile 0's, one per later tile, the last P.V's). The live
      // part took n_live + 1 of them (none when n_live = 0); each ghost tile takes one more, and a consumer with no
      // live tile also tile 0's. The ring's barriers count every consumer's arrival per tile: a ghost waits for the
      // tile to land (so that its arrival counts toward that tile's phase, not the stage's previous one) and arrives.
      if (n_live == 0 && n_tiles > 0) {
        named_sync(my_bar, 256);
        named_arrive(next_bar, 256);
      }
      for (int j = n_live; j < n_tiles; ++j) {
        named_sync(my_bar, 256);
        if (cw != kC - 1 || j + 1 < n_tiles) named_arrive(next_bar, 256);
        mbar_wait(&k_full[stage_of(j)], phase_of(j));
        release(&k_empty[stage_of(j)]);
        mbar_wait(&pv_ready[stage_of(j)], phase_of(j));
        release(&pv_empty[stage_of(j)]);
      }
    }
    if constexpr (kMmaSums) {  // the last tile's sums (every column of the 8 holds its row's)
      l_run[0] += l_acc[0][0];
      l_run[1] += l_acc[0][2];
    }
    if constexpr (kFp8) {
      // P was summed and multiplied on kPScale / 2^kSlack (log2_p_scale); the epilogue removes kPScale from O (in its
      // descale_v) and from nothing else, so O takes the 2^kSlack back here and l all of it (exact powers of two).
      constexpr float kSlackFactor = float(1 << kSlack);
#pragma unroll
      for (int r = 0; r < 2; ++r) l_run[r] *= kSlackFactor / kPScale;
      if constexpr (kSlack > 0) {
#pragma unroll
        for (int d = 0; d < kDT; ++d)
#pragma unroll
          for (int e = 0; e < 4; ++e) o_acc[d][e] *= kSlackFactor;
      }
    }

    void* stage = kSmem.staged_epilogue ? static_cast<void*>(smem + kSmem.stage + cw * kSmem.stage_bytes_per_consumer)
                                        : nullptr;
    attention_epilogue<kIn, kOut, kDv, kFeatures, kSmem.staged_epilogue ? 64 : 0, kMmaSums>(
        p, o_acc, m_run, l_run, rows, b, split, h_kv, cw == 0 && (kBalanced || q_tile == int(gridDim.x) - 1), ctid,
        128, stage, kOwnBar + cw);
  };
  for_each_work(consume);
}

}  // namespace rime_dev
