// sdpa_mma_f16 and sdpa_mma_fp8: FlashAttention-2 style forward on mma.sync, one template for both.
//
// A CTA owns kTileQ packed rows of one (batch, kv head): GQA packs the `group` q heads that share a kv head
// into the row dimension (packed row r -> q row i = r / group, head h_kv * group + r % group), so K and V are
// read once per kv head, and decode (S_q = 1) fills a 16-row warp tile with up to 16 q heads. Each warp owns 16
// rows; K/V tiles of kTileKv keys (32 or 64) are double-buffered with cp.async.
//
// Q.K^T and P.V use m16n8k16 (FP16/BF16) or m16n8k32 (FP8). For both, one k step is 32 bytes of the reduced
// dimension, so the ldmatrix addressing of Q and K fragments is the same byte pattern. For FP8, P.V needs V
// k-major (mma's B operand) and sm_89/sm_90 have no 8-bit ldmatrix.trans, so each V tile is transposed once
// in shared memory into Vt, with its keys permuted to match the register layout of P: the S accumulator gives
// a thread keys {2t, 2t+1, 2t+8, 2t+9} of 16 while the FP8 A fragment wants k positions {4t..4t+3}. Since the
// contraction does not care about the order of keys, Vt stores key kv(p) at position p, where within each
// 16-key half p = 4t + i holds kv = 8 * (i / 2) + 2t + i % 2. Example: t = 1, i = 2 -> p = 6 holds key 10.
#pragma once

#include "common/attention.cuh"
#include "sdpa_mma/layout.h"

