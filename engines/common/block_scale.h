// The block-scaled O arithmetic of SPEC section 5 (NVFP4 and MXFP8), in plain fp32 bit manipulation with no
// includes, so that the same source compiles in the kernels (NVRTC) and in a host test that checks it bit for
// bit against the CPU reference quantizers (tests/test_reference.cpp). sm_89/sm_90 have no cvt to
// E2M1 (that is sm_100+), so the E2M1 rounding is done here in software.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define RIME_HD __host__ __device__ __forceinline__
#else
#define RIME_HD inline
#endif

namespace rime_bs {

RIME_HD unsigned float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  unsigned u;
  __builtin_memcpy(&u, &x, 4);
  return u;
#endif
}
RIME_HD float bits_float(unsigned u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  __builtin_memcpy(&x, &u, 4);
  return x;
#endif
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define RIME_BS_FABS fabsf
#define RIME_BS_FMA fmaf
#define RIME_BS_FMIN fminf
#else
#define RIME_BS_FABS __builtin_fabsf
#define RIME_BS_FMA __builtin_fmaf
#define RIME_BS_FMIN __builtin_fminf
#endif

// E2M1 rounding in four fp32 operations. The grid {0, .5, 1, 1.5, 2, 3, 4, 6} is the multiples of 0.5 below 2
// (code = 2a), the integers from 2 to 4 (code = a + 2) and the even integers from 4 (code = a / 2 + 4), so the
// code of a = |x| is min(7, rint(2a), rint(a + 2), rint(a / 2 + 4)): each argument is the smallest in its own
// range, and rint is monotone, so the minimum of the roundings is the rounding of the minimum. rint's ties to
// even are E2M1's (even codes have even mantissas). Each rint is one fp32 operation on the exact argument plus
// 1.5 * 2^23, where the ulp is 1, so the code lands in the low bits of the sum. Above 6 (infinity included) the
// 7 wins; a NaN makes every candidate NaN and fminf keeps the 7.
constexpr float kE2m1Magic = 12582912.0f;  // 1.5 * 2^23
RIME_HD float e2m1_magnitude_magic(float x) {  // kE2m1Magic + the magnitude code of x
  const float a = RIME_BS_FABS(x);
  return RIME_BS_FMIN(RIME_BS_FMIN(RIME_BS_FMA(a, 2.f, kE2m1Magic), a + (kE2m1Magic + 2.f)),
                      RIME_BS_FMIN(RIME_BS_FMA(a, 0.5f, kE2m1Magic + 4.f), kE2m1Magic + 7.f));
}
// x with a NaN replaced by the largest float: E2M1 has no NaN, and the reference encodes one as +6.
RIME_HD float e2m1_canonical(float x) { return RIME_BS_FMIN(x, 3.40282347e38f); }

// E2M1 code (sign in bit 3) of x, round to nearest even, saturating at 6 (-0 keeps its sign bit).
RIME_HD unsigned e2m1_code(float x) {
  const float c = e2m1_canonical(x);
  return (float_bits(e2m1_magnitude_magic(c)) & 7u) | ((float_bits(c) >> 28) & 8u);
}

// Eight E2M1 codes in one word, x[k] in bits 4k .. 4k + 3 (FP4's packing: the even column in the low nibble).
// The magic sums are added whole, one shift-add per element, and their constant part is taken off at the end
// (the codes, at most 7 each, cannot carry into each other). On the device the eight sign bits are gathered
// by byte permutes: prmt's sign-replicating selector turns each value's top byte into 0x00 or 0xFF, the even
// elements into the bytes of one word and the odd ones into another, so that byte j covers nibbles 2j and
// 2j + 1 (7 instructions for 8 signs instead of a shift and a mask each).
RIME_HD unsigned e2m1_pack8(const float (&x)[8]) {
  float c[8];
  unsigned codes = 0, bias = 0;
  for (int k = 0; k < 8; ++k) {
    c[k] = e2m1_canonical(x[k]);
    codes += float_bits(e2m1_magnitude_magic(c[k])) << (4 * k);
    bias += float_bits(kE2m1Magic) << (4 * k);
  }
  unsigned signs = 0;
#if defined(__CUDA_ARCH__)
  // Selector 0x00FB: byte 0 = sign of a's byte 3, byte 1 = sign of b's byte 3 (byte 7 of the pair);
  // 0x5410: bytes 0-1 of a, then bytes 0-1 of b.
  auto prmt = [](unsigned a, unsigned b, unsigned sel) {
    unsigned d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
  };
  const unsigned even = prmt(prmt(float_bits(c[0]), float_bits(c[2]), 0x00FBu),
                             prmt(float_bits(c[4]), float_bits(c[6]), 0x00FBu), 0x5410u);
  const unsigned odd = prmt(prmt(float_bits(c[1]), float_bits(c[3]), 0x00FBu),
                            prmt(float_bits(c[5]), float_bits(c[7]), 0x00FBu), 0x5410u);
  signs = ((even & 0x0F0F0F0Fu) | (odd & 0xF0F0F0F0u)) & 0x88888888u;
#else
  for (int k = 0; k < 8; ++k) signs |= (float_bits(c[k]) >> 31) << (4 * k + 3);
#endif
  return (codes - bias) | signs;
}

// Value of a non-negative, non-NaN E4M3 byte, branch-free: a normal byte's exponent and mantissa fields, moved
// into fp32's and rebiased (+120), are its value; a subnormal byte m * 2^-9 comes out of the same bits as
// 2^-7 + m * 2^-10, which one exact fma maps back.
RIME_HD float e4m3_value(unsigned byte) {
  const float v = bits_float((byte << 20) + (120u << 23));
  return (byte >> 3) == 0 ? RIME_BS_FMA(v, 2.f, -0.015625f) : v;
}

// 1 / value of a non-negative, non-NaN E4M3 byte, rounded to nearest like the IEEE division 1.0f / value (0 for
// the byte 0: the NVFP4 "inv = dec > 0 ? 1/dec : 0"). On the device the correctly rounded reciprocal
// instruction sequence, not a division, and no branch on the byte's fields.
RIME_HD float e4m3_reciprocal(unsigned byte) {
#if defined(__CUDA_ARCH__)
  const float r = __frcp_rn(e4m3_value(byte));
#else
  const float r = 1.0f / e4m3_value(byte);
#endif
  return byte == 0 ? 0.f : r;
}

// MXFP8: the UE8M0 exponent of ceil_pow2(amax / 448) from amax's fp32 bits, clamped to [0, 254].
RIME_HD unsigned mxfp8_exponent(float amax) {
  const unsigned bits = float_bits(amax);
  int e = int((bits >> 23) & 0xFFu) - 8 + ((bits & 0x7FFFFFu) > 0x600000u ? 1 : 0);
  e = e < 0 ? 0 : (e > 254 ? 254 : e);
  return unsigned(e);
}
// 2^(127 - e) as fp32 (0 when e == 0); e = 254 gives the subnormal 2^-127.
RIME_HD float mxfp8_inverse_scale(unsigned e) {
  if (e == 0) return 0.f;
  if (e == 254) return bits_float(0x00400000u);
  return bits_float((254u - e) << 23);
}

// Value of a UE8M0 scale byte: 2^(e - 127); 0 is the subnormal 2^-127, 0xFF is NaN.
RIME_HD float ue8m0_value(unsigned e) {
  if (e == 0) return bits_float(0x00400000u);
  if (e == 255) return bits_float(0x7fc00000u);
  return bits_float(e << 23);
}

// F8_128x4 byte offset of scale (r, c) in a scale matrix of `cols` columns (a multiple of 4): a row part and a
// column part, so that a kernel can compute the row's part once and add each block's column part.
RIME_HD long long f8_128x4_row_part(long long r, long long cols) {
  return (r / 128) * 128 * cols + (r % 32) * 16 + ((r / 32) % 4) * 4;
}
RIME_HD int f8_128x4_col_part(int c) { return (c / 4) * 512 + (c % 4); }
RIME_HD long long f8_128x4_offset(long long r, long long c, long long cols) {
  return f8_128x4_row_part(r, cols) + f8_128x4_col_part(int(c));
}

// Where the scales of one O row live in sf_o (logical [B, H, R, C], SPEC section 5): block c of the row is at
// base + f8_128x4_col_part(col0 + c). layout 0: per-(b,h) planes; 1: token-major, one [B*R, H*C] matrix.
struct SfRow {
  long long base;
  int col0;
};
RIME_HD SfRow sf_o_row(int layout, long long H, long long R, long long C, long long b, long long h, long long r) {
  if (layout == 0) return SfRow{(b * H + h) * R * C + f8_128x4_row_part(r, C), 0};
  return SfRow{f8_128x4_row_part(b * R + r, H * C), int(h * C)};
}
RIME_HD long long sf_o_offset(int layout, long long H, long long R, long long C, long long b, long long h, long long r,
                              long long c) {
  const SfRow row = sf_o_row(layout, H, R, C, b, h, r);
  return row.base + f8_128x4_col_part(row.col0 + int(c));
}

}  // namespace rime_bs
