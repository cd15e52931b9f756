// sdpa_fp8_sm90_prepass: FP8 forward on Hopper's warpgroup MMA (wgmma, QGMMA in SASS), for D_qk = D_v = 128.
//
// A CTA is kWgmmaGroups warpgroups of 128 threads and owns 64 packed rows of one (batch, kv head) per
// warpgroup (GQA packs the q heads of a kv head into rows, as in sdpa_mma). KV tiles are 128 keys. Per tile each
// warpgroup
// issues S = Q.K^T as four m64n128k32 wgmmas with both operands in shared memory, runs the online softmax on
// the accumulator in registers (the layout the mma.sync engine uses, so common/attention.cuh serves both),
// quantizes P to E4M3 into the A fragments of four register-A wgmmas and accumulates O += P.V.
//
// wgmma wants both shared-memory operands k-major. Q and K are (rows of d), so they are already; V must be
// (rows of keys) per d, i.e. transposed. Its FP8 has no transposing load, so a pre-pass kernel (vt_fp8 below)
// writes V^T into the workspace once per execute, in the key order that P's register fragment has (see
// pack_p_fp8), with the keys past the valid ones zeroed: the attention kernel then loads K and V^T tiles the
// same way. Every tile is 128 rows of 128 bytes, stored with the 128-byte swizzle: the 16-byte chunk c of row
// r sits at chunk c ^ (r % 8), so the 8 rows of one 1024-byte swizzle atom spread over all banks.
//
// Loads are cp.async (16 bytes, zero-filled past the end), double-buffered: tile kt + 1 streams in while kt
// is computed. The CTA's threads meet at one barrier per tile.
#pragma once

#include "common/attention.cuh"
#include "sdpa_wgmma/layout.h"

namespace rime_dev {

typedef unsigned long long u64;

// A shared-memory matrix descriptor for a k-major tile of 128-byte rows with the 128-byte swizzle: start
// address >> 4 in bits 0-13, the stride between 8-row groups (1024 bytes) >> 4 in bits 32-45, swizzle mode 1
// (128 bytes) in bits 62-63. The leading offset is unused by swizzled k-major layouts. The tile must be
// 1024-byte aligned; a k step within the 128-byte row adds its byte offset >> 4 to the start address.
__device__ __forceinline__ u64 wgmma_desc_sw128(const void* tile) {
  const u64 addr = smem_addr(tile);
  return ((addr & 0x3FFFF) >> 4) | (u64(1) << 16) | (u64(1024 >> 4) << 32) | (u64(1) << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Orders this thread's generic-proxy writes to shared memory (cp.async, st.shared) before later reads by the
// async proxy (wgmma's shared-memory operands).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// The 64 fp32 accumulator operands (%0..%63) of an m64n128 wgmma, d[16][4] in the register layout of the header.
#define RIME_WGMMA_M64N128_ACC(d) \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), \
  "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), \
  "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), \
  "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), \
  "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), \
  "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), \
  "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), \
  "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), \
  "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), \
  "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), \
  "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), \
  "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), \
  "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), \
  "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), \
  "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), \
  "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])

// D (64 x 128 fp32, the warpgroup's accumulator) = A (64 x 32 E4M3, shared memory) x B (128 x 32 E4M3, shared
// memory)^T, plus D when accumulate != 0. Both operands k-major, described by smem descriptors.
__device__ __forceinline__ void wgmma_m64n128k32_ss(float (&d)[16][4], u64 desc_a, u64 desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1;\n}\n"
      :
      RIME_WGMMA_M64N128_ACC(d)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// D += A (64 x 32 E4M3 from registers, the m16n8k32 A fragment of each warp's 16 rows) x B (128 x 32 E4M3,
