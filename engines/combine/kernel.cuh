// The split-KV combine (SPEC section 3). One CTA per output row folds the split-major partials:
//   M = max_k LSE_k (and the sink), w_k = LSE_k live ? exp(LSE_k - M) : 0, den = sum_k w_k (+ exp(sink - M)),
//   O = sum_k w_k O_k / max(den, 1e-30), LSE = M + log(den).
// The sink is added here, once; the splits never see it. The combine owns everything downstream of O: Amax_O
// of the recombined rows, scale_o and the single cast, and the block-scaled epilogue (NVFP4 / MXFP8 + sf_o),
// which the upstream system declines under split.
#pragma once

#include "common/device.cuh"

namespace rime_dev {

// Splits a warp loads at once: their LSEs and partial rows are all in flight together.
constexpr int kCombineChunk = 8;

// One pass, no weights up front: warp w folds splits w, w + kWarps, ... kCombineChunk at a time with a running
// max (the online softmax over splits), issuing every load of a chunk (LSE and partial row) before using any,
// so the row costs about one memory round trip however many splits it has. Warp 0 then merges the kWarps
// running states, adds the sink and runs the epilogue. The launcher picks kWarps
// (heuristics::combine_warps_per_row): 16 when the rows alone would leave the SMs nearly idle (B1 H32 decode:
// 32 rows of 128 splits).
template <int kOut, int kDv, int kFeatures, int kWarps>
__global__ void __launch_bounds__(32 * kWarps) combine_splits(const CombineParams p) {
  // A lane owns column pairs 64 apart; a D_v that is not a multiple of 64 (80, 96) leaves the last chunk's lanes
  // past D_v without columns (kWholePairs false: their loads and stores are skipped).
  static_assert(kDv % 16 == 0, "head dims are multiples of 16");
  constexpr int kPairs = (kDv + 63) / 64;
  constexpr bool kWholePairs = kDv % 64 == 0;
  __shared__ float2 sums[kWarps][kPairs][32];
  __shared__ float warp_m[kWarps], warp_den[kWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const i64 row = blockIdx.x;
  const i64 rows = i64(p.B) * p.H_q * p.S_q;
  if (row >= rows) return;
  const int i = int(row % p.S_q), h = int((row / p.S_q) % p.H_q), b = int(row / (i64(p.S_q) * p.H_q));
  const i64 slot_stride = rows;  // partial slot (k * B + b) of row (h, i)
  bool live_row = true;
  int tok0 = 0;  // ragged Q: the batch's first token (O and Stats rows are tokens tok0 + i); starts: see below
  if constexpr ((kFeatures & RIME_F_RAGGED_Q) != 0) {
    // A row past the sequence's length is another sequence's token: nothing to write (the whole CTA leaves).
    tok0 = p.cu_seqlens_q[b];
    if (i >= p.cu_seqlens_q[b + 1] - tok0) return;
  } else if constexpr ((kFeatures & RIME_F_STARTS) != 0) {
    // Per-sequence starts: row i is dense row start + i, the rows past the sequence wrapping around to those
    // before its start (common/attention.cuh, q_token); start and length clamped as the attention kernel's.
    tok0 = min(max(p.seq_start_q[b], 0), p.S_q);
    live_row = i < min(p.seq_len_q[b], p.S_q - tok0);
    if (tok0 + i >= p.S_q) tok0 -= p.S_q;
  } else if constexpr ((kFeatures & RIME_F_PADDING) != 0) {
    live_row = i < p.seq_len_q[b];
  }
  pdl_wait();  // the partials are the attention kernel's output; it may still be running (programmatic launch)

  float m_run = neg_inf(), den_run = 0.f;
  float acc[kPairs][2];
  for (int c = 0; c < kPairs; ++c) acc[c][0] = acc[c][1] = 0.f;
  if (live_row) {
    for (int k0 = warp; k0 < p.num_splits; k0 += kCombineChunk * kWarps) {
      float lse[kCombineChunk];
      float2 v[kCombineChunk][kPairs];
#pragma unroll
      for (int u = 0; u < kCombineChunk; ++u) {
        const int k = k0 + u * kWarps;
        lse[u] = neg_inf();
        if (k < p.num_splits) {
          lse[u] = p.lse_partial[k * slot_stride + row];
          const float* src = p.o_partial + (k * slot_stride + row) * kDv;
#pragma unroll
          for (int c = 0; c < kPairs; ++c)
            v[u][c] = kWholePairs || c * 64 + 2 * lane < kDv ? *reinterpret_cast<const float2*>(src + c * 64 + 2 * lane)
                                                             : make_float2(0.f, 0.f);
        }
      }
      float m_new = m_run;
#pragma unroll
      for (int u = 0; u < kCombineChunk; ++u) m_new = fmaxf(m_new, lse[u]);
      if (m_new == neg_inf()) continue;  // every split so far empty
      const float rescale = __expf(m_run - m_new);  // m_run = -inf gives 0 (acc and den are 0 then)
      den_run *= rescale;
#pragma unroll
      for (int c = 0; c < kPairs; ++c) {
        acc[c][0] *= rescale;
        acc[c][1] *= rescale;
      }
#pragma unroll
      for (int u = 0; u < kCombineChunk; ++u) {
        const float w = lse[u] != neg_inf() ? __expf(lse[u] - m_new) : 0.f;
        den_run += w;
#pragma unroll
        for (int c = 0; c < kPairs; ++c) {
          // A select, not a product, for an empty split (w == 0): 0 * (anything it holds) must not reach O; an
          // empty chunk of the mma.sync engine writes only its LSE (write_empty_chunk_lse), its O slot holds
          // whatever was there.
          acc[c][0] += w != 0.f ? w * v[u][c].x : 0.f;
          acc[c][1] += w != 0.f ? w * v[u][c].y : 0.f;
        }
      }
      m_run = m_new;
    }
  }
  for (int c = 0; c < kPairs; ++c) sums[warp][c][lane] = make_float2(acc[c][0], acc[c][1]);
  if (lane == 0) {
    warp_m[warp] = m_run;
    warp_den[warp] = den_run;
  }
  __syncthreads();
  if (warp != 0) return;
  // M = max_k LSE_k (and the sink); each warp's state rescaled from its own max to M.
  float m = neg_inf();
  for (int w = 0; w < kWarps; ++w) m = fmaxf(m, warp_m[w]);
  if constexpr ((kFeatures & RIME_F_SINK) != 0) m = fmaxf(m, p.sink[h]);
  const bool any = live_row && m != neg_inf();
  float den = 0.f;
  for (int c = 0; c < kPairs; ++c) acc[c][0] = acc[c][1] = 0.f;
  if (any) {
    for (int w = 0; w < kWarps; ++w) {
      if (warp_m[w] == neg_inf()) continue;
      const float s = __expf(warp_m[w] - m);
      den += warp_den[w] * s;
      for (int c = 0; c < kPairs; ++c) {
        acc[c][0] += sums[w][c][lane].x * s;
        acc[c][1] += sums[w][c][lane].y * s;
      }
    }
    if constexpr ((kFeatures & RIME_F_SINK) != 0) den += __expf(p.sink[h] - m);
  }
  const float inv = any ? 1.f / fmaxf(den, 1e-30f) : 0.f;
  float scale_o = 1.f;
  if constexpr ((kFeatures & RIME_F_SCALE_O) != 0) scale_o = p.scale_o[0];
  const i64 orow = i64(b) * p.o_stride[0] + i64(h) * p.o_stride[1] + i64(tok0 + i) * p.o_stride[2];
  const int sf_i = (kFeatures & RIME_F_STARTS) != 0 ? tok0 + i : i;  // a scale row follows its O row
  float amax = 0.f;
  constexpr int kBlock = OutFormat<kOut>::kBlock;
  if constexpr (kBlock > 0) {
    static_assert(kWholePairs, "block-scaled O: D_v a multiple of 64");
    // A block of kBlock columns inside one 64-column chunk belongs to kBlock / 2 consecutive lanes.
    constexpr int kLanes = kBlock / 2;
    for (int c = 0; c < kPairs; ++c) {
      const float x = acc[c][0] * inv, y = acc[c][1] * inv;
      amax = fmaxf(amax, fmaxf(fabsf(x), fabsf(y)));
      float amax_blk = fmaxf(fabsf(x * scale_o), fabsf(y * scale_o));
      for (int o = 1; o < kLanes; o <<= 1) amax_blk = fmaxf(amax_blk, __shfl_xor_sync(0xffffffffu, amax_blk, o));
      u32 sf;
      float q_inv;
      block_scale<kOut>(amax_blk, sf, q_inv);
      store_block_pair<kOut>(p.o, orow + c * 64 + 2 * lane, x * scale_o, y * scale_o, q_inv);
      if (lane % kLanes == 0)
        p.sf_o[rime_bs::sf_o_offset(p.sf_layout, p.H_q, p.sf_rows, p.sf_cols, b, h, sf_i, (c * 64 + 2 * lane) / kBlock)] =
            u8(sf);
    }
    // Columns past the last block read zero; the warp of each (b, h)'s last row zeroes the pad rows of planes.
    for (int c = kDv / kBlock + lane; c < p.sf_cols; c += 32)
      p.sf_o[rime_bs::sf_o_offset(p.sf_layout, p.H_q, p.sf_rows, p.sf_cols, b, h, sf_i, c)] = 0;
    if (p.sf_layout == 0 && i == p.S_q - 1)
      zero_sf_pad_rows(p.sf_o, p.H_q, p.sf_rows, p.sf_cols, p.S_q, b, h, 1, lane, 32);
  } else {
    for (int c = 0; c < kPairs; ++c) {
      if (!kWholePairs && c * 64 + 2 * lane >= kDv) continue;
      const float x = acc[c][0] * inv, y = acc[c][1] * inv;
      amax = fmaxf(amax, fmaxf(fabsf(x), fabsf(y)));
      store_pair<kOut>(p.o, orow + c * 64 + 2 * lane, x * scale_o, y * scale_o);
    }
  }
  if constexpr ((kFeatures & RIME_F_STATS) != 0) {
    if (lane == 0) {
      float lse = any ? m + __logf(den) : neg_inf();
      if (p.stats_log2 && any) lse *= kLog2e;
      p.stats[i64(b) * p.stats_stride[0] + i64(h) * p.stats_stride[1] + i64(tok0 + i) * p.stats_stride[2]] = lse;
    }
  }
  if constexpr ((kFeatures & RIME_F_AMAX_O) != 0) {
    amax = warp_max(amax);
    if (lane == 0) atomic_max_nonneg(p.amax_o, amax);
  }
}

}  // namespace rime_dev
