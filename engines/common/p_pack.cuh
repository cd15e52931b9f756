// P as the A operand of the FP8 P.V: quantized to E4M3 on a fixed scale, packed into the m16n8k32 / wgmma k32
// fragment order, and the key order of V^T that this order asks for.
#pragma once

#include "common/device.cuh"

namespace rime_dev {

// P is quantized to E4M3 on a fixed scale: P in [0, 1] times 448 uses E4M3's whole range; 1/448 is folded
// into the final normalization. descale_s / scale_s are therefore not read.
constexpr float kPScale = 448.f;

// The FP8 A fragment (m16n8k32 / wgmma k32 register layout) of the 32 keys [32c, 32c + 32) of P, quantized to
// E4M3 on kPScale (kOnPScale: s already holds P times kPScale). The accumulator gives a thread keys {2t, 2t+1,
// 2t+8, 2t+9} of each 16 where the A fragment wants k positions {4t..4t+3}; the thread's own values are packed
// as they are, so k position 4t + i of each 16-key half holds key 8 * (i / 2) + 2t + i % 2, and the engines
// store V's keys in that order (their Vt).
template <int kNT, bool kOnPScale = false>
__device__ __forceinline__ void pack_p_fp8(const float (&s)[kNT][4], int c, u32 (&a)[4]) {
  constexpr float kFactor = kOnPScale ? 1.f : kPScale;
  auto q8 = [&](int n, int e) { return u32(pack2_fp8<RIME_T_E4M3>(s[n][e] * kFactor, s[n][e + 1] * kFactor)); };
  a[0] = q8(4 * c, 0) | (q8(4 * c + 1, 0) << 16);
  a[1] = q8(4 * c, 2) | (q8(4 * c + 1, 2) << 16);
  a[2] = q8(4 * c + 2, 0) | (q8(4 * c + 3, 0) << 16);
  a[3] = q8(4 * c + 2, 2) | (q8(4 * c + 3, 2) << 16);
}

// P in two E4M3 terms for the 32 keys [32c, 32c + 32): hi as pack_p_fp8 packs it, lo the rounding error of hi
// times kPLoScale, itself in E4M3. P.V with both (hi . V + lo . V / kPLoScale) carries P with a relative error
// of about 2^-8 instead of 2^-4: MXFP8 inputs use it, whose V scales reach 2^2 (SPEC section 6), where one E4M3
// term put 2.4e-5 of O's elements outside SPEC section 10's absolute tolerance on the H200 (every one of them
// explained by P's rounding: docs/testing.md).
constexpr float kPLoScale = 16.f;
template <int kNT>
__device__ __forceinline__ void pack_p_fp8_two_terms(const float (&s)[kNT][4], int c, u32 (&hi)[4], u32 (&lo)[4]) {
  auto split8 = [&](int n, int e, u32& hi_pair, u32& lo_pair) {
    const float x0 = s[n][e] * kPScale, x1 = s[n][e + 1] * kPScale;
    const u16 h = pack2_fp8<RIME_T_E4M3>(x0, x1);
    float h0, h1;
    unpack2_e4m3(h, h0, h1);
    hi_pair = h;
    lo_pair = pack2_fp8<RIME_T_E4M3>((x0 - h0) * kPLoScale, (x1 - h1) * kPLoScale);
  };
  u32 h[8], l[8];
  split8(4 * c, 0, h[0], l[0]);
  split8(4 * c + 1, 0, h[1], l[1]);
  split8(4 * c, 2, h[2], l[2]);
  split8(4 * c + 1, 2, h[3], l[3]);
  split8(4 * c + 2, 0, h[4], l[4]);
  split8(4 * c + 3, 0, h[5], l[5]);
  split8(4 * c + 2, 2, h[6], l[6]);
  split8(4 * c + 3, 2, h[7], l[7]);
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    hi[r] = h[2 * r] | (h[2 * r + 1] << 16);
    lo[r] = l[2 * r] | (l[2 * r + 1] << 16);
  }
}

// The key held at position `pos` of a Vt row (see pack_p_fp8): within each 16 positions, 4t + i holds key
// 8 * (i / 2) + 2t + i % 2. Example: position 6 (t = 1, i = 2) holds key 10.
__host__ __device__ __forceinline__ int vt_key_of_position(int pos) {
  const int half = pos & ~15, t = (pos & 15) >> 2, i = pos & 3;
  return half + 8 * (i >> 1) + 2 * t + (i & 1);
}

}  // namespace rime_dev
