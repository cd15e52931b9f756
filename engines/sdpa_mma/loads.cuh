// sdpa_mma: what a CTA brings into shared memory: the Q tile (cp.async, or a BF16 Q widened to FP16 on the way)
// and each K/V tile (cp.async, dense, ragged or paged by 16-key groups), and the exact widening of FP8 K/V rows to
// FP16 for a 16-bit Q over an FP8 cache.
#pragma once

#include "sdpa_mma/config.cuh"

namespace rime_dev {
namespace mma_engine {

// FP8 rows (kRows x kD bytes at pitch src_pitch) widened into FP16 rows (pitch dst_pitch), exactly: E4M3 and E5M2
// are subsets of FP16. 16 bytes in, 32 out per step; byte 2i of a pair goes to the low half (element order).
template <bool kE5m2, int kRows, int kD, int kThreads>
__device__ __forceinline__ void widen_fp8_rows(const u8* src, int src_pitch, u8* dst, int dst_pitch, int tid) {
  constexpr int kChunks = kD / 16;
  for (int c = tid; c < kRows * kChunks; c += kThreads) {
    const int r = c / kChunks, col = c % kChunks;
    const uint4 raw = *reinterpret_cast<const uint4*>(src + r * src_pitch + col * 16);
    const u32 words[4] = {raw.x, raw.y, raw.z, raw.w};
    u32 h[8];
#pragma unroll
    for (int w = 0; w < 4; ++w)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const u16 pair = static_cast<u16>(words[w] >> (16 * half));
        if constexpr (kE5m2) asm("cvt.rn.f16x2.e5m2x2 %0, %1;\n" : "=r"(h[2 * w + half]) : "h"(pair));
        else asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h[2 * w + half]) : "h"(pair));
      }
    uint4* out = reinterpret_cast<uint4*>(dst + r * dst_pitch + col * 32);
    out[0] = make_uint4(h[0], h[1], h[2], h[3]);
    out[1] = make_uint4(h[4], h[5], h[6], h[7]);
  }
}

// A BF16 Q tile widened to FP16 in shared memory (sQ, pitch kRowQ), exactly: each packed row r is multiplied by
// 2^e_r, e_r chosen so that its largest |q| lies in [2^14, 2^15) (FP16 holds BF16's 8 significant bits; an element
// below 2^-28 of its row's largest becomes an FP16 subnormal and loses bits, a contribution to S far under any
// tolerance). factors[r] = 2^-e_r afterwards, for S's rows. Plain loads: cp.async cannot convert. Rows past the
// tile's packed rows (or a ragged sequence's length) are zero with factor 1.
template <int kTileQ, int kDqk, int kThreads, int kRowQ, int kFeatures>
__device__ __forceinline__ void load_q_bf16_as_fp16(const SdpaParams& p, const BatchExtent& ext, int b, int h_kv,
                                                    int row0, const u8* q_base, u8* sQ, float* factors, int tid) {
  constexpr bool kRaggedQ = (kFeatures & RIME_F_RAGGED_Q) != 0;
  constexpr int kChunks = kDqk * 2 / 16;  // 8 BF16 a chunk
  u32* amax_bits = reinterpret_cast<u32*>(factors);  // non-negative floats order as their bits
  for (int r = tid; r < kTileQ; r += kThreads) amax_bits[r] = 0;
  __syncthreads();
  auto chunk = [&](int c) {
    const int r = c / kChunks, col = c % kChunks, pr = row0 + r;
    const bool ok = pr < p.packed_rows && (!kRaggedQ || pr / p.group < ext.seq_q);
    if (!ok) return make_uint4(0, 0, 0, 0);
    const int i = pr / p.group, h = h_kv * p.group + pr % p.group;
    const u8* src = q_base + (i64(b) * p.q_stride[0] + i64(h) * p.q_stride[1] + i64(q_token<kFeatures>(p, ext.q_tok0, i)) * p.q_stride[2]) * 2;
    return *reinterpret_cast<const uint4*>(src + col * 16);
  };
  auto bf16_at = [](const uint4& v, int k) {
    const u32 w = k < 2 ? (k == 0 ? v.x : v.y) : (k == 2 ? v.z : v.w);
    return w;  // two BF16: low half first
  };
  for (int c = tid; c < kTileQ * kChunks; c += kThreads) {
    const uint4 v = chunk(c);
    float m = 0.f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const u32 w = bf16_at(v, k);
      m = fmaxf(m, fmaxf(fabsf(__uint_as_float(w << 16)), fabsf(__uint_as_float(w & 0xFFFF0000u))));
    }
    atomicMax(amax_bits + c / kChunks, __float_as_uint(m));
  }
  __syncthreads();
  // e from the largest |q|'s exponent: 14 - floor(log2 amax), in [-113, 126] (2^-e then stays a normal float).
  auto exponent_of = [&](int r) {
    const int biased = static_cast<int>((amax_bits[r] >> 23) & 0xFF);
    return amax_bits[r] == 0 || biased == 0xFF ? 0 : min(126, 14 - (biased - 127));
  };
  for (int c = tid; c < kTileQ * kChunks; c += kThreads) {
    const int r = c / kChunks, col = c % kChunks;
    const uint4 v = chunk(c);
    const float f = __int_as_float((127 + exponent_of(r)) << 23);
    u32 h[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const u32 w = bf16_at(v, k);
      h[k] = pack2<RIME_T_FP16>(__uint_as_float(w << 16) * f, __uint_as_float(w & 0xFFFF0000u) * f);
    }
    *reinterpret_cast<uint4*>(sQ + r * kRowQ + col * 16) = make_uint4(h[0], h[1], h[2], h[3]);
  }
  __syncthreads();
  for (int r = tid; r < kTileQ; r += kThreads) factors[r] = __int_as_float((127 - exponent_of(r)) << 23);
}

