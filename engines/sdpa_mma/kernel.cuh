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
//
// This file is the kernel's entry and its main loop over KV tiles; the steps live in files of their own:
//   config.cuh  every compile-time decision of a specialization (types, pitches, which P.V form, feature switches)
//   loads.cuh   the Q tile and the K/V tiles by cp.async (dense, ragged, paged), FP8 K/V widened for a 16-bit Q
//   mma.cuh     S = Q K^T, the FP8 V transpose, O += P V (16-bit; FP8 through the transpose), O^T back for the
//               epilogue; the FP8 decode tiles' O^T += V^T P^T is in the loop below
//   layout.h    the launch shape and shared-memory layout, shared with the host (engine.cpp)
// The online softmax, the KV-tile ranges and the epilogue are common/'s (online_softmax.cuh, kv_tiles.cuh,
// epilogue.cuh).
#pragma once

#include "sdpa_mma/loads.cuh"
#include "sdpa_mma/mma.cuh"

namespace rime_dev {

// One row tile of one (batch, kv head) over KV tiles [kt_lo, kt_hi) (kt_lo < 0: the tiles kv_tile_range gives
// this split), into split slot `split` of the partials under split.
//
// Some arrays the steps write (the transpose's words, the MXFP8 partials, P's FP8 fragments) are declared here, where
// the step runs, and handed to it: declared inside the steps, they made ptxas schedule 28 of 47 sampled FP8 and
// MXFP8 kernels differently from the same code inline (tools/sass/compare.py; the loop's accumulators came out of
// the PTX in another order). With them here every specialization's SASS is the inline code's; the FP8 decode tiles'
// P.V stays inline for the same reason (as a step, its address arithmetic moved out of the loop).
template <int kIn, int kOut, int kDqk, int kDv, int kTileQ, int kTileKv, int kFeatures>
__device__ __forceinline__ void sdpa_mma_tile(const SdpaParams& p, u8* smem, int q_tile, int h_kv, int b, int split,
                                              int kt_lo, int kt_hi, bool last_q_tile) {
  using C = mma_engine::Config<kIn, kOut, kDqk, kDv, kTileQ, kTileKv, kFeatures>;
  constexpr int kThreads = C::kThreads, kRowV = C::kRowV;
  u8* sQ = smem + C::kSmem.q;
  u8* sK = smem + C::kSmem.k;
  u8* sV = smem + C::kSmem.v;
  u8* sVt = smem + C::kSmem.vt;  // FP8 tiles that transpose V in shared memory
  // MXFP8: the KV tile's scales as fp32, K [key][k step] and V [d][32-key block].
  float* sSk = reinterpret_cast<float*>(smem + C::kSmem.scales_k);
  float* sSv = reinterpret_cast<float*>(smem + C::kSmem.scales_v);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int row0 = q_tile * kTileQ;

  const BatchExtent ext = batch_extent<kFeatures>(p, b);
  int kt_begin = kt_lo, kt_end = kt_hi;
  if (kt_lo < 0) {  // the grid's chunk (kt_lo < 0 for every thread of the CTA: all of them converged here)
    kv_tile_range<kTileQ, kTileKv, C::kMask, C::kSplit, kFeatures>(p, ext, row0, split, kt_begin, kt_end);
  }
  if constexpr (C::kSplit) {
    if (kt_begin >= kt_end) {
      write_empty_chunk_lse<kTileQ, C::kRaggedQ>(p, ext, b, split, h_kv, row0, tid, kThreads);
      return;
    }
  }
  // The two rows this thread holds in every accumulator: warp row g and g + 8.
  const ThreadRows rows = thread_rows<C::kMask, C::kRaggedQ>(p, ext, row0 + warp * 16 + g, h_kv);

  const u8* q_base = static_cast<const u8*>(p.q);
  const mma_engine::KvTileLoader<C> kv(p, ext, smem, sK, sV, b, h_kv, tid);

  // Q tile, then the first K/V tile, in one cp.async group.
  mma_engine::load_q_tile<C>(p, ext, b, h_kv, row0, q_base, sQ, smem, tid);
  if (kt_begin < kt_end) kv.load(kt_begin, 0);
  cp_async_commit();

  float scale_log2 = p.attn_scale * kLog2e;
  if constexpr ((C::kFp8 && !C::kMx) || C::kKv8)
    scale_log2 *= descale_at(p.descale_q, p.descale_q_stride, b, h_kv) * descale_at(p.descale_k, p.descale_k_stride, b, h_kv);
  // Soft-capping (SPEC section 2): the cap's factors of softmax_step.
  const float cap_in = C::kSoftcap ? scale_log2 / (kLog2e * p.logit_softcap) : 0.f;
  const float cap_out = C::kSoftcap ? p.logit_softcap * kLog2e : 0.f;
  // A BF16 Q's rows were widened by 2^e each (load_q_bf16_as_fp16): S's rows are multiplied back by 2^-e.
  float q_row_factor[2] = {1.f, 1.f};
  if constexpr (C::kQBf16) {
    __syncthreads();  // the factors were written after the widening's last barrier
    const float* factors = reinterpret_cast<const float*>(smem + C::kSmem.q_scale);
    for (int r = 0; r < 2; ++r) q_row_factor[r] = factors[warp * 16 + g + 8 * r];
  }

  // MXFP8: this thread's two rows' Q scales, one per k step (0 for a row past the end).
  float q_scale[2][C::kMxKSteps];
  if constexpr (C::kMx) {
    for (int r = 0; r < 2; ++r) {
      const u8* plane = p.sf_q + (i64(b) * p.H_q + rows.h[r]) * p.sf_q_rows * p.sf_q_cols;
      for (int kk = 0; kk < C::kKSteps; ++kk)
        q_scale[r][kk] = rows.exists[r] ? rime_bs::ue8m0_value(plane[rime_bs::f8_128x4_offset(rows.i[r], kk, p.sf_q_cols)]) : 0.f;
    }
  }
  const u8* sf_k_plane = C::kMx ? p.sf_k + (i64(b) * p.H_kv + h_kv) * p.sf_k_rows * p.sf_k_cols : nullptr;
  const u8* sf_v_plane = C::kMx ? p.sf_v + (i64(b) * p.H_kv + h_kv) * p.sf_v_rows * p.sf_v_cols : nullptr;

  float o_acc[C::kDT][4];
  zero_fragments(o_acc);
  // kVtRegs: O^T accumulators, [16-d m tile][8-row n tile][4]. Element e of m tile 2u + par holds d =
  // 32u + 16 * (e / 2) + 2g + par (even d in tile 2u, odd in 2u + 1) of packed row 8n + 2t + (e & 1).
  float ot[C::kOtTiles][2][4];
#pragma unroll
  for (int m = 0; m < C::kOtTiles; ++m)
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) ot[m][n][e] = 0.f;
  // Rows 8-15 of a warp's 16 exist only for more than 8 packed rows from its first (GQA groups above 8, or
  // S_q > 1).
  const bool second_row_tile = p.packed_rows - (row0 + warp * 16) > 8;
  float m_run[2] = {neg_inf(), neg_inf()};  // running max of scores (log2 units)
  float l_run[2] = {0.f, 0.f};              // this thread's part of the row sum
  u32 q_frag[C::kQFragSteps][4];

