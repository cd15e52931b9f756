// Device building blocks of the mma.sync engines: inline PTX only, no includes, so that NVRTC compiles them
// with no host or toolkit headers. Every wrapper names the PTX it emits.
#pragma once

#include "common/block_scale.h"
#include "common/fast_div.h"
#include "common/params.h"

namespace rime_dev {

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
typedef long long i64;

__device__ __forceinline__ u32 smem_addr(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

// 16-byte global->shared copy; src_bytes 0 writes zeros (rows past the end of a tensor).
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(u32 (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem)));
}

// The same at a shared-memory address (smem_addr): for address arithmetic done on the 32-bit shared offsets.
__device__ __forceinline__ void ldmatrix_x4_trans(u32 (&r)[4], u32 smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem));
}

// Stores four 8x8 b16 matrices (sm_90): lane l gives the address of row l % 8 of matrix l / 8, and r[i] of lane
// t lands in matrix i, row t / 4, bytes 4 (t % 4) .. 4 (t % 4) + 3.
__device__ __forceinline__ void stmatrix_x4(void* smem, const u32 (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_addr(smem)), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}
__device__ __forceinline__ void stmatrix_x4(u32 smem, const u32 (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem), "r"(r[0]), "r"(r[1]),
               "r"(r[2]), "r"(r[3])
               : "memory");
}

// D += A * B with m16n8 fragments (fp32 accumulate), A of type kTypeA and B of kTypeB (FP8 P.V: P is E4M3,
// V the input type, as A or, in the decode tiles' O^T = V^T P^T, as B).
template <int kTypeA, int kTypeB>
__device__ __forceinline__ void mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  if constexpr (kTypeA == RIME_T_FP16) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else if constexpr (kTypeA == RIME_T_BF16) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else if constexpr (kTypeA == RIME_T_E4M3 && kTypeB == RIME_T_E4M3) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else if constexpr (kTypeA == RIME_T_E5M2 && kTypeB == RIME_T_E4M3) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else if constexpr (kTypeA == RIME_T_E4M3 && kTypeB == RIME_T_E5M2) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    static_assert(kTypeA == RIME_T_E5M2 && kTypeB == RIME_T_E5M2, "unsupported mma operand types");
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Two floats to a packed pair: lo in the low half. cvt.*x2 puts its FIRST source in the HIGH half.
template <int kType>
__device__ __forceinline__ u32 pack2(float lo, float hi) {
  u32 r;
  if constexpr (kType == RIME_T_FP16) {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  } else {
    static_assert(kType == RIME_T_BF16, "pack2 is for 16-bit types");
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  }
  return r;
}

// Two floats to two FP8 bytes (lo in byte 0), round to nearest even, saturating to the finite max.
template <int kType>
__device__ __forceinline__ u16 pack2_fp8(float lo, float hi) {
  u16 r;
  if constexpr (kType == RIME_T_E4M3) {
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(r) : "f"(hi), "f"(lo));
  } else {
    static_assert(kType == RIME_T_E5M2, "pack2_fp8 is for FP8 types");
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;\n" : "=h"(r) : "f"(hi), "f"(lo));
  }
  return r;
}

// The two E4M3 values of a packed pair (byte 0 first), exactly (E4M3 is a subset of FP16).
__device__ __forceinline__ void unpack2_e4m3(u16 pair, float& lo, float& hi) {
  u32 h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h2) : "h"(pair));
  asm("cvt.f32.f16 %0, %1;\n" : "=f"(lo) : "h"(static_cast<u16>(h2 & 0xFFFF)));
  asm("cvt.f32.f16 %0, %1;\n" : "=f"(hi) : "h"(static_cast<u16>(h2 >> 16)));
}

// Programmatic dependent launch (sm_90+; nothing before, where the plan launches plainly). launch_dependents:
// this CTA no longer holds the next kernel in the stream back from launching (it still waits for our results,
// below). wait: blocks until the previous kernel in the stream has completed and its writes are visible; a
// kernel launched without the attribute passes straight through.
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// tanh on the MUFU (sm_75 and later): relative error about 2^-11, as FlashAttention's soft-capping uses it.
__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

