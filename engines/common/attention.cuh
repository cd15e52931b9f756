// The FlashAttention arithmetic the attention engines share: which KV tiles a row tile visits (masks, split
// chunks), which rows a thread holds, scale-and-mask plus the online softmax over one KV tile, and the epilogue
// (normalisation, sink, Stats, Amax, O in every format, or split partials). Both engines keep S and O in the
// same register layout: mma.sync's m16n8 accumulator, which is also each warp's slice of a wgmma m64nN
// accumulator. A thread holds rows g and g + 8 of its warp's 16 rows (g = lane / 4) and, in each 8-column
// block n, columns 8n + 2t and 8n + 2t + 1 (t = lane % 4): acc[n][0..1] for row g, acc[n][2..3] for row g + 8.
#pragma once

#include "common/device.cuh"

namespace rime_dev {

// P is quantized to E4M3 on a fixed scale: P in [0, 1] times 448 uses E4M3's whole range; 1/448 is folded
// into the final normalization. descale_s / scale_s are therefore not read.
constexpr float kPScale = 448.f;

// A compile-time row slot (0: accumulator elements 0-1, row g; 1: elements 2-3, row g + 8).
template <int kSlot>
struct Slot {
  static constexpr int value = kSlot;
};

// The valid extents of one batch: rows past seq_q are padding, keys past kv_limit are masked. diag_shift is the
// bottom-right alignment's shift for this batch: with per-batch lengths the batch's own seq_len_kv - seq_len_q
// (SPEC section 2, as cuDNN and FlashAttention's varlen: the last query of a sequence sees its last key), else
// the tensors' S_kv - S_q (0 for top-left). q_tok0 / kv_tok0: the row (dims[2] index) of the batch's first
// token in a ragged side's token-major tensors, or of its first position under per-sequence starts (clamped to
// [0, S], and the length to what lies past it, so that no start reads or writes outside the tensors), 0
// otherwise.
struct BatchExtent {
  int seq_q, kv_limit, right_bound;  // right_bound -1: no upper key bound beyond kv_limit
  int diag_shift;
  int q_tok0, kv_tok0;
};

// descale_q / k / v of (batch b, kv head h_kv): per tensor (strides 0) or per (batch, kv head).
__device__ __forceinline__ float descale_at(const float* d, const int (&stride)[2], int b, int h_kv) {
  return d[b * stride[0] + h_kv * stride[1]];
}

template <int kFeatures>
__device__ __forceinline__ BatchExtent batch_extent(const SdpaParams& p, int b) {
  constexpr bool kPadding = (kFeatures & RIME_F_PADDING) != 0;
  constexpr bool kRaggedQ = (kFeatures & RIME_F_RAGGED_Q) != 0, kRaggedKv = (kFeatures & RIME_F_RAGGED_KV) != 0;
  static_assert((!kRaggedQ && !kRaggedKv) || kPadding, "ragged sides have per-sequence lengths (padding)");
  BatchExtent e;
  constexpr bool kStarts = (kFeatures & RIME_F_STARTS) != 0;
  static_assert(!kStarts || kPadding, "per-sequence starts come with per-sequence lengths (padding)");
  e.q_tok0 = kRaggedQ ? p.cu_seqlens_q[b] : 0;
  e.kv_tok0 = kRaggedKv ? p.cu_seqlens_kv[b] : 0;
  const int len_q = kRaggedQ ? p.cu_seqlens_q[b + 1] - e.q_tok0 : (kPadding ? p.seq_len_q[b] : p.S_q);
  const int len_kv = kRaggedKv ? p.cu_seqlens_kv[b + 1] - e.kv_tok0 : (kPadding ? p.seq_len_kv[b] : p.S_kv);
  if constexpr (kStarts) {
    if (p.seq_start_q) e.q_tok0 = min(max(p.seq_start_q[b], 0), p.S_q);
    if (p.seq_start_kv) e.kv_tok0 = min(max(p.seq_start_kv[b], 0), p.S_kv);
  }
  e.seq_q = kPadding ? min(p.S_q - (kStarts ? e.q_tok0 : 0), len_q) : p.S_q;
  e.kv_limit = kPadding ? max(0, min(p.S_kv - (kStarts ? e.kv_tok0 : 0), len_kv)) : p.S_kv;
  e.right_bound = p.causal ? 0 : p.band_right;
  e.diag_shift = kPadding && p.bottom_right ? e.kv_limit - max(0, e.seq_q) : p.diag_shift;
  return e;
}

// The KV tiles [begin, end) that the row tile of packed rows [row0, row0 + kTileQ) visits: the union of its
// rows' unmasked keys, and under split this split's chunk of them (SPEC section 3: near-equal chunks, the
// remainder to the leading splits; a chunk past the end is empty).
// With per-sequence lengths (kPerSequence) the chunks are cut from the tensor's key extent S_kv (the longest a
// sequence may be) instead of this sequence's own length, then clipped to it: every chunk of every sequence
// holds at most the same number of tiles, and a short sequence's trailing chunks are empty. Cut from each
// sequence's own length, one 32k sequence among 1k ones ran as many CTAs as each short one, each 32 times
// longer: the batch ran at the speed of its longest sequence (docs/serving.md, "Split balancing").
template <int kTileQ, int kTileKv, bool kMask, bool kSplit, bool kPerSequence>
__device__ __forceinline__ void kv_tile_range(const SdpaParams& p, const BatchExtent& e, int row0, int split,
                                              int& begin, int& end) {
  int tile_lo = 0, tile_hi = 0;
  const int last = min(row0 + kTileQ, p.packed_rows) - 1;
  // With per-sequence lengths, rows at or past the sequence's own seq_q are outside it (never written, or written
  // as empty rows): a tile of them visits no keys, and a tile that straddles the end visits only its live rows'
  // keys. Without this, every row tile past a short sequence's end ran its causal range over the whole sequence:
  // a batch of lengths 128..8k (S 8k) did twice the work it needed (docs/perf-history.md, "Ragged prefill").
  // (A masked grid of the Hopper engine starts its first row tile at a negative row: its partial tile first.)
  const int i_lo = int(div_by(p.group_div, unsigned(kMask ? max(row0, 0) : row0)));
  const int i_last = int(div_by(p.group_div, unsigned(last)));
  const int i_hi = kPerSequence ? min(i_last, e.seq_q - 1) : i_last;
  int hi = kPerSequence && i_lo >= e.seq_q ? 0 : e.kv_limit, lo = 0;
  if (kMask && e.right_bound >= 0) hi = min(hi, i_hi + e.diag_shift + e.right_bound + 1);
  if (kMask && p.window_left >= 0) lo = max(0, i_lo + e.diag_shift - p.window_left + 1);
  if (hi > lo) {
    tile_lo = lo / kTileKv;
    tile_hi = (hi + kTileKv - 1) / kTileKv;
  }
  begin = tile_lo;
  end = tile_hi;
  if (kSplit) {
    const int grid_hi = kPerSequence ? max(tile_hi, (p.S_kv + kTileKv - 1) / kTileKv) : tile_hi;
    const int n = grid_hi - tile_lo, per = n / p.num_splits, rem = n % p.num_splits;
    begin = tile_lo + split * per + min(split, rem);
    end = begin + per + (split < rem ? 1 : 0);
    if (kPerSequence) {
      end = min(end, tile_hi);
      begin = min(begin, end);
    }
  }
}

// Row i of q head h, batch b, in split `split`'s fp32 partials ([split][B][H_q][S_q], as the combine reads them).
__device__ __forceinline__ i64 partial_row(const SdpaParams& p, int split, int b, int h, int i) {
  return ((i64(split) * p.B + b) * p.H_q + h) * p.S_q + i;
}

// An empty chunk under split (past its sequence's keys, or more splits than tiles): the combine weighs a
// partial row by exp(LSE - M) and selects 0 for LSE = -inf whatever its O slot holds, so the CTA writes
// its rows' LSE and leaves, before loading Q. With per-sequence lengths most CTAs of a long-tailed batch are
// such chunks (B 64 lengths 1k-32k, split 32: about 7700 of 16384); each used to load Q, wait, and write 2 KB of
// zeros that the combine read back. Rows are those the epilogue writes (thread_rows' `exists`).
template <int kTileQ, bool kRaggedQ>
__device__ __forceinline__ void write_empty_chunk_lse(const SdpaParams& p, const BatchExtent& e, int b, int split,
                                                      int h_kv, int row0, int tid, int threads) {
  for (int r = tid; r < kTileQ; r += threads) {
    const int pr = row0 + r;
    int rem;
    const int i = div_by(p.group_div, pr, rem);  // pr >= 0: row0 is 0 or a row tile's first row here
    if (pr >= p.packed_rows || (kRaggedQ && i >= e.seq_q)) continue;
    const int h = h_kv * p.group + rem;
    p.lse_partial[partial_row(p, split, b, h, i)] = neg_inf();
  }
}

// One slice s of kv head h's tiles, [s W, min((s + 1) W, total)) of all batches' tiles laid end to end.
template <class TilesOf, class Item>
__device__ __forceinline__ void walk_balanced_slice(const SdpaParams& p, int s, int h, int slices, int W, int total,
                                                    TilesOf& tiles_of, Item& item) {
  const int lane = threadIdx.x % 32;
  const int lo = s * W, hi = min(lo + W, total);
  int base = 0;  // where batch b0's tiles start
  for (int b0 = 0; b0 < p.B; b0 += 32) {
    int first = 0;
    const int n = b0 + lane < p.B ? tiles_of(b0 + lane, first) : 0;
    int incl = n;  // inclusive prefix sum of the tile counts over the lanes
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
      const int v = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += v;
    }
    const int chunk = __shfl_sync(0xffffffffu, incl, 31);
    if (base + chunk >= lo) {
      for (int j = 0; j < 32 && b0 + j < p.B; ++j) {
        const int nb = __shfl_sync(0xffffffffu, n, j), kt0 = __shfl_sync(0xffffffffu, first, j);
        const int start = base + __shfl_sync(0xffffffffu, incl, j) - nb;
        if (start >= lo + W && s < slices - 1) return;  // the rest is other slices'
        const int b = b0 + j;
        if (nb == 0) {
          if (min(start / W, slices - 1) == s) item(b, h, -1, 0, 0, true);
          continue;
        }
        const int from = max(lo, start), to = min(hi, start + nb);
        if (from >= to) continue;
        item(b, h, s - start / W, kt0 + from - start, kt0 + to - start, (start + nb - 1) / W == s);
      }
    }
    base += chunk;
  }
}