  const u8* warp_q = sQ + warp * 16 * C::kRowQ;
  for (int kt = kt_begin; kt < kt_end; ++kt) {
    const int stage = (kt - kt_begin) & 1;
    if (kt + 1 < kt_end) {
      kv.load(kt + 1, stage ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (C::kQInRegs && kt == kt_begin) {
      for (int kk = 0; kk < C::kKSteps; ++kk)
        ldmatrix_x4(q_frag[C::kQInRegs ? kk : 0],
                    warp_q + ((lane & 7) + ((lane >> 3) & 1) * 8) * C::kRowQ + kk * 32 + ((lane >> 4) & 1) * 16);
    }
    if constexpr (C::kKv8) {
      // This stage's FP8 K and V rows widened into the one FP16 K and V tile the mmas read (the previous tile's
      // readers passed the loop's closing barrier).
      mma_engine::widen_fp8_rows<C::kKvE5m2, kTileKv, kDqk, kThreads>(
          smem + C::kSmem.raw_k + stage * kTileKv * C::kLdRowK, C::kLdRowK, sK, C::kRowK, tid);
      mma_engine::widen_fp8_rows<C::kKvE5m2, kTileKv, kDv, kThreads>(
          smem + C::kSmem.raw_v + stage * kTileKv * C::kLdRowV, C::kLdRowV, sV, kRowV, tid);
      __syncthreads();
    }
    const u8* tk = C::kKv8 ? sK : sK + stage * kTileKv * C::kRowK;
    const u8* tv = C::kKv8 ? sV : sV + stage * kTileKv * kRowV;
    if constexpr (C::kMx) mma_engine::stage_mx_scales<C>(p, sf_k_plane, sf_v_plane, sSk, sSv, kt, tid);
    if constexpr (C::kFp8 && !C::kVtRegs) {
      u32 words[4];
      mma_engine::transpose_v_to_vt<C>(tv, sVt, tid, words);
      __syncthreads();
    }

    // S = Q K^T for this warp's 16 rows and kTileKv keys.
    float s[C::kNT][4];
    float mx_part[2][4];
    mma_engine::qk_scores<C>(s, warp_q, q_frag, tk, q_scale, sSk, lane, t, mx_part);

    if constexpr (C::kQBf16) {
#pragma unroll
      for (int n = 0; n < C::kNT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] *= q_row_factor[e / 2];
    }

    // Scale to log2 units, mask, and the online softmax step.
    const bool edge = C::kMask || C::kPadding || (kt + 1) * kTileKv > p.S_kv;
    if constexpr (C::kVtRegs) {
      float alpha[2];
      softmax_step<C::kNT, C::kSoftcap>(s, m_run, l_run, rows, kt * kTileKv, scale_log2, edge, t, alpha, cap_in,
                                        cap_out);
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
      softmax_tile<C::kNT, C::kDT, C::kSoftcap>(s, o_acc, m_run, l_run, rows, kt * kTileKv, scale_log2, edge, t,
                                                cap_in, cap_out);
    }

    // O += P V
    u32 p_frag[4], p_frag_lo[C::kMx ? 4 : 1];
    float pv_part[4], pv_part_lo[4];
    if constexpr (C::kVtRegs) {
      // FP8 decode tiles: O^T += V^T P^T with m16n8k32: M = 16 d, N = 8 packed rows, K = 32 keys. B (k-major per
      // row) is P's A fragment: a[0] / a[2] hold row g's k positions 4t..4t+3 / 16 + 4t.., a[1] / a[3] row g + 8's,
      // with the key order of pack_p_fp8. A (V^T, k-major per d): ldmatrix.trans on an 8 key x 16 byte block gives
      // lane (g, t) the bytes V[2t][2g], V[2t][2g+1], V[2t+1][2g], V[2t+1][2g+1]; two such blocks (keys k0 and
      // k0 + 8) permuted bytewise give V[2t, 2t+1, 8+2t, 9+2t][2g] (selector 0x6420), exactly row 2g's k positions
      // 4t..4t+3 in that key order, and the same for d = 2g + 1 (0x7531): one load pair feeds the m tile of even d
      // and the one of odd d.
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
    } else if constexpr (C::kFp8) {
      mma_engine::pv_fp8<C>(o_acc, s, sVt, sSv, g, t, p_frag, p_frag_lo, pv_part, pv_part_lo);
    } else {
      mma_engine::pv_16bit<C>(o_acc, s, tv, lane);
    }
    __syncthreads();  // the next iteration's prefetch overwrites this stage
  }
  cp_async_wait<0>();

  if constexpr (C::kVtRegs) mma_engine::ot_to_o_acc<C>(o_acc, ot, sK, warp, g, t);

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