namespace rime_dev {

template <int kIn>
struct InType {
  static constexpr int kBytes = (kIn == RIME_T_FP16 || kIn == RIME_T_BF16) ? 2 : 1;
  static constexpr bool kFp8 = kBytes == 1;
};

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

// One row tile of one (batch, kv head) over KV tiles [kt_lo, kt_hi) (kt_lo < 0: the tiles kv_tile_range gives
// this split), into split slot `split` of the partials under split.
template <int kIn, int kOut, int kDqk, int kDv, int kTileQ, int kTileKv, int kFeatures>
__device__ __forceinline__ void sdpa_mma_tile(const SdpaParams& p, u8* smem, int q_tile, int h_kv, int b, int split,
                                              int kt_lo, int kt_hi, bool last_q_tile) {
  using T = InType<kIn>;
  constexpr int kEB = T::kBytes;
  constexpr int kThreads = rime_mma::threads(kTileQ);
  // A 16-bit Q over FP8 K/V (RIME_F_KV_FP8): computed in FP16; K and V arrive as FP8 bytes (kKvEB) in raw stages
  // and are widened exactly to FP16 tiles before the mmas, Q is FP16 or a BF16 widened by a row factor (below).
  constexpr bool kKv8 = (kFeatures & RIME_F_KV_FP8) != 0;
  constexpr bool kQBf16 = kKv8 && (kFeatures & RIME_F_Q_BF16) != 0;
  constexpr int kKvEB = kKv8 ? 1 : kEB;
  static_assert(!kKv8 || kIn == RIME_T_FP16, "a 16-bit Q over FP8 K/V computes in FP16");
  // Shared memory as layout.h lays it out for the host too; pitches in bytes, padded to spread banks.
  constexpr rime_mma::Smem kSmem =
      rime_mma::smem(kTileQ, kTileKv, kDqk, kDv, kEB, (kFeatures & RIME_F_MX_INPUTS) != 0, kKv8);
  constexpr int kRowQ = kSmem.row_q, kRowK = kSmem.row_k, kRowV = kSmem.row_v, kRowVt = kSmem.row_vt;
  constexpr int kKSteps = kDqk * kEB / 32;  // 32-byte k steps of Q.K^T
  constexpr int kNT = kTileKv / 8;          // 8-key accumulator tiles per KV tile
  constexpr int kDT = kDv / 8;              // 8-column accumulator tiles of O
  constexpr bool kQInRegs = kDqk * kEB <= 256;
  constexpr bool kSplit = (kFeatures & RIME_F_SPLIT) != 0;
  constexpr bool kPadding = (kFeatures & RIME_F_PADDING) != 0;
  constexpr bool kMask = (kFeatures & RIME_F_MASK) != 0;
  // MXFP8 inputs (SPEC section 6): one UE8M0 scale per 32 d of Q and K rows and per 32 keys of V columns. A
  // 32-byte k step of Q.K^T is exactly one Q/K scale block and a 32-key P.V step one V block, so each mma goes
  // into a zeroed fp32 partial that is scaled (by a power of two: exact) and added.
  constexpr bool kMx = (kFeatures & RIME_F_MX_INPUTS) != 0;
  constexpr bool kPaged = (kFeatures & RIME_F_PAGED) != 0;
  static_assert(!kPaged || kPadding, "paged K/V comes with per-sequence lengths (validation requires padding)");
  constexpr int kVBlocks = kTileKv / 32;  // V scale blocks per KV tile
  static_assert(!kMx || T::kFp8, "MXFP8 inputs are FP8");
  static_assert(!kKv8 || !kMx, "MXFP8 inputs are not a 16-bit Q over FP8 K/V");
  // FP8 decode tiles (16 rows, one warp) skip the shared-memory transpose of V: they compute O^T = V^T P^T,
  // whose A operand (V^T, d x keys) comes straight from the V tile through ldmatrix.trans (on byte pairs) and
  // two byte permutes, and whose B operand (P^T) is the P fragment as it is. See the P.V step below.
  constexpr bool kVtRegs = T::kFp8 && !kMx && kTileQ <= 32;  // rime_mma::vt_in_smem's complement
  // A 32-byte k step of Q.K^T is 16 elements of a 16-bit Q (head dims 80 and 96 too) and 32 of an FP8 one.
  static_assert(kDqk * kEB % 32 == 0 && kDv % 16 == 0, "head dims must be whole 32-byte k steps and multiples of 16");
  static_assert(kTileKv % 32 == 0, "KV tiles are whole 32-key FP8 k steps");

  u8* sQ = smem + kSmem.q;
  u8* sK = smem + kSmem.k;
  u8* sV = smem + kSmem.v;
  u8* sVt = smem + kSmem.vt;  // FP8 tiles that transpose V in shared memory
  // FP8 K/V under a 16-bit Q land in raw 8-bit stages (pitches kLdRowK / kLdRowV), widened into sK / sV per tile.
  constexpr int kLdRowK = kSmem.row_raw_k, kLdRowV = kSmem.row_raw_v;
  // MXFP8: the KV tile's scales as fp32, K [key][k step] and V [d][32-key block].
  float* sSk = reinterpret_cast<float*>(smem + kSmem.scales_k);
  float* sSv = reinterpret_cast<float*>(smem + kSmem.scales_v);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int row0 = q_tile * kTileQ;

  const BatchExtent ext = batch_extent<kFeatures>(p, b);
  const int kv_limit = ext.kv_limit;
  int kt_begin = kt_lo, kt_end = kt_hi;
  if (kt_lo < 0) kv_tile_range<kTileQ, kTileKv, kMask, kSplit, kPadding>(p, ext, row0, split, kt_begin, kt_end);
  if constexpr (kSplit) {
    if (kt_begin >= kt_end) {
      write_empty_chunk_lse<kTileQ, (kFeatures & RIME_F_RAGGED_Q) != 0>(p, ext, b, split, h_kv, row0, tid, kThreads);
      return;
    }
  }
  // The two rows this thread holds in every accumulator: warp row g and g + 8.
  const ThreadRows rows = thread_rows<kMask, (kFeatures & RIME_F_RAGGED_Q) != 0>(p, ext, row0 + warp * 16 + g, h_kv);

  const u8* q_base = static_cast<const u8*>(p.q);
  // Dense K/V: the (b, h_kv) plane; paged: the pools' h_kv plane, key j at page_table[b][j / page_size]; ragged:
  // the plane from the batch's first token (stride[0] is 0).
  const i64 kv_b = kPaged ? 0 : b;
  const u8* k_base = static_cast<const u8*>(p.k) +
                     (kv_b * p.k_stride[0] + i64(h_kv) * p.k_stride[1] + i64(ext.kv_tok0) * p.k_stride[2]) * kKvEB;
  const u8* v_base = static_cast<const u8*>(p.v) +
                     (kv_b * p.v_stride[0] + i64(h_kv) * p.v_stride[1] + i64(ext.kv_tok0) * p.v_stride[2]) * kKvEB;
  const int* page_row = kPaged ? p.page_table + i64(b) * p.page_table_stride : nullptr;
  // Element offset of key j (< kv_limit) from its plane base. A paged key reads its page id, which the caller
  // guarantees in [0, num_pages) for every page that holds a key below seq_len_kv[b] (docs/graph-json.md).
  auto key_offset = [&](int j, const long long(&stride)[3]) -> i64 {
    if constexpr (kPaged) {
      const int page = __ldg(page_row + (j >> p.page_size_log2));
      return i64(page) * stride[0] + i64(j & ((1 << p.page_size_log2) - 1)) * stride[2];
    } else {
      return i64(j) * stride[2];
    }
  };

  constexpr int kChunksK = kDqk * kKvEB / 16, kChunksV = kDv * kKvEB / 16;  // 16-byte chunks of a K / V row as loaded
  // Paged K/V by 16-key groups: a page holds a multiple of 16 keys (validation) and a group starts on a multiple
  // of 16, so its keys share one page. One page-id load per group and tile, shared by K and V, and a chunk's
  // address is its group's base plus a per-thread offset and a constant step. Loading one id per 16-byte chunk
  // (16 loads and 64-bit products per thread and 32-key tile at D 128 FP8) held paged decode to 59% of copy
  // bandwidth at full lengths, where the dense decode of the same kernel reaches 92%: that decode is bound by
  // instruction issue (docs/perf-history.md, "Paged decode (issue 15)", p2). Needs a CTA pass of rows to stay inside
  // a group (rows per pass divide 16); other shapes keep the per-chunk ids (kGroupedPages false).
  constexpr int kRowsPassK = kThreads / kChunksK, kRowsPassV = kThreads / kChunksV;
  constexpr bool kGroupedPages = kPaged && kThreads % kChunksK == 0 && kThreads % kChunksV == 0 &&
                                 16 % kRowsPassK == 0 && 16 % kRowsPassV == 0 && kTileKv % 16 == 0;
  constexpr int kGroups = kTileKv / 16;
  const i64 k_thread_off = i64(tid / kChunksK) * p.k_stride[2] * kKvEB + (tid % kChunksK) * 16;
  const i64 v_thread_off = i64(tid / kChunksV) * p.v_stride[2] * kKvEB + (tid % kChunksV) * 16;
  const i64 k_step = i64(kRowsPassK) * p.k_stride[2] * kKvEB, v_step = i64(kRowsPassV) * p.v_stride[2] * kKvEB;

  auto load_kv = [&](int kt, int stage) {
    // (Two branches rather than a selected base pointer: the selection alone changed the other kernels' SASS.)
    u8* dk;
    u8* dv;
    if constexpr (kKv8) {
      dk = smem + kSmem.raw_k + stage * kTileKv * kLdRowK;
      dv = smem + kSmem.raw_v + stage * kTileKv * kLdRowV;
    } else {
      dk = sK + stage * kTileKv * kRowK;
      dv = sV + stage * kTileKv * kRowV;
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
        const bool ok = kt * kTileKv + r < kv_limit;  // rows past the valid keys are zero-filled (see below)
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
      // Rows past the valid keys are zero-filled: P is 0 there, and 0 * (NaN garbage) would still be NaN.
      const bool ok = j < kv_limit;
      cp_async_16(dv + r * kLdRowV + col * 16, v_base + (ok ? key_offset(j, p.v_stride) * kKvEB + col * 16 : 0), ok);
    }
  };

  // Q tile, then the first K/V tile, in one cp.async group.
  if constexpr (kQBf16) {
    load_q_bf16_as_fp16<kTileQ, kDqk, kThreads, kRowQ, kFeatures>(
        p, ext, b, h_kv, row0, q_base, sQ, reinterpret_cast<float*>(smem + kSmem.q_scale), tid);
  } else {
    constexpr int kChunksQ = kDqk * kEB / 16;
    for (int c = tid; c < kTileQ * kChunksQ; c += kThreads) {
      const int r = c / kChunksQ, col = c % kChunksQ, pr = row0 + r;
      // Ragged Q: rows past the sequence's length are other sequences' tokens, or past the tensor's end.
      const bool ok = pr < p.packed_rows && ((kFeatures & RIME_F_RAGGED_Q) == 0 || pr / p.group < ext.seq_q);
      const int i = ok ? pr / p.group : 0, h = h_kv * p.group + (ok ? pr % p.group : 0);
      const u8* src = q_base + (i64(b) * p.q_stride[0] + i64(h) * p.q_stride[1] + i64(q_token<kFeatures>(p, ext.q_tok0, i)) * p.q_stride[2]) * kEB;
      cp_async_16(sQ + r * kRowQ + col * 16, ok ? src + col * 16 : q_base, ok);
    }
  }
  if (kt_begin < kt_end) load_kv(kt_begin, 0);
  cp_async_commit();

  float scale_log2 = p.attn_scale * kLog2e;
  if constexpr ((T::kFp8 && !kMx) || kKv8)
    scale_log2 *= descale_at(p.descale_q, p.descale_q_stride, b, h_kv) * descale_at(p.descale_k, p.descale_k_stride, b, h_kv);
  // Soft-capping (SPEC section 2): the cap's factors of softmax_step.
  constexpr bool kSoftcap = (kFeatures & RIME_F_SOFTCAP) != 0;
  const float cap_in = kSoftcap ? scale_log2 / (kLog2e * p.logit_softcap) : 0.f;
  const float cap_out = kSoftcap ? p.logit_softcap * kLog2e : 0.f;
  // A BF16 Q's rows were widened by 2^e each (load_q_bf16_as_fp16): S's rows are multiplied back by 2^-e.
  float q_row_factor[2] = {1.f, 1.f};
  if constexpr (kQBf16) {
    __syncthreads();  // the factors were written after the widening's last barrier
    const float* factors = reinterpret_cast<const float*>(smem + kSmem.q_scale);
    for (int r = 0; r < 2; ++r) q_row_factor[r] = factors[warp * 16 + g + 8 * r];
  }

  // MXFP8: this thread's two rows' Q scales, one per k step (0 for a row past the end).
  float q_scale[2][kMx ? kKSteps : 1];
  if constexpr (kMx) {
    for (int r = 0; r < 2; ++r) {
      const u8* plane = p.sf_q + (i64(b) * p.H_q + rows.h[r]) * p.sf_q_rows * p.sf_q_cols;
      for (int kk = 0; kk < kKSteps; ++kk)
        q_scale[r][kk] = rows.exists[r] ? rime_bs::ue8m0_value(plane[rime_bs::f8_128x4_offset(rows.i[r], kk, p.sf_q_cols)]) : 0.f;
    }
  }
  const u8* sf_k_plane = kMx ? p.sf_k + (i64(b) * p.H_kv + h_kv) * p.sf_k_rows * p.sf_k_cols : nullptr;
  const u8* sf_v_plane = kMx ? p.sf_v + (i64(b) * p.H_kv + h_kv) * p.sf_v_rows * p.sf_v_cols : nullptr;

  float o_acc[kDT][4];
  zero_fragments(o_acc);
  // kVtRegs: O^T accumulators, [16-d m tile][8-row n tile][4]. Element e of m tile 2u + par holds d =
  // 32u + 16 * (e / 2) + 2g + par (even d in tile 2u, odd in 2u + 1) of packed row 8n + 2t + (e & 1).
  float ot[kVtRegs ? kDv / 16 : 1][2][4];
#pragma unroll
  for (int m = 0; m < (kVtRegs ? kDv / 16 : 1); ++m)
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) ot[m][n][e] = 0.f;
  // Rows 8-15 of a warp's 16 exist only for more than 8 packed rows from its first (GQA groups above 8, or
  // S_q > 1).
  const bool second_row_tile = p.packed_rows - (row0 + warp * 16) > 8;
  float m_run[2] = {neg_inf(), neg_inf()};  // running max of scores (log2 units)
  float l_run[2] = {0.f, 0.f};              // this thread's part of the row sum
  u32 q_frag[kQInRegs ? kKSteps : 1][4];