// Balanced split-KV (RIME_F_BALANCED; decode over per-sequence lengths, one row tile per (batch, kv head)): a
// persistent grid of gridDim.x CTAs, as many as the GPU holds at once, shares the KV tiles of all (batch, kv head)
// pairs evenly. CTA c serves kv head c % H_kv; the CTAs of one head lay the batches' tiles end to end and CTA c takes
// tiles [s W, (s + 1) W) of them, s = c / H_kv, W = ceil(total / slices), slices = gridDim.x / H_kv (CTAs past slices x
// H_kv have no work; a grid of fewer CTAs than kv heads runs several (slice, head) each), so every CTA has the same
// work whatever the lengths and the H_kv CTAs of one slice read the same keys of every head at about the same time:
// with K/V pools [pages][page_size][H_kv][D] they read neighbouring 128-byte rows of the same pages (the order
// batch-major, then head, which gave each CTA its own pairs, made the 8-token paged decode read 1.5x the DRAM bytes for
// the same L2 traffic, ncu). A pair's tiles that fall to k CTAs are k pieces, piece i in split slot i of
// the partials (the combine's input). W is at least ceil(max_tiles / (num_splits - 1)), so that no pair has more than
// num_splits pieces. The grid of per-sequence chunks (kv_tile_range) gives each CTA at most 1 / split of its sequence:
// with lengths 1k-32k at B 64 its CTAs run 1-64 tiles each, a third of them empty, and the last wave's stragglers leave
// SMs idle (docs/perf-history.md, "Paged decode"). item(b, h_kv, piece, kt_begin, kt_end, last_piece) is called for each piece
// of this CTA, in order, by every thread that walks (whole warps: every warp of the mma.sync kernel, the first of each
// role in the Hopper one); a pair with no keys is called once, by the CTA of its head whose range holds its position,
// with piece -1 (its slots are all empty). The caller fills the slots past a pair's last piece.
template <int kTileQ, int kTileKv, bool kMask, int kFeatures, class Item>
__device__ __forceinline__ void for_each_balanced_item(const SdpaParams& p, Item&& item) {
  const int lane = threadIdx.x % 32;
  auto tiles_of = [&](int b, int& first) {
    const BatchExtent e = batch_extent<kFeatures>(p, b);
    int begin, end;
    kv_tile_range<kTileQ, kTileKv, kMask, false, true>(p, e, 0, 0, begin, end);
    first = begin;
    return max(0, end - begin);
  };
  // Every warp that walks computes the same walk (lanes over 32 batches at a time), so all call item alike.
  int total = 0;  // one head's tiles over all batches
  for (int b0 = 0; b0 < p.B; b0 += 32) {
    int first = 0, n = b0 + lane < p.B ? tiles_of(b0 + lane, first) : 0;
#pragma unroll
    for (int o = 16; o > 0; o /= 2) n += __shfl_xor_sync(0xffffffffu, n, o);
    total += n;
  }
  const int slices = max(1, int(gridDim.x) / p.H_kv);
  const int max_tiles = (p.S_kv + kTileKv - 1) / kTileKv;
  const int W = max(max((total + slices - 1) / slices, (max_tiles + p.num_splits - 2) / max(1, p.num_splits - 1)), 1);
  // Slice s of head h is the work of virtual CTA v = s H_kv + h; CTA c runs v = c, c + gridDim.x, ... (more than
  // one only when the grid has fewer CTAs than there are kv heads; none past slices x H_kv).
  for (int v = blockIdx.x; v < slices * p.H_kv; v += gridDim.x)
    walk_balanced_slice(p, v / p.H_kv, v % p.H_kv, slices, W, total, tiles_of, item);
}

