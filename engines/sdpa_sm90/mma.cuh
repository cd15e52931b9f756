// sdpa_sm90: the operands of the tensor cores. Q, K (and FP8 V^T) sit in shared memory as sub-tiles of 128-, 64- or
// 32-byte rows with the TMA's swizzle of that width; a wgmma reads them through 64-bit descriptors. S = Q K^T and
// O += P V of one KV tile, per element type and width.
#pragma once

#include "common/wgmma_ops.cuh"

namespace rime_dev {
namespace sm90 {

// The swizzle of kRowBytes-byte rows (128, 64 or 32: rime_sm90::row_bytes): the 16-byte chunk index within a
// row XORs with address bits 7.. of the row's start, i.e. with (r * kRowBytes / 128) mod (kRowBytes / 16). Its
// descriptor mode: 1 (128 B), 2 (64 B), 3 (32 B).
template <int kRowBytes>
struct Swizzle {
  static_assert(kRowBytes == 128 || kRowBytes == 64 || kRowBytes == 32, "128-, 64- or 32-byte rows");
  static constexpr int kShift = kRowBytes == 128 ? 0 : kRowBytes == 64 ? 1 : 2;
  static constexpr int kMask = kRowBytes / 16 - 1;
  static constexpr u64 kMode = kRowBytes == 128 ? 1 : kRowBytes == 64 ? 2 : 3;
};

// Byte offset of byte `b` of row `r` in a swizzled tile of kRowBytes-byte rows.
template <int kRowBytes>
__device__ __forceinline__ int swz(int r, int b) {
  using S = Swizzle<kRowBytes>;
  return r * kRowBytes + ((((b >> 4) ^ ((r >> S::kShift) & S::kMask)) << 4) | (b & 15));
}
// K-major operand (rows of kRowBytes, the K dimension contiguous): 8-row groups kRowBytes * 8 apart (SBO), the
// swizzle of the row width; the start advances by 32 bytes per k step inside a row (with 32-byte rows every k step
// is a sub-tile of its own).
template <int kRowBytes>
__device__ __forceinline__ u64 desc_k_major(const void* p) {
  return ((u64(smem_addr(p)) & 0x3FFFF) >> 4) | (u64(1) << 16) | (u64((kRowBytes * 8) >> 4) << 32) |
         (Swizzle<kRowBytes>::kMode << 62);
}
// N-major 16-bit operand (V as it lands: rows of keys, kRowBytes / 2 d per row, that row width's swizzle): 8 keys
// (one swizzle atom) kRowBytes * 8 apart (SBO), the next kRowBytes / 2 d `lbo` bytes on (LBO: the next sub-tile).
template <int kRowBytes>
__device__ __forceinline__ u64 desc_n_major(const void* p, int lbo) {
  return ((u64(smem_addr(p)) & 0x3FFFF) >> 4) | (u64(lbo >> 4) << 16) | (u64((kRowBytes * 8) >> 4) << 32) |
         (Swizzle<kRowBytes>::kMode << 62);
}

// ---- the wgmmas of one KV tile -----------------------------------------------------------------------------

// S (64 x kN) = Q (64 x D, this warpgroup's rows) K^T, K-major both, one k step of 32 bytes at a time.
template <int kIn, int kN>
__device__ __forceinline__ void wgmma_qk(float (&s)[kN / 8][4], u64 a, u64 b, int acc) {
  if constexpr (kIn == RIME_T_E4M3) {
    if constexpr (kN == 64) wgmma_ss_m64n64_e4m3_e4m3(s, a, b, acc);
    else if constexpr (kN == 96) wgmma_ss_m64n96_e4m3_e4m3(s, a, b, acc);
    else if constexpr (kN == 256) wgmma_ss_m64n256_e4m3_e4m3(s, a, b, acc);
    else wgmma_ss_m64n128_e4m3_e4m3(s, a, b, acc);
  } else if constexpr (kIn == RIME_T_E5M2) {
    if constexpr (kN == 64) wgmma_ss_m64n64_e5m2_e5m2(s, a, b, acc);
    else if constexpr (kN == 96) wgmma_ss_m64n96_e5m2_e5m2(s, a, b, acc);
    else if constexpr (kN == 256) wgmma_ss_m64n256_e5m2_e5m2(s, a, b, acc);
    else wgmma_ss_m64n128_e5m2_e5m2(s, a, b, acc);
  } else if constexpr (kIn == RIME_T_BF16) {
    if constexpr (kN == 64) wgmma_ss_m64n64_bf16(s, a, b, acc);
    else if constexpr (kN == 96) wgmma_ss_m64n96_bf16(s, a, b, acc);
    else wgmma_ss_m64n128_bf16(s, a, b, acc);
  } else {
    if constexpr (kN == 64) wgmma_ss_m64n64_f16(s, a, b, acc);
    else if constexpr (kN == 96) wgmma_ss_m64n96_f16(s, a, b, acc);
    else wgmma_ss_m64n128_f16(s, a, b, acc);
  }
}
// S (64 x kN) (+)= Q_hi (shared, E4M3) K^T, K in kIn: the first term of a 16-bit Q split in two
// (Config::kQ16: the only term when kQRounded), as an FP8 Q's Q.K^T over E4M3 K; over E5M2 K the types mix.
template <int kIn, int kN>
__device__ __forceinline__ void wgmma_qk_hi(float (&s)[kN / 8][4], u64 a, u64 b, int acc) {
  if constexpr (kIn == RIME_T_E4M3) wgmma_qk<kIn, kN>(s, a, b, acc);
  else if constexpr (kN == 64) wgmma_ss_m64n64_e4m3_e5m2(s, a, b, acc);
  else if constexpr (kN == 96) wgmma_ss_m64n96_e4m3_e5m2(s, a, b, acc);
  else if constexpr (kN == 256) wgmma_ss_m64n256_e4m3_e5m2(s, a, b, acc);
  else wgmma_ss_m64n128_e4m3_e5m2(s, a, b, acc);
}
// O (64 x D) += P (registers, one k step) V.
template <int kIn, int kD>
__device__ __forceinline__ void wgmma_pv(float (&o)[kD / 8][4], const u32 (&a)[4], u64 b) {
  if constexpr (kIn == RIME_T_E4M3) {
    if constexpr (kD == 64) wgmma_rs_m64n64_e4m3_e4m3(o, a, b, 1);
    else if constexpr (kD == 96) wgmma_rs_m64n96_e4m3_e4m3(o, a, b, 1);
    else if constexpr (kD == 128) wgmma_rs_m64n128_e4m3_e4m3(o, a, b, 1);
    else wgmma_rs_m64n256_e4m3_e4m3(o, a, b, 1);
  } else if constexpr (kIn == RIME_T_E5M2) {  // P is E4M3, V E5M2
    if constexpr (kD == 64) wgmma_rs_m64n64_e4m3_e5m2(o, a, b, 1);
    else if constexpr (kD == 96) wgmma_rs_m64n96_e4m3_e5m2(o, a, b, 1);
    else if constexpr (kD == 128) wgmma_rs_m64n128_e4m3_e5m2(o, a, b, 1);
    else wgmma_rs_m64n256_e4m3_e5m2(o, a, b, 1);
  } else if constexpr (kIn == RIME_T_BF16) {
    if constexpr (kD == 64) wgmma_rs_m64n64_bf16(o, a, b, 1);
    else if constexpr (kD == 80) wgmma_rs_m64n80_bf16(o, a, b, 1);
    else if constexpr (kD == 96) wgmma_rs_m64n96_bf16(o, a, b, 1);
    else if constexpr (kD == 128) wgmma_rs_m64n128_bf16(o, a, b, 1);
    else wgmma_rs_m64n256_bf16(o, a, b, 1);
  } else {
    if constexpr (kD == 64) wgmma_rs_m64n64_f16(o, a, b, 1);
    else if constexpr (kD == 80) wgmma_rs_m64n80_f16(o, a, b, 1);
    else if constexpr (kD == 96) wgmma_rs_m64n96_f16(o, a, b, 1);
    else if constexpr (kD == 128) wgmma_rs_m64n128_f16(o, a, b, 1);
    else wgmma_rs_m64n256_f16(o, a, b, 1);
  }
}

// S (64 x kN) += Q_lo (registers, the A fragment of one k step, E4M3) K^T: Q_hi's second term. The wgmma is
// P.V's: an E4M3 A fragment against an operand of kIn, kN columns.
template <int kIn, int kN>
__device__ __forceinline__ void wgmma_qk_lo(float (&s)[kN / 8][4], const u32 (&a)[4], u64 b) {
  static_assert(kIn == RIME_T_E4M3 || kIn == RIME_T_E5M2, "FP8 K");
  wgmma_pv<kIn, kN>(s, a, b);
}

// O (64 x D) += P V as wgmma_pv, with 8 more columns into e: V^T's 8 rows of ones after its D rows make them
// the rows' sums of P (rime_sm90::vt_sum_rows).
template <int kIn, int kD>
__device__ __forceinline__ void wgmma_pv_sum(float (&o)[kD / 8][4], float (&e)[4], const u32 (&a)[4], u64 b) {
  static_assert(kIn == RIME_T_E4M3 || kIn == RIME_T_E5M2, "FP8 only");
  if constexpr (kIn == RIME_T_E4M3) {
    if constexpr (kD == 64) wgmma_rs_sum_m64n72_e4m3_e4m3(o, e, a, b, 1);
    else if constexpr (kD == 96) wgmma_rs_sum_m64n104_e4m3_e4m3(o, e, a, b, 1);
    else wgmma_rs_sum_m64n136_e4m3_e4m3(o, e, a, b, 1);
  } else {  // P is E4M3, V E5M2
    if constexpr (kD == 64) wgmma_rs_sum_m64n72_e4m3_e5m2(o, e, a, b, 1);
    else if constexpr (kD == 96) wgmma_rs_sum_m64n104_e4m3_e5m2(o, e, a, b, 1);
    else wgmma_rs_sum_m64n136_e4m3_e5m2(o, e, a, b, 1);
  }
}

}  // namespace sm90
}  // namespace rime_dev