  const u8* warp_q = sQ + warp * 16 * kRowQ;
  for (int kt = kt_begin; kt < kt_end; ++kt) {
    const int stage = (kt - kt_begin) & 1;
    if (kt + 1 < kt_end) {
      load_kv(kt + 1, stage ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (kQInRegs && kt == kt_begin) {
      for (int kk = 0; kk < kKSteps; ++kk)
        ldmatrix_x4(q_frag[kQInRegs ? kk : 0],
                    warp_q + ((lane & 7) + ((lane >> 3) & 1) * 8) * kRowQ + kk * 32 + ((lane >> 4) & 1) * 16);
    }
    if constexpr (kKv8) {
      // This stage's FP8 K and V rows widened into the one FP16 K and V tile the mmas read (the previous tile's
      // readers passed the loop's closing barrier).
      constexpr bool kE5m2 = (kFeatures & RIME_F_KV_E5M2) != 0;
      widen_fp8_rows<kE5m2, kTileKv, kDqk, kThreads>(smem + kSmem.raw_k + stage * kTileKv * kLdRowK, kLdRowK, sK,
                                                     kRowK, tid);
      widen_fp8_rows<kE5m2, kTileKv, kDv, kThreads>(smem + kSmem.raw_v + stage * kTileKv * kLdRowV, kLdRowV, sV,
                                                    kRowV, tid);
      __syncthreads();
    }
    const u8* tk = kKv8 ? sK : sK + stage * kTileKv * kRowK;
    const u8* tv = kKv8 ? sV : sV + stage * kTileKv * kRowV;
    if constexpr (kMx) {
      // This tile's K and V scales; keys past S_kv (zero-filled K/V rows) get 0, never the pads of SF_K / SF_V.
      for (int n = tid; n < kTileKv * kKSteps; n += kThreads) {
        const int j = kt * kTileKv + n / kKSteps;
        sSk[n] = j < p.S_kv ? rime_bs::ue8m0_value(sf_k_plane[rime_bs::f8_128x4_offset(j, n % kKSteps, p.sf_k_cols)]) : 0.f;
      }
      for (int n = tid; n < kDv * kVBlocks; n += kThreads) {
        const int kvb = kt * kVBlocks + n % kVBlocks;
        sSv[n] = kvb * 32 < p.S_kv ? rime_bs::ue8m0_value(sf_v_plane[rime_bs::f8_128x4_offset(n / kVBlocks, kvb, p.sf_v_cols)])
                                   : 0.f;
      }
    }
    if constexpr (T::kFp8 && !kVtRegs) {
      // Transpose the V tile into Vt (keys permuted, see the header comment), 4 keys x 4 columns per step.
      for (int blk = tid; blk < (kTileKv / 4) * (kDv / 4); blk += kThreads) {
        const int p0 = (blk % (kTileKv / 4)) * 4, d0 = (blk / (kTileKv / 4)) * 4;
        const int base = (p0 / 16) * 16, tq = (p0 % 16) / 4;
        u32 w[4];
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
      __syncthreads();
    }

    // S = Q K^T for this warp's 16 rows and kTileKv keys.
    float s[kNT][4];
    zero_fragments(s);
    for (int kk = 0; kk < kKSteps; ++kk) {
      u32 a_local[4];
      if constexpr (!kQInRegs)
        ldmatrix_x4(a_local, warp_q + ((lane & 7) + ((lane >> 3) & 1) * 8) * kRowQ + kk * 32 + ((lane >> 4) & 1) * 16);
      const u32(&a)[4] = kQInRegs ? q_frag[kQInRegs ? kk : 0] : a_local;
      for (int jj = 0; jj < kNT / 2; ++jj) {
        u32 bk[4];
        ldmatrix_x4(bk, tk + (jj * 16 + (lane & 7) + ((lane >> 4) & 1) * 8) * kRowK + kk * 32 + ((lane >> 3) & 1) * 16);
        if constexpr (kMx) {
          // Two 8-key tiles at a time into zeroed partials (few live registers), then scaled and added.
          float part[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
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

    if constexpr (kQBf16) {
#pragma unroll
      for (int n = 0; n < kNT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] *= q_row_factor[e / 2];
    }

    // Scale to log2 units, mask, and the online softmax step.
    const bool edge = kMask || kPadding || (kt + 1) * kTileKv > p.S_kv;
    if constexpr (kVtRegs) {
      float alpha[2];
      softmax_step<kNT, kSoftcap>(s, m_run, l_run, rows, kt * kTileKv, scale_log2, edge, t, alpha, cap_in, cap_out);
      // O^T holds packed rows 8n + 2t + j; their factors live with the lanes whose row g is 2t + j.
      float row_alpha[2][2];
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int j = 0; j < 2; ++j) row_alpha[n][j] = __shfl_sync(0xffffffffu, alpha[n], 4 * (2 * t + j));
#pragma unroll
      for (int m = 0; m < kDv / 16; ++m)
#pragma unroll
        for (int n = 0; n < 2; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) ot[m][n][e] *= row_alpha[n][e & 1];
    } else {
      softmax_tile<kNT, kDT, kSoftcap>(s, o_acc, m_run, l_run, rows, kt * kTileKv, scale_log2, edge, t, cap_in,
                                        cap_out);
    }

    // O += P V
    if constexpr (kVtRegs) {
      // O^T += V^T P^T with m16n8k32: M = 16 d, N = 8 packed rows, K = 32 keys. B (k-major per row) is P's A
      // fragment: a[0] / a[2] hold row g's k positions 4t..4t+3 / 16 + 4t.., a[1] / a[3] row g + 8's, with
      // the key order of pack_p_fp8. A (V^T, k-major per d): ldmatrix.trans on an 8 key x 16 byte block gives
      // lane (g, t) the bytes V[2t][2g], V[2t][2g+1], V[2t+1][2g], V[2t+1][2g+1]; two such blocks (keys k0
      // and k0 + 8) permuted bytewise give V[2t, 2t+1, 8+2t, 9+2t][2g] (selector 0x6420), exactly row 2g's
      // k positions 4t..4t+3 in that key order, and the same for d = 2g + 1 (0x7531): one load pair feeds
      // the m tile of even d and the one of odd d.
#pragma unroll
      for (int c = 0; c < kTileKv / 32; ++c) {
        u32 a[4];
        pack_p_fp8(s, c, a);
#pragma unroll
        for (int u = 0; u < kDv / 32; ++u) {
          u32 lo[4], hi[4];  // keys 32c + 0..15 and 32c + 16..31; matrices (k0, d0), (k0 + 8, d0), (k0, d0 + 16), (k0 + 8, d0 + 16)
          const u8* blk = tv + (c * 32 + (lane & 7) + ((lane >> 3) & 1) * 8) * kRowV + u * 32 + ((lane >> 4) & 1) * 16;
          ldmatrix_x4_trans(lo, blk);
          ldmatrix_x4_trans(hi, blk + 16 * kRowV);
          const u32 even[4] = {__byte_perm(lo[0], lo[1], 0x6420), __byte_perm(lo[2], lo[3], 0x6420),
                               __byte_perm(hi[0], hi[1], 0x6420), __byte_perm(hi[2], hi[3], 0x6420)};
          const u32 odd[4] = {__byte_perm(lo[0], lo[1], 0x7531), __byte_perm(lo[2], lo[3], 0x7531),
                              __byte_perm(hi[0], hi[1], 0x7531), __byte_perm(hi[2], hi[3], 0x7531)};
          mma<kIn, RIME_T_E4M3>(ot[2 * u][0], even, a[0], a[2]);
          mma<kIn, RIME_T_E4M3>(ot[2 * u + 1][0], odd, a[0], a[2]);
          if (second_row_tile) {
            mma<kIn, RIME_T_E4M3>(ot[2 * u][1], even, a[1], a[3]);
            mma<kIn, RIME_T_E4M3>(ot[2 * u + 1][1], odd, a[1], a[3]);
          }
        }
      }
    } else if constexpr (T::kFp8) {
#pragma unroll
      for (int c = 0; c < kTileKv / 32; ++c) {
        // MXFP8 inputs carry P in two E4M3 terms (attention.cuh, pack_p_fp8_two_terms); the others in one.
        u32 a[4], a_lo[kMx ? 4 : 1];
        if constexpr (kMx) pack_p_fp8_two_terms(s, c, a, a_lo);
        else pack_p_fp8(s, c, a);
#pragma unroll
        for (int d = 0; d < kDT; ++d) {
          const u8* vrow = sVt + (d * 8 + g) * kRowVt + c * 32 + t * 4;
          const u32 b0 = *reinterpret_cast<const u32*>(vrow), b1 = *reinterpret_cast<const u32*>(vrow + 16);
          if constexpr (kMx) {
            float part[4] = {0.f, 0.f, 0.f, 0.f}, part_lo[4] = {0.f, 0.f, 0.f, 0.f};
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
    } else {
#pragma unroll
      for (int c = 0; c < kTileKv / 16; ++c) {
        u32 a[4];
        a[0] = pack2<kIn>(s[2 * c][0], s[2 * c][1]);
        a[1] = pack2<kIn>(s[2 * c][2], s[2 * c][3]);
        a[2] = pack2<kIn>(s[2 * c + 1][0], s[2 * c + 1][1]);
        a[3] = pack2<kIn>(s[2 * c + 1][2], s[2 * c + 1][3]);
        for (int dd = 0; dd < kDT / 2; ++dd) {
          u32 bv[4];
          ldmatrix_x4_trans(bv, tv + (c * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kRowV +
                                    (dd * 16 + ((lane >> 4) & 1) * 8) * kEB);
          mma<kIn, kIn>(o_acc[2 * dd], a, bv[0], bv[1]);
          mma<kIn, kIn>(o_acc[2 * dd + 1], a, bv[2], bv[3]);
        }
      }
    }
    __syncthreads();  // the next iteration's prefetch overwrites this stage
  }
  cp_async_wait<0>();

  if constexpr (kVtRegs) {
    // O^T back to the accumulator layout the epilogue takes, through the K/V stages' shared memory (free now:
    // the loop ended on a barrier and no copy is in flight).
    constexpr int kPitch = kDv + 4;  // floats
    static_assert(kTileQ * kPitch * 4 <= 2 * kTileKv * (kRowK + kRowV), "O^T staging fits in the K/V stages");
    float* staged = reinterpret_cast<float*>(sK) + warp * 16 * kPitch;  // this warp's 16 rows
#pragma unroll
    for (int m = 0; m < kDv / 16; ++m)
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          staged[(8 * n + 2 * t + (e & 1)) * kPitch + 32 * (m / 2) + 16 * (e / 2) + 2 * g + (m & 1)] = ot[m][n][e];
    __syncthreads();
#pragma unroll
    for (int d = 0; d < kDT; ++d)
#pragma unroll
      for (int e = 0; e < 4; ++e) o_acc[d][e] = staged[(g + 8 * (e / 2)) * kPitch + 8 * d + 2 * t + (e & 1)];
  }

  attention_epilogue<kIn, kOut, kDv, kFeatures>(p, o_acc, m_run, l_run, rows, b, split, h_kv, last_q_tile, tid,
                                               kThreads);
}

template <int kIn, int kOut, int kDqk, int kDv, int kTileQ, int kTileKv, int kFeatures>
__global__ void __launch_bounds__(rime_mma::threads(kTileQ)) sdpa_mma_fwd(const SdpaParams p) {
  pdl_launch_dependents();  // the combine waits for this grid's completion itself
  extern __shared__ __align__(128) u8 smem[];
  if constexpr ((kFeatures & RIME_F_BALANCED) != 0) {
    static_assert((kFeatures & RIME_F_SPLIT) != 0 && (kFeatures & RIME_F_PADDING) != 0,
                  "balanced split-KV is a split over per-sequence lengths");
    constexpr int kThreads = rime_mma::threads(kTileQ);
    constexpr bool kRaggedQ = (kFeatures & RIME_F_RAGGED_Q) != 0;
    for_each_balanced_item<kTileQ, kTileKv, (kFeatures & RIME_F_MASK) != 0, kFeatures>(
        p, [&](int b, int h_kv, int piece, int kt_begin, int kt_end, bool last_piece) {
          if (piece >= 0) {
            sdpa_mma_tile<kIn, kOut, kDqk, kDv, kTileQ, kTileKv, kFeatures>(p, smem, 0, h_kv, b, piece, kt_begin,
                                                                           kt_end, true);
            __syncthreads();  // the next piece's loads overwrite what this one's epilogue staged
          }
          // Slots past the pair's last piece (all of them for a pair with no keys) hold no keys: LSE -inf.
          if (last_piece) {
            const BatchExtent ext = batch_extent<kFeatures>(p, b);
            for (int s = piece + 1; s < p.num_splits; ++s)
              write_empty_chunk_lse<kTileQ, kRaggedQ>(p, ext, b, s, h_kv, 0, threadIdx.x, kThreads);
          }
        });
  } else {
    sdpa_mma_tile<kIn, kOut, kDqk, kDv, kTileQ, kTileKv, kFeatures>(p, smem, blockIdx.x, blockIdx.y,
                                                                   blockIdx.z % p.B, blockIdx.z / p.B, -1, -1,
                                                                   blockIdx.x == gridDim.x - 1);
  }
}

}  // namespace rime_dev