// The two rows a thread holds: packed rows `first` and first + 8 (GQA packs the `group` q heads of one kv head
// into rows: packed row r is q row r / group of head h_kv * group + r % group), and their key bounds.
struct ThreadRows {
  int i[2], h[2], key_lo[2], key_hi[2];
  bool live[2], exists[2];
  int tok0;  // the batch's q_tok0: row i is dims[2] index tok0 + i of Q, O and Stats
};

// The dense row (dims[2] index) of Q, O and Stats that holds the batch's row i: tok0 + i. Under per-sequence starts
// the rows past the sequence (i >= seq_q, written as empty rows) wrap around to the rows before its start, so that
// rows 0 .. S_q - 1 of the batch are each written once: dense row (start + i) mod S_q (start <= S_q, i < S_q).
template <int kFeatures>
__device__ __forceinline__ int q_token(const SdpaParams& p, int tok0, int i) {
  if constexpr ((kFeatures & RIME_F_STARTS) != 0) {
    const int r = tok0 + i;
    return r >= p.S_q ? r - p.S_q : r;
  } else {
    return tok0 + i;
  }
}

// With ragged Q (kRaggedQ) a row past the sequence's length does not exist: its token is the next sequence's
// first, which nothing of this batch may write (a padded batch's rows there are its own and get O = 0).
template <bool kMask, bool kRaggedQ = false>
__device__ __forceinline__ ThreadRows thread_rows(const SdpaParams& p, const BatchExtent& e, int first, int h_kv) {
  ThreadRows rows;
  rows.tok0 = e.q_tok0;
  for (int r = 0; r < 2; ++r) {
    const int pr = first + 8 * r;
    // A masked grid of the Hopper engine starts its first row tile at a negative row (its partial tile first).
    int rem;
    const int i = div_by(p.group_div, max(pr, 0), rem);
    rows.exists[r] = (!kMask || pr >= 0) && pr < p.packed_rows && (!kRaggedQ || i < e.seq_q);
    rows.i[r] = rows.exists[r] ? i : 0;
    rows.h[r] = h_kv * p.group + (rows.exists[r] ? rem : 0);
    rows.live[r] = rows.exists[r] && rows.i[r] < e.seq_q;
    rows.key_hi[r] = e.kv_limit;
    rows.key_lo[r] = 0;
    if (kMask && e.right_bound >= 0) rows.key_hi[r] = min(rows.key_hi[r], rows.i[r] + e.diag_shift + e.right_bound + 1);
    if (kMask && p.window_left >= 0) rows.key_lo[r] = rows.i[r] + e.diag_shift - p.window_left + 1;
  }
  return rows;
}

