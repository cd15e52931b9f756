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

// E2M1 code (sign in bit 3) of x, round to nearest even, saturating at 6. The grid is {0, .5, 1, 1.5, 2, 3, 4,
// 6}. Branch-free, as the epilogue runs it for every element: below 1, two comparisons with the midpoints, strict
// where the tie goes down to the even code (0.25 -> 0) and inclusive where it goes up (0.75 -> 1.0); from 1 up,
// the fp32 bits rounded to one mantissa bit (add 2^21 - 1 and the kept bit: ties to even, 1.25 -> 1.0, 1.75 -> 2,
// 2.5 -> 2, 3.5 -> 4, 5 -> 4) give exponent and mantissa together, which is the code plus 252 (1.0 = 0x3F800000
// -> 254 -> code 2); above 6 (infinity included) the minimum saturates. E2M1 has no NaN; a NaN encodes as +6 like
// the reference (it cannot come from finite inputs).
RIME_HD unsigned e2m1_code(float x) {
  const unsigned bits = float_bits(x), mag = bits & 0x7fffffffu;
  const float a = bits_float(mag);
  const unsigned below_one = unsigned(a > 0.25f) + unsigned(a >= 0.75f);
  const unsigned rounded = ((mag + 0x1FFFFFu + ((mag >> 22) & 1u)) >> 22) - 252u;
  const unsigned from_one = rounded < 7u ? rounded : 7u;
  const unsigned code = mag >= 0x3F800000u ? from_one : below_one;
  const unsigned sign = mag > 0x7F800000u ? 0u : (bits >> 28) & 0x8u;
  return code | sign;
}

// 1 / value of a non-negative, non-NaN E4M3 byte, rounded to nearest like the IEEE division 1.0f / value
// (0 for the byte 0: the NVFP4 "inv = dec > 0 ? 1/dec : 0"). value = M * 2^k with M one of 16 significands;
// 1/value = (1/M) * 2^-k, and 1/M is a compile-time constant rounded once, so the result is the correctly
// rounded reciprocal without a division (or the division subroutine's registers) in the kernel.
RIME_HD float e4m3_reciprocal(unsigned byte) {
  const unsigned e = (byte >> 3) & 0xFu, m = byte & 0x7u;
  if (e == 0) {  // subnormal m * 2^-9: 1/m * 2^9
    const float inv_m = m == 1 ? 1.f : m == 2 ? 0.5f : m == 3 ? 1.f / 3.f : m == 4 ? 0.25f : m == 5 ? 0.2f
                      : m == 6 ? 1.f / 6.f : m == 7 ? 1.f / 7.f : 0.f;
    return inv_m * 512.f;
  }
  // normal (8 + m) / 8 * 2^(e - 7): 8 / (8 + m) * 2^(7 - e), the power of two built from its exponent bits.
  const float inv_m = m == 0 ? 1.f : m == 1 ? 8.f / 9.f : m == 2 ? 0.8f : m == 3 ? 8.f / 11.f : m == 4 ? 8.f / 12.f
                    : m == 5 ? 8.f / 13.f : m == 6 ? 8.f / 14.f : 8.f / 15.f;
  return inv_m * bits_float((134u - e) << 23);
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