// The Q tile of packed rows [row0, row0 + kTileQ) into sQ (pitch kRowQ) by cp.async, zero past the packed rows
// (or a ragged sequence's length); a BF16 Q over FP8 K/V is widened instead (load_q_bf16_as_fp16).
template <class C>
__device__ __forceinline__ void load_q_tile(const SdpaParams& p, const BatchExtent& ext, int b, int h_kv, int row0,
                                            const u8* q_base, u8* sQ, u8* smem, int tid) {
  if constexpr (C::kQBf16) {
    load_q_bf16_as_fp16<C::kTileQ, C::kDqk, C::kThreads, C::kRowQ, C::kFeatures>(
        p, ext, b, h_kv, row0, q_base, sQ, reinterpret_cast<float*>(smem + C::kSmem.q_scale), tid);
  } else {
    constexpr int kChunksQ = C::kDqk * C::kEB / 16;
    for (int c = tid; c < C::kTileQ * kChunksQ; c += C::kThreads) {
      const int r = c / kChunksQ, col = c % kChunksQ, pr = row0 + r;
      // Ragged Q: rows past the sequence's length are other sequences' tokens, or past the tensor's end.
      const bool ok = pr < p.packed_rows && (!C::kRaggedQ || pr / p.group < ext.seq_q);
      const int i = ok ? pr / p.group : 0, h = h_kv * p.group + (ok ? pr % p.group : 0);
      const u8* src = q_base + (i64(b) * p.q_stride[0] + i64(h) * p.q_stride[1] +
                                i64(q_token<C::kFeatures>(p, ext.q_tok0, i)) * p.q_stride[2]) * C::kEB;
      cp_async_16(sQ + r * C::kRowQ + col * 16, ok ? src + col * 16 : q_base, ok);
    }
  }
}

// The K/V tiles of one (batch, kv head): load(kt, stage) issues tile kt's cp.asyncs into stage `stage` (the raw
// 8-bit stages for FP8 K/V under a 16-bit Q), keys at or past the sequence's end zero-filled: P is 0 there, and
// 0 * (NaN garbage) would still be NaN.
template <class C>
struct KvTileLoader {
  static constexpr int kTileKv = C::kTileKv, kThreads = C::kThreads, kKvEB = C::kKvEB;
  static constexpr int kChunksK = C::kDqk * kKvEB / 16, kChunksV = C::kDv * kKvEB / 16;  // 16-byte chunks of a row
  // Paged K/V by 16-key groups: a page holds a multiple of 16 keys (validation) and a group starts on a multiple
  // of 16, so its keys share one page. One page-id load per group and tile, shared by K and V, and a chunk's
  // address is its group's base plus a per-thread offset and a constant step. Loading one id per 16-byte chunk
  // (16 loads and 64-bit products per thread and 32-key tile at D 128 FP8) held paged decode to 59% of copy
  // bandwidth at full lengths, where the dense decode of the same kernel reaches 92%: that decode is bound by
  // instruction issue (docs/perf-history.md, "Paged decode (issue 15)", p2). Needs a CTA pass of rows to stay
  // inside a group (rows per pass divide 16); other shapes keep the per-chunk ids (kGroupedPages false).
  static constexpr int kRowsPassK = kThreads / kChunksK, kRowsPassV = kThreads / kChunksV;
  static constexpr bool kGroupedPages = C::kPaged && kThreads % kChunksK == 0 && kThreads % kChunksV == 0 &&
                                        16 % kRowsPassK == 0 && 16 % kRowsPassV == 0 && kTileKv % 16 == 0;
  static constexpr int kGroups = kTileKv / 16;

  const SdpaParams& p;
  u8* smem;
  // The 16-bit K and V stages, by reference to the caller's pointers: copies of them here changed ptxas's schedule
  // of the FP8 kernels (tools/sass/compare.py).
  u8* const& sK;
  u8* const& sV;
  int tid, kv_limit;
  const u8* k_base;
  const u8* v_base;
  const int* page_row;
  i64 k_thread_off, v_thread_off, k_step, v_step;