// Whether key j lies outside the bounds of the thread's row `r` (masks, padding, the end of the keys).
__device__ __forceinline__ bool key_outside(const ThreadRows& rows, int r, int j) {
  return j >= rows.key_hi[r] || j < rows.key_lo[r];
}

// The online softmax over one KV tile of scores already in log2 units: moves the running max, rescales the row
// sums, leaves P = exp2(S - m) in s and the factor that O's rows must be multiplied by in alpha.
template <int kNT>
__device__ __forceinline__ void online_softmax(float (&s)[kNT][4], float (&m_run)[2], float (&l_run)[2],
                                               float (&alpha)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float mx = neg_inf();
#pragma unroll
    for (int n = 0; n < kNT; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
    mx = quad_max(mx);
    const float m_new = fmaxf(m_run[r], mx);
    const float m_use = m_new == neg_inf() ? 0.f : m_new;  // all keys masked so far: keep exp2 finite
    alpha[r] = exp2_approx(m_run[r] - m_use);
    m_run[r] = m_new;
    float sum = 0.f;
#pragma unroll
    for (int n = 0; n < kNT; ++n)
#pragma unroll
      for (int e = 2 * r; e < 2 * r + 2; ++e) {
        s[n][e] = exp2_approx(s[n][e] - m_use);
        sum += s[n][e];
      }
    l_run[r] = l_run[r] * alpha[r] + sum;
  }
}