// Non-negative floats order like their bit patterns, so an integer atomicMax is a float max (target zeroed).
__device__ __forceinline__ void atomic_max_nonneg(float* target, float value) {
  if (value > 0.f) atomicMax(reinterpret_cast<unsigned int*>(target), __float_as_uint(value));
}

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// Stores two adjacent output elements (columns c, c+1 of one row) of an O tensor of type kOut.
template <int kOut>
__device__ __forceinline__ void store_pair(void* base, i64 offset, float a, float b) {
  if constexpr (kOut == RIME_T_FP16 || kOut == RIME_T_BF16) {
    *reinterpret_cast<u32*>(static_cast<u16*>(base) + offset) = pack2<kOut>(a, b);
  } else if constexpr (kOut == RIME_T_E4M3 || kOut == RIME_T_E5M2) {
    *reinterpret_cast<u16*>(static_cast<u8*>(base) + offset) = pack2_fp8<kOut>(a, b);
  } else {
    static_assert(kOut == RIME_T_FP32, "unsupported O type");
    float2 v;
    v.x = a;
    v.y = b;
    *reinterpret_cast<float2*>(static_cast<float*>(base) + offset) = v;
  }
}

// Block-scaled O (SPEC section 5). kOut names the format; kBlock is its block along d (0: not block-scaled).
template <int kOut>
struct OutFormat {
  static constexpr int kBlock = kOut == RIME_T_NVFP4 ? 16 : (kOut == RIME_T_MXFP8 ? 32 : 0);
};

// The scale of one block from the amax of its o = O * scale_o values: the sf_o byte and the fp32 multiplier
// that maps the block onto the element grid. fp32 and rounding exactly as the reference quantizers.
template <int kOut>
__device__ __forceinline__ void block_scale(float amax, u32& sf, float& inv) {
  if constexpr (kOut == RIME_T_NVFP4) {
    constexpr float kSixth = 1.0f / 6.0f;
    sf = pack2_fp8<RIME_T_E4M3>(__fmul_rn(amax, kSixth), 0.f) & 0xFFu;
    inv = rime_bs::e4m3_reciprocal(sf);  // == (dec > 0 ? 1.0f / dec : 0) for dec = value(sf), sf != NaN
  } else {
    static_assert(kOut == RIME_T_MXFP8, "block_scale is for NVFP4 / MXFP8");
    sf = rime_bs::mxfp8_exponent(amax);
    inv = rime_bs::mxfp8_inverse_scale(sf);
  }
}

// Quantizes and stores columns (c, c+1) of a block-scaled O row; `offset` is the element offset of column c
// (even: FP4 packs column c in the low nibble of byte offset / 2).
template <int kOut>
__device__ __forceinline__ void store_block_pair(void* base, i64 offset, float a, float b, float inv) {
  if constexpr (kOut == RIME_T_NVFP4) {
    static_cast<u8*>(base)[offset / 2] =
        u8(rime_bs::e2m1_code(__fmul_rn(a, inv)) | (rime_bs::e2m1_code(__fmul_rn(b, inv)) << 4));
  } else {
    *reinterpret_cast<u16*>(static_cast<u8*>(base) + offset) = pack2_fp8<RIME_T_E4M3>(__fmul_rn(a, inv), __fmul_rn(b, inv));
  }
}

// Zeroes what sf_o holds beyond the scales of valid blocks: the pad rows [S_q, R) of per-(b,h) planes (SPEC
// section 5), `heads` heads from h0, spread over `threads` threads.
__device__ __forceinline__ void zero_sf_pad_rows(u8* sf_o, int H, int R, int C, int S_q, int b, int h0, int heads,
                                                 int thread, int threads) {
  const int per_head = (R - S_q) * C;
  for (int n = thread; n < heads * per_head; n += threads) {
    const int h = h0 + n / per_head, r = S_q + (n % per_head) / C, c = n % C;
    sf_o[rime_bs::sf_o_offset(0, H, R, C, b, h, r, c)] = 0;
  }
}

}  // namespace rime_dev