  // Dense K/V: the (b, h_kv) plane; paged: the pools' h_kv plane, key j at page_table[b][j / page_size]; ragged:
  // the plane from the batch's first token (stride[0] is 0).
  __device__ __forceinline__ KvTileLoader(const SdpaParams& params, const BatchExtent& ext, u8* shared,
                                          u8* const& k_stages, u8* const& v_stages, int b, int h_kv, int thread)
      : p(params), smem(shared), sK(k_stages), sV(v_stages), tid(thread), kv_limit(ext.kv_limit) {
    const i64 kv_b = C::kPaged ? 0 : b;
    k_base = static_cast<const u8*>(p.k) +
             (kv_b * p.k_stride[0] + i64(h_kv) * p.k_stride[1] + i64(ext.kv_tok0) * p.k_stride[2]) * kKvEB;
    v_base = static_cast<const u8*>(p.v) +
             (kv_b * p.v_stride[0] + i64(h_kv) * p.v_stride[1] + i64(ext.kv_tok0) * p.v_stride[2]) * kKvEB;
    page_row = C::kPaged ? p.page_table + i64(b) * p.page_table_stride : nullptr;
    k_thread_off = i64(tid / kChunksK) * p.k_stride[2] * kKvEB + (tid % kChunksK) * 16;
    v_thread_off = i64(tid / kChunksV) * p.v_stride[2] * kKvEB + (tid % kChunksV) * 16;
    k_step = i64(kRowsPassK) * p.k_stride[2] * kKvEB;
    v_step = i64(kRowsPassV) * p.v_stride[2] * kKvEB;
  }

  // Element offset of key j (< kv_limit) from its plane base. A paged key reads its page id, which the caller
  // guarantees in [0, num_pages) for every page that holds a key below seq_len_kv[b] (docs/graph-json.md).
  __device__ __forceinline__ i64 key_offset(int j, const long long (&stride)[3]) const {
    if constexpr (C::kPaged) {
      const int page = __ldg(page_row + (j >> p.page_size_log2));
      return i64(page) * stride[0] + i64(j & ((1 << p.page_size_log2) - 1)) * stride[2];
    } else {
      return i64(j) * stride[2];
    }
  }

  __device__ __forceinline__ void load(int kt, int stage) const {
    constexpr int kLdRowK = C::kLdRowK, kLdRowV = C::kLdRowV;
    // (Two branches rather than a selected base pointer: the selection alone changed the other kernels' SASS.)
    u8* dk;
    u8* dv;
    if constexpr (C::kKv8) {
      dk = smem + C::kSmem.raw_k + stage * kTileKv * kLdRowK;
      dv = smem + C::kSmem.raw_v + stage * kTileKv * kLdRowV;
    } else {
      dk = sK + stage * kTileKv * C::kRowK;
      dv = sV + stage * kTileKv * C::kRowV;
    }
    if constexpr (kGroupedPages) {
      const int slot_mask = (1 << p.page_size_log2) - 1;
      const u8* k_group[kGroups];
      const u8* v_group[kGroups];
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        const int j0 = kt * kTileKv + 16 * g;
        const int page = j0 < kv_limit ? __ldg(page_row + (j0 >> p.page_size_log2)) : 0;
        // The group's key 0 sits at slot j0 & slot_mask of its page; the thread's rows are counted from the tile.
        const i64 slot0 = i64(j0 & slot_mask) - 16 * g;
        k_group[g] = k_base + (i64(page) * p.k_stride[0] + slot0 * p.k_stride[2]) * kKvEB + k_thread_off;
        v_group[g] = v_base + (i64(page) * p.v_stride[0] + slot0 * p.v_stride[2]) * kKvEB + v_thread_off;
      }
#pragma unroll
      for (int n = 0; n < kTileKv * kChunksK / kThreads; ++n) {
        const int r = tid / kChunksK + n * kRowsPassK;
        const bool ok = kt * kTileKv + r < kv_limit;
        cp_async_16(dk + r * kLdRowK + (tid % kChunksK) * 16, ok ? k_group[n * kRowsPassK / 16] + n * k_step : k_base, ok);
      }
#pragma unroll
      for (int n = 0; n < kTileKv * kChunksV / kThreads; ++n) {
        const int r = tid / kChunksV + n * kRowsPassV;
        const bool ok = kt * kTileKv + r < kv_limit;
        cp_async_16(dv + r * kLdRowV + (tid % kChunksV) * 16, ok ? v_group[n * kRowsPassV / 16] + n * v_step : v_base, ok);
      }
      return;
    }
    for (int c = tid; c < kTileKv * kChunksK; c += kThreads) {
      const int r = c / kChunksK, col = c % kChunksK, j = kt * kTileKv + r;
      const bool ok = j < kv_limit;
      cp_async_16(dk + r * kLdRowK + col * 16, k_base + (ok ? key_offset(j, p.k_stride) * kKvEB + col * 16 : 0), ok);
    }
    for (int c = tid; c < kTileKv * kChunksV; c += kThreads) {
      const int r = c / kChunksV, col = c % kChunksV, j = kt * kTileKv + r;
      const bool ok = j < kv_limit;
      cp_async_16(dv + r * kLdRowV + col * 16, v_base + (ok ? key_offset(j, p.v_stride) * kKvEB + col * 16 : 0), ok);
    }
  }
};

}  // namespace mma_engine
}  // namespace rime_dev