// One KV tile of the online softmax: scales S (kNT 8-key blocks from key0) to log2 units, masks keys outside
// each row's bounds when `edge`, then online_softmax.
template <int kNT>
__device__ __forceinline__ void softmax_step(float (&s)[kNT][4], float (&m_run)[2], float (&l_run)[2],
                                             const ThreadRows& rows, int key0, float scale_log2, bool edge, int t,
                                             float (&alpha)[2]) {
#pragma unroll
  for (int n = 0; n < kNT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = e / 2, j = key0 + n * 8 + 2 * t + (e & 1);
      float v = s[n][e] * scale_log2;
      if (edge && key_outside(rows, r, j)) v = neg_inf();
      s[n][e] = v;
    }
  online_softmax(s, m_run, l_run, alpha);
}

// O's rows (in the accumulator layout) multiplied by the online softmax's factors.
// Zeroes an array of fp32 accumulator fragments ([tiles][4]: O before the first tile, S before its first mma).
template <int kTiles>
__device__ __forceinline__ void zero_fragments(float (&x)[kTiles][4]) {
#pragma unroll
  for (int n = 0; n < kTiles; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) x[n][e] = 0.f;
}

template <int kDT>
__device__ __forceinline__ void rescale_rows(float (&o_acc)[kDT][4], const float (&alpha)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int d = 0; d < kDT; ++d) {
      o_acc[d][2 * r] *= alpha[r];
      o_acc[d][2 * r + 1] *= alpha[r];
    }
}

// softmax_step, then O rescaled by each row's factor.
template <int kNT, int kDT>
__device__ __forceinline__ void softmax_tile(float (&s)[kNT][4], float (&o_acc)[kDT][4], float (&m_run)[2],
                                             float (&l_run)[2], const ThreadRows& rows, int key0, float scale_log2,
                                             bool edge, int t) {
  float alpha[2];
  softmax_step(s, m_run, l_run, rows, key0, scale_log2, edge, t, alpha);
  rescale_rows(o_acc, alpha);
}

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

// Block-scaled O through shared memory, for engines with kRows x kDv fp32 of shared memory free after their
// main loop (the wgmma engine). In the accumulator layout a thread holds 2 of every 8 columns of a row, so a
// block's amax is a quad reduction and its codes leave as single bytes, block after block in one dependent
// chain (the register path below, which sdpa_mma keeps; on the wgmma engine its NVFP4 form was ~4,700 SASS
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
