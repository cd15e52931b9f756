// The end of an attention kernel for the rows a thread holds: the sink, the normalisation, O in every format (the
// block-scaled ones staged through shared memory where an engine has it free), Stats, Amax, or split partials.
#pragma once

#include "common/thread_rows.cuh"
#include "common/p_pack.cuh"

namespace rime_dev {

// A compile-time row slot (0: accumulator elements 0-1, row g; 1: elements 2-3, row g + 8).
template <int kSlot>
struct Slot {
  static constexpr int value = kSlot;
};

// Block-scaled O through shared memory, for engines with kRows x kDv fp32 of shared memory free after their
// main loop (the Hopper engine). In the accumulator layout a thread holds 2 of every 8 columns of a row, so a
// block's amax is a quad reduction and its codes leave as single bytes, block after block in one dependent
// chain (the register path below, which sdpa_mma keeps; on the Hopper engine its NVFP4 form was ~4,700 SASS
// instructions per thread). Staged, the same fp32 values
// o * scale_o / l let one thread own 32 whole columns of a row: two NVFP4 blocks or one MXFP8 block, local
// amaxes, 16 or 32 bytes of codes in vector stores, and independent items for the scheduler.
struct StagedRow {
  i64 o_offset;  // element offset of the row in O; -1: a row past packed_rows (nothing to store)
  i64 sf_base;   // its sf_o row (rime_bs::SfRow)
  int sf_col0;
};
template <int kRows, int kDv>
struct BlockStage {
  // Floats per staged row. The 4-float pad makes 8 consecutive rows' same 16-byte chunk land on all 32 banks
  // (the read side: a warp reads one chunk of 32 consecutive rows); the accumulator's float2 writes then meet
  // 2-way conflicts, which cost less than the reads' would without it.
  static constexpr int kPitch = kDv + 4;
  static constexpr int kBytes = kRows * kPitch * 4 + kRows * int(sizeof(StagedRow));
  float* o;
  StagedRow* rows;
  __device__ explicit BlockStage(void* smem)
      : o(static_cast<float*>(smem)), rows(reinterpret_cast<StagedRow*>(static_cast<float*>(smem) + kRows * kPitch)) {}
};

// Quantizes 32 staged columns of one row (two NVFP4 blocks or one MXFP8 block) and stores their codes and
// scales; `seg` counts 32-column segments. Arithmetic as block_scale / store_block_pair, so the bytes are the
// register path's.
template <int kOut>
__device__ __forceinline__ void store_block_segment(const SdpaParams& p, const StagedRow& row, int seg,
                                                    const float (&x)[32]) {
  if constexpr (kOut == RIME_T_NVFP4) {
    u32 code[8];  // 8 E2M1 codes per word, column order from the low nibble
    u32 sf[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float amax = 0.f;
#pragma unroll
      for (int k = 0; k < 16; ++k) amax = fmaxf(amax, fabsf(x[16 * half + k]));
      float q_inv;
      block_scale<kOut>(amax, sf[half], q_inv);
#pragma unroll
      for (int w = 0; w < 2; ++w) {
        float q[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) q[k] = __fmul_rn(x[16 * half + 8 * w + k], q_inv);
        code[2 * half + w] = rime_bs::e2m1_pack8(q);
      }
    }
    *reinterpret_cast<uint4*>(static_cast<u8*>(p.o) + (row.o_offset + seg * 32) / 2) =
        make_uint4(code[0], code[1], code[2], code[3]);
    // Blocks 2 seg and 2 seg + 1 are adjacent bytes of one F8_128x4 group of 4 (col0 is a multiple of 4).
    *reinterpret_cast<u16*>(p.sf_o + row.sf_base + rime_bs::f8_128x4_col_part(row.sf_col0 + 2 * seg)) =
        u16(sf[0] | (sf[1] << 8));
  } else {
    static_assert(kOut == RIME_T_MXFP8, "store_block_segment is for NVFP4 / MXFP8");
    float amax = 0.f;
#pragma unroll
    for (int k = 0; k < 32; ++k) amax = fmaxf(amax, fabsf(x[k]));
    u32 sf;
    float q_inv;
    block_scale<kOut>(amax, sf, q_inv);
    u32 code[8];  // 4 E4M3 codes per word
#pragma unroll
    for (int w = 0; w < 8; ++w)
      code[w] = u32(pack2_fp8<RIME_T_E4M3>(__fmul_rn(x[4 * w], q_inv), __fmul_rn(x[4 * w + 1], q_inv))) |
                (u32(pack2_fp8<RIME_T_E4M3>(__fmul_rn(x[4 * w + 2], q_inv), __fmul_rn(x[4 * w + 3], q_inv))) << 16);
    uint4* dst = reinterpret_cast<uint4*>(static_cast<u8*>(p.o) + row.o_offset + seg * 32);
    dst[0] = make_uint4(code[0], code[1], code[2], code[3]);
    dst[1] = make_uint4(code[4], code[5], code[6], code[7]);
    p.sf_o[row.sf_base + rime_bs::f8_128x4_col_part(row.sf_col0 + seg)] = u8(sf);
  }
}

// The end of an attention kernel for the rows this thread holds: adds the sink, normalises, writes O (any
// format, block-scaled with sf_o included), Stats, Amax_O / Amax_S, or under split the fp32 partial O and LSE.
// `last_q_tile`: this CTA zeroes the pad rows of per-(b,h) sf_o planes. All `threads` threads (tid 0 ..
// threads - 1) call it: the CTA, or with stage_barrier > 0 one warpgroup of a warp-specialized CTA, which then
// meets at named barrier stage_barrier instead of __syncthreads.
// kStageRows > 0: block-scaled O goes through `stage` (BlockStage<kStageRows, kDv>::kBytes of shared memory
// that nothing else uses any more; the calling warps own 16 rows each, warp w rows 16w ..).
// kWholeRowSums: l_run holds each row's whole sum (summed by the tensor cores), not this thread's quarter of it.
template <int kIn, int kOut, int kDv, int kFeatures, int kStageRows = 0, bool kWholeRowSums = false>
__device__ __forceinline__ void attention_epilogue(const SdpaParams& p, float (&o_acc)[kDv / 8][4],
                                                   const float (&m_run)[2], const float (&l_run)[2],
                                                   const ThreadRows& rows, int b, int split, int h_kv,
                                                   bool last_q_tile, int tid, int threads, void* stage = nullptr,
                                                   int stage_barrier = 0) {
  constexpr int kDT = kDv / 8;
  constexpr bool kFp8 = kIn == RIME_T_E4M3 || kIn == RIME_T_E5M2;
  constexpr bool kSplit = (kFeatures & RIME_F_SPLIT) != 0;
  constexpr bool kSink = (kFeatures & RIME_F_SINK) != 0 && !kSplit;  // the combine adds the sink under split
  constexpr bool kMx = (kFeatures & RIME_F_MX_INPUTS) != 0;
  constexpr int kBlock = OutFormat<kOut>::kBlock;  // block-scaled O: scales per kBlock columns
  constexpr bool kStaged = kStageRows > 0 && kBlock > 0 && !kSplit;
  using Staged = BlockStage<(kStageRows > 0 ? kStageRows : 1), kDv>;
  const Staged staged(stage);
  const int lane = tid % 32, t = lane % 4;
  float descale_v = 1.f;
  if constexpr (kFp8) descale_v = (kMx ? 1.f : descale_at(p.descale_v, p.descale_v_stride, b, h_kv)) / kPScale;
  if constexpr (!kFp8 && (kFeatures & RIME_F_KV_FP8) != 0)  // FP8 V under a 16-bit Q and P
    descale_v = descale_at(p.descale_v, p.descale_v_stride, b, h_kv);
  float scale_o = 1.f;
  if constexpr (!kSplit && (kFeatures & RIME_F_SCALE_O) != 0) scale_o = p.scale_o[0];
  float amax_o = 0.f, amax_s = 0.f;
  // The two rows of this thread, one at a time. The row is a compile-time slot (a template tag): a runtime
  // index into o_acc, m_run or l_run would move them to local memory for the whole kernel, main loop included,
  // and a row loop is too large for the compiler to unroll once the block-scaled epilogue is in it.
  auto finish_row = [&](auto slot_tag) {
    constexpr int slot = decltype(slot_tag)::value;
    float l = kWholeRowSums ? l_run[slot] : quad_sum(l_run[slot]);
    float m = m_run[slot];
    float row_max = m;  // max score without the sink, for Amax_S
    if constexpr (kSink) {
      const float sink = p.sink[rows.h[slot]] * kLog2e;
      const float m_f = fmaxf(m, sink);
      const float alpha = exp2_approx(m - m_f);  // m = -inf (no live key) gives 0
      l = l * alpha + exp2_approx(sink - m_f);
      for (int d = 0; d < kDT; ++d) {
        o_acc[d][2 * slot] *= alpha;
        o_acc[d][2 * slot + 1] *= alpha;
      }
      m = m_f;
    }
    const bool live = rows.live[slot] && l > 0.f;
    const float inv = live ? descale_v / l : 0.f;
    // Natural-log LSE; -inf for a row with no live key (or a padded row).
    const float lse = live ? (p.stats_log2 && !kSplit ? m + __log2f(l) : m * kLn2 + __logf(l)) : neg_inf();
    if (live && (kFeatures & RIME_F_AMAX_S) && row_max != neg_inf())
      amax_s = fmaxf(amax_s, exp2_approx(row_max - m) / l);
    const int i = rows.i[slot], h = rows.h[slot];
    if constexpr (kSplit) {
      if (!rows.exists[slot]) return;
      const i64 prow = partial_row(p, split, b, h, i);
      float* dst = p.o_partial + prow * kDv;
      for (int d = 0; d < kDT; ++d) {
        float2 v;
        v.x = o_acc[d][2 * slot] * inv;
        v.y = o_acc[d][2 * slot + 1] * inv;
        *reinterpret_cast<float2*>(dst + d * 8 + 2 * t) = v;
      }
      if (t == 0) p.lse_partial[prow] = lse;
      return;
    }
    const int token = q_token<kFeatures>(p, rows.tok0, i);
    // A block-scaled O's scale rows follow O's rows: under starts the dense row, else the sequence's row.
    const int sf_i = (kFeatures & RIME_F_STARTS) != 0 ? token : i;
    const i64 orow = i64(b) * p.o_stride[0] + i64(h) * p.o_stride[1] + i64(token) * p.o_stride[2];
    if constexpr (kBlock > 0 && kStaged) {
      const float to_o = inv * scale_o;
      const int local_row = (tid / 32) * 16 + lane / 4 + 8 * slot;
      float* dst = staged.o + local_row * Staged::kPitch + 2 * t;
      float amax_row = 0.f;
#pragma unroll
      for (int d = 0; d < kDT; ++d) {
        amax_row = fmaxf(amax_row, fmaxf(fabsf(o_acc[d][2 * slot]), fabsf(o_acc[d][2 * slot + 1])));
        *reinterpret_cast<float2*>(dst + d * 8) = make_float2(o_acc[d][2 * slot] * to_o, o_acc[d][2 * slot + 1] * to_o);
      }
      // Amax_O is pre-scale (inv >= 0, so max |o * inv| = max |o| * inv).
      if (rows.exists[slot]) amax_o = fmaxf(amax_o, amax_row * inv);
      if (t == 0) {
        const rime_bs::SfRow sf_row = rime_bs::sf_o_row(p.sf_layout, p.H_q, p.sf_rows, p.sf_cols, b, h, sf_i);
        staged.rows[local_row] = StagedRow{rows.exists[slot] ? orow : -1, sf_row.base, sf_row.col0};
      }
    } else if constexpr (kBlock > 0) {
      // A block of kBlock columns is kBlock / 8 accumulator tiles of the 4 threads of a quad (2 columns each):
      // its amax is a quad reduction, which every lane joins (rows.exists only guards the stores). Two passes
      // over the block's accumulators (amax, then quantize) keep no copies of them live.
      constexpr int kTiles = kBlock / 8;
      const float to_o = inv * scale_o;
      const rime_bs::SfRow sf_row = rime_bs::sf_o_row(p.sf_layout, p.H_q, p.sf_rows, p.sf_cols, b, h, sf_i);
#pragma unroll
      for (int blk = 0; blk < kDv / kBlock; ++blk) {
        float amax_blk = 0.f;
#pragma unroll
        for (int u = 0; u < kTiles; ++u)
#pragma unroll
          for (int e = 0; e < 2; ++e) amax_blk = fmaxf(amax_blk, fabsf(o_acc[blk * kTiles + u][2 * slot + e]));
        // Amax_O is pre-scale (inv >= 0, so |o * inv| = |o| * inv).
        if (rows.exists[slot]) amax_o = fmaxf(amax_o, amax_blk * inv);
        amax_blk = quad_max(amax_blk * to_o);
        u32 sf;
        float q_inv;
        block_scale<kOut>(amax_blk, sf, q_inv);
        if (rows.exists[slot]) {
#pragma unroll
          for (int u = 0; u < kTiles; ++u)
            store_block_pair<kOut>(p.o, orow + (blk * kTiles + u) * 8 + 2 * t, o_acc[blk * kTiles + u][2 * slot] * to_o,
                                   o_acc[blk * kTiles + u][2 * slot + 1] * to_o, q_inv);
          if (t == 0) p.sf_o[sf_row.base + rime_bs::f8_128x4_col_part(sf_row.col0 + blk)] = u8(sf);
        }
      }
      // Columns of sf_o past the last block (C is rounded up to 4) read zero.
      if (rows.exists[slot] && t == 0)
        for (int c = kDv / kBlock; c < p.sf_cols; ++c) p.sf_o[sf_row.base + rime_bs::f8_128x4_col_part(sf_row.col0 + c)] = 0;
    } else {
      if (!rows.exists[slot]) return;
      for (int d = 0; d < kDT; ++d) {
        const float x = o_acc[d][2 * slot] * inv, y = o_acc[d][2 * slot + 1] * inv;
        amax_o = fmaxf(amax_o, fmaxf(fabsf(x), fabsf(y)));
        store_pair<kOut>(p.o, orow + d * 8 + 2 * t, x * scale_o, y * scale_o);
      }
    }
    if ((kFeatures & RIME_F_STATS) && t == 0 && rows.exists[slot])
      p.stats[i64(b) * p.stats_stride[0] + i64(h) * p.stats_stride[1] + i64(token) * p.stats_stride[2]] = lse;
  };
  finish_row(Slot<0>{});
  finish_row(Slot<1>{});
  if constexpr (kStaged) {
    static_assert(kDv % 64 == 0, "staged block-scaled O: two threads per row, 32-column segments");
    if (stage_barrier == 0) __syncthreads();
    else asm volatile("bar.sync %0, %1;\n" ::"r"(stage_barrier), "n"(2 * kStageRows) : "memory");
    // The CTA's 2 * kStageRows threads (a warp holds 16 rows) share kStageRows x kDv / 32 items (a row's
    // 32-column segment). Thread tid: row tid % kStageRows, so a warp reads one chunk of 32 consecutive rows,
    // and segments tid / kStageRows + 2k; its items are unrolled, independent of each other.
    const int r = tid % kStageRows;
    const StagedRow row = staged.rows[r];
    if (row.o_offset >= 0) {
#pragma unroll
      for (int k = 0; k < kDv / 64; ++k) {
        const int seg = tid / kStageRows + 2 * k;
        float x[32];
        const float* src = staged.o + r * Staged::kPitch + seg * 32;
#pragma unroll
        for (int c = 0; c < 8; ++c) {
          const float4 v = *reinterpret_cast<const float4*>(src + 4 * c);
          x[4 * c] = v.x;
          x[4 * c + 1] = v.y;
          x[4 * c + 2] = v.z;
          x[4 * c + 3] = v.w;
        }
        store_block_segment<kOut>(p, row, seg, x);
      }
      // Columns of sf_o past the last block (C is rounded up to 4) read zero.
      if (tid < kStageRows)
        for (int c = kDv / kBlock; c < p.sf_cols; ++c) p.sf_o[row.sf_base + rime_bs::f8_128x4_col_part(row.sf_col0 + c)] = 0;
    }
  }
  if constexpr (!kSplit && kBlock > 0) {
    // Per-(b,h) planes: the last row tile of each (batch, kv head) zeroes the pad rows of its q heads.
    if (p.sf_layout == 0 && last_q_tile)
      zero_sf_pad_rows(p.sf_o, p.H_q, p.sf_rows, p.sf_cols, p.S_q, b, h_kv * p.group, p.group, tid, threads);
  }
  if constexpr (!kSplit && (kFeatures & RIME_F_AMAX_O) != 0) {
    amax_o = warp_max(amax_o);
    if (lane == 0) atomic_max_nonneg(p.amax_o, amax_o);
  }
  if constexpr ((kFeatures & RIME_F_AMAX_S) != 0) {
    amax_s = warp_max(amax_s);
    if (lane == 0) atomic_max_nonneg(p.amax_s, amax_s);
  }
}

}  // namespace rime_dev