// shared memory, k-major)^T.
__device__ __forceinline__ void wgmma_m64n128k32_rs(float (&d)[16][4], const u32 (&a)[4], u64 desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
      :
      RIME_WGMMA_M64N128_ACC(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

// Byte offset of the 16-byte chunk `chunk` of row `row` in a 128B-swizzled tile of 128-byte rows.
__device__ __forceinline__ int sw128_offset(int row, int chunk) { return row * 128 + ((chunk ^ (row & 7)) << 4); }

constexpr int kWgmmaD = rime_wgmma::kD;  // D_qk = D_v
constexpr int kWgmmaTileQ = rime_wgmma::kTileQ;
constexpr int kWgmmaGroups = kWgmmaTileQ / 64;  // warpgroups per CTA, 64 rows each
constexpr int kWgmmaTileKv = rime_wgmma::kTileKv;  // keys per KV tile
constexpr int kWgmmaThreads = rime_wgmma::kThreads;
static_assert(kWgmmaThreads == 128 * kWgmmaGroups, "one warpgroup per 64 rows");
constexpr int kWgmmaTileBytes = rime_wgmma::kTileBytes;

// One warpgroup per CTA and two CTAs per SM (255 registers x 128 threads x 2 fit the register file, 2 x 74 KB
// the shared memory): the two CTAs share no barrier, so one's softmax and epilogue run while the other's
// wgmmas keep the tensor cores busy.
template <int kOut, int kFeatures>
__global__ void __launch_bounds__(kWgmmaThreads, 2 / kWgmmaGroups) sdpa_wgmma_fwd(const SdpaParams p) {
  constexpr int kNT = kWgmmaTileKv / 8, kDT = kWgmmaD / 8;
  constexpr bool kSplit = (kFeatures & RIME_F_SPLIT) != 0;
  static_assert((kFeatures & (RIME_F_RAGGED_Q | RIME_F_RAGGED_KV)) == 0,
                "the pre-pass engine does not read token offsets (its row declines ragged graphs)");
  constexpr bool kPadding = (kFeatures & RIME_F_PADDING) != 0;
  constexpr bool kMask = (kFeatures & RIME_F_MASK) != 0;
  static_assert((kFeatures & RIME_F_MX_INPUTS) == 0, "MXFP8 inputs run on sdpa_mxfp8_sm89");

  // Q, then two stages of K, then two of V^T; the base rounded up to the 1024 bytes the swizzle needs (the
  // launcher adds 1024 bytes of slack).
  extern __shared__ __align__(1024) u8 smem_raw[];
  u8* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  constexpr rime_wgmma::Smem kSmem = rime_wgmma::smem();
  u8* sQ = smem + kSmem.q;
  u8* sK = smem + kSmem.k;
  u8* sVt = smem + kSmem.vt;

  pdl_launch_dependents();  // the combine waits for this grid's completion itself
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4, wg = warp / 4;
  const int q_tile = blockIdx.x, h_kv = blockIdx.y;
  const int b = blockIdx.z % p.B, split = blockIdx.z / p.B;
  const int row0 = q_tile * kWgmmaTileQ;

  const BatchExtent ext = batch_extent<kFeatures>(p, b);
  int kt_begin, kt_end;
  kv_tile_range<kWgmmaTileQ, kWgmmaTileKv, kMask, kSplit, kPadding>(p, ext, row0, split, kt_begin, kt_end);
  // Warp w of the CTA holds packed rows 16w .. 16w + 15 (warpgroup wg rows 64wg + 16(w % 4) ..): the wgmma
  // accumulator of a warpgroup gives its warp w % 4 rows 16(w % 4) + g and + 8.
  const ThreadRows rows = thread_rows<kMask, (kFeatures & RIME_F_RAGGED_Q) != 0>(p, ext, row0 + warp * 16 + g, h_kv);

  const u8* q_base = static_cast<const u8*>(p.q);
  const u8* k_base = static_cast<const u8*>(p.k) + i64(b) * p.k_stride[0] + i64(h_kv) * p.k_stride[1];
  const u8* vt_base = p.vt + (i64(b) * p.H_kv + h_kv) * kWgmmaD * i64(p.vt_keys);

  // 128 rows x 8 chunks per tile; 8 consecutive threads read one 128-byte row.
  auto load_kv = [&](int kt, int stage) {
    u8* dk = sK + stage * kWgmmaTileBytes;
    u8* dv = sVt + stage * kWgmmaTileBytes;
#pragma unroll
    for (int n = 0; n < 128 * 8 / kWgmmaThreads; ++n) {
      const int c = tid + n * kWgmmaThreads, r = c / 8, ch = c % 8, j = kt * kWgmmaTileKv + r;
      const bool ok = j < ext.kv_limit;  // K rows past the valid keys are zero (their scores are masked)
      cp_async_16(dk + sw128_offset(r, ch), k_base + (ok ? i64(j) * p.k_stride[2] + ch * 16 : 0), ok);
      cp_async_16(dv + sw128_offset(r, ch), vt_base + i64(r) * p.vt_keys + kt * kWgmmaTileKv + ch * 16, true);
    }
  };
#pragma unroll
  for (int n = 0; n < kWgmmaTileQ * 8 / kWgmmaThreads; ++n) {
    const int c = tid + n * kWgmmaThreads, r = c / 8, ch = c % 8, pr = row0 + r;
    const bool ok = pr < p.packed_rows;
    const int i = ok ? pr / p.group : 0, h = h_kv * p.group + (ok ? pr % p.group : 0);
    const u8* src = q_base + i64(b) * p.q_stride[0] + i64(h) * p.q_stride[1] + i64(i) * p.q_stride[2];
    cp_async_16(sQ + sw128_offset(r, ch), ok ? src + ch * 16 : q_base, ok);
  }
  // V^T is the pre-pass's output: under programmatic launch this kernel may have started before it finished.
  pdl_wait();
  if (kt_begin < kt_end) load_kv(kt_begin, 0);
  cp_async_commit();

  const float scale_log2 = p.attn_scale * kLog2e * p.descale_q[0] * p.descale_k[0];
  const u64 desc_q = wgmma_desc_sw128(sQ + wg * 64 * 128);

  float o_acc[kDT][4];
  float s[kNT][4];  // written by the first S wgmma of each tile (accumulate off); zeroed once for the compiler
  zero_fragments(o_acc);
  zero_fragments(s);
  float m_run[2] = {neg_inf(), neg_inf()};  // running max of scores (log2 units)
  float l_run[2] = {0.f, 0.f};              // this thread's part of the row sum

  for (int kt = kt_begin; kt < kt_end; ++kt) {
    const int stage = (kt - kt_begin) & 1;
    if (kt + 1 < kt_end) {
      load_kv(kt + 1, stage ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    fence_proxy_async();
    __syncthreads();
    const u64 desc_k = wgmma_desc_sw128(sK + stage * kWgmmaTileBytes);
    const u64 desc_vt = wgmma_desc_sw128(sVt + stage * kWgmmaTileBytes);

    // S = Q K^T: four 32-byte k steps along d (+2 in the descriptor's address field is 32 bytes).
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kWgmmaD / 32; ++kk) wgmma_m64n128k32_ss(s, desc_q + 2 * kk, desc_k + 2 * kk, kk);
    wgmma_commit();
    wgmma_wait<0>();

    // Scores to log2 units, then the bound checks in a loop of their own that tiles inside every row's keys
    // branch over. Fused into the scaling loop under a runtime flag (softmax_step), ptxas if-converted them
    // into every tile of the block-scaled O kernels (not of the FP8 O one): 128 compares and selects per
    // tile, +13% kernel time at S_kv 7800.
#pragma unroll
    for (int n = 0; n < kNT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] *= scale_log2;
    if (kMask || kPadding || (kt + 1) * kWgmmaTileKv > p.S_kv) {
#pragma unroll
      for (int n = 0; n < kNT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (key_outside(rows, e / 2, kt * kWgmmaTileKv + n * 8 + 2 * t + (e & 1))) s[n][e] = neg_inf();
    }
    float alpha[2];
    online_softmax(s, m_run, l_run, alpha);
    rescale_rows(o_acc, alpha);

    // O += P V: four 32-key k steps, P from registers.
    u32 a[kWgmmaTileKv / 32][4];
#pragma unroll
    for (int c = 0; c < kWgmmaTileKv / 32; ++c) pack_p_fp8(s, c, a[c]);
    wgmma_fence();
#pragma unroll
    for (int c = 0; c < kWgmmaTileKv / 32; ++c) wgmma_m64n128k32_rs(o_acc, a[c], desc_vt + 2 * c);
    wgmma_commit();
    wgmma_wait<0>();
    __syncthreads();  // the next iteration's prefetch overwrites this stage
  }
  cp_async_wait<0>();

  // Block-scaled O is staged where the K and V^T tiles were: the loop's last barrier ended their reads, and an
  // empty tile range loaded none.
  static_assert(BlockStage<kWgmmaTileQ, kWgmmaD>::kBytes <= 4 * kWgmmaTileBytes, "the O stage fits the K/V^T tiles");
  attention_epilogue<RIME_T_E4M3, kOut, kWgmmaD, kFeatures, kWgmmaTileQ>(
      p, o_acc, m_run, l_run, rows, b, split, h_kv, q_tile == int(gridDim.x) - 1, tid, kWgmmaThreads, sK);
}

// The pre-pass: V (rows of d per key) of one (batch, kv head) and 128-key tile into V^T (rows of keys per d)
// in the workspace, key positions permuted within each 16 as pack_p_fp8 wants (vt_key_of_position), keys at
// or past the batch's valid length (seq_len_kv under padding, S_kv, the round-up to 128) written as zero so
// that P = 0 there never meets a NaN.
template <int kFeatures>
__global__ void __launch_bounds__(256) vt_fp8(const SdpaParams p) {
  constexpr bool kPadding = (kFeatures & RIME_F_PADDING) != 0;
  constexpr int kPitch = kWgmmaD + 4;  // [key][d] bytes, padded by a word
  __shared__ __align__(16) u8 tile[kWgmmaTileKv * kPitch];
  pdl_launch_dependents();  // the attention kernel waits for this grid's completion before it reads V^T
  const int tid = threadIdx.x, kt = blockIdx.x, h_kv = blockIdx.y, b = blockIdx.z;
  const int kv_limit = batch_extent<kFeatures>(p, b).kv_limit;
  const u8* v_base = static_cast<const u8*>(p.v) + i64(b) * p.v_stride[0] + i64(h_kv) * p.v_stride[1];
  for (int c = tid; c < kWgmmaTileKv * (kWgmmaD / 16); c += 256) {
    const int r = c / (kWgmmaD / 16), ch = c % (kWgmmaD / 16), j = kt * kWgmmaTileKv + r;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (j < kv_limit) v = *reinterpret_cast<const uint4*>(v_base + i64(j) * p.v_stride[2] + ch * 16);
    u32* dst = reinterpret_cast<u32*>(tile + r * kPitch + ch * 16);
    dst[0] = v.x;
    dst[1] = v.y;
    dst[2] = v.z;
    dst[3] = v.w;
  }
  __syncthreads();
  // Thread: one d row, 64 consecutive key positions (4 x 16 bytes).
  const int d = tid % kWgmmaD, pos_base = (tid / kWgmmaD) * 64;
  u8* out = p.vt + ((i64(b) * p.H_kv + h_kv) * kWgmmaD + d) * i64(p.vt_keys) + kt * kWgmmaTileKv;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int pos0 = pos_base + q * 16;
    u32 w[4] = {0, 0, 0, 0};
#pragma unroll
    for (int i = 0; i < 16; ++i) w[i / 4] |= u32(tile[vt_key_of_position(pos0 + i) * kPitch + d]) << (8 * (i % 4));
    *reinterpret_cast<uint4*>(out + pos0) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

}  // namespace rime_dev
