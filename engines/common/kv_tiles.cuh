// Which KV tiles a row tile walks (masks, split chunks cut evenly over sequences of any length), where split
// partials go, and the balanced scheduler that spreads a decode's KV tiles evenly over a persistent grid.
#pragma once

#include "common/batch_extent.cuh"

namespace rime_dev {

// The most keys a sequence of the batch has (its largest kv_limit), in every lane of the calling warp, which must
// be converged: lanes over 32 batches at a time, then a shuffle reduction.
template <int kFeatures>
__device__ __forceinline__ int longest_kv_limit(const SdpaParams& p) {
  const int lane = threadIdx.x % 32;
  int longest = 0;
  for (int b0 = 0; b0 < p.B; b0 += 32)
    if (b0 + lane < p.B) longest = max(longest, batch_extent<kFeatures>(p, b0 + lane).kv_limit);
#pragma unroll
  for (int o = 16; o > 0; o /= 2) longest = max(longest, __shfl_xor_sync(0xffffffffu, longest, o));
  return longest;
}

// The KV tiles [begin, end) that the row tile of packed rows [row0, row0 + kTileQ) visits: the union of its
// rows' unmasked keys, and under split (both engines' chunk grids; the balanced walk cuts its own pieces) this
// split's chunk of them (SPEC section 3: near-equal chunks, the remainder to the leading splits; a chunk past the
// end is empty). Under split with per-sequence lengths every lane of the calling warp must be converged.
// With per-sequence lengths the chunks are cut from the batch's longest sequence (longest_kv_limit) instead of this
// sequence's own length, then clipped to it: every chunk of every sequence holds at most the same number of tiles,
// and a short sequence's trailing chunks are empty. Cut from each sequence's own length, one 32k sequence among 1k
// ones ran as many CTAs as each short one, each 32 times longer: the batch ran at the speed of its longest sequence
// (docs/serving.md, "Split balancing"). Cut from S_kv, a plan for a cache's capacity (generate's B8 decode step,
// 2176 keys live of 4096, split 4) gave a sequence's four chunks 16, 16, 2 and 0 of its 34 tiles where the longest
// sequence's cut gives 9, 9, 8 and 8.
template <int kTileQ, int kTileKv, bool kMask, bool kSplit, int kFeatures>
__device__ __forceinline__ void kv_tile_range(const SdpaParams& p, const BatchExtent& e, int row0, int split,
                                              int& begin, int& end) {
  constexpr bool kPerSequence = (kFeatures & RIME_F_PADDING) != 0;
  int longest = 0;
  if constexpr (kSplit && kPerSequence) longest = longest_kv_limit<kFeatures>(p);
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
    const int grid_hi = kPerSequence ? max(tile_hi, (longest + kTileKv - 1) / kTileKv) : tile_hi;
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
// the partials (the combine's input). W is at least ceil(max_tiles / (num_splits - 1)), max_tiles the most tiles one
// pair has, so that no pair has more than num_splits pieces (a pair's nb <= (num_splits - 1) W tiles meet at most
// num_splits slices). Taken from the tensor's key extent S_kv instead, a plan for a cache's capacity (generate's B8
// decode: 34 of 64 tiles live) gave split 4 slices of 22 tiles where 12 serve (0.0400 against 0.0388 ms on an H100)
// and split 2 the whole 64 (0.0650 against 0.0426). The grid of per-sequence chunks (kv_tile_range) gives each CTA at
// most 1 / split of its sequence: with lengths 1k-32k at B 64 its CTAs run 1-64 tiles each, a third of them empty,
// and the last wave's stragglers leave SMs idle (docs/perf-history.md, "Paged decode").
// item(b, h_kv, piece, kt_begin, kt_end, last_piece) is called for each piece of this CTA, in order, by every thread
// that walks (whole warps: every warp of the mma.sync kernel, the first of each
// role in the Hopper one); a pair with no keys is called once, by the CTA of its head whose range holds its position,
// with piece -1 (its slots are all empty). The caller fills the slots past a pair's last piece.
template <int kTileQ, int kTileKv, bool kMask, int kFeatures, class Item>
__device__ __forceinline__ void for_each_balanced_item(const SdpaParams& p, Item&& item) {
  const int lane = threadIdx.x % 32;
  auto tiles_of = [&](int b, int& first) {
    const BatchExtent e = batch_extent<kFeatures>(p, b);
    int begin, end;
    kv_tile_range<kTileQ, kTileKv, kMask, false, kFeatures>(p, e, 0, 0, begin, end);
    first = begin;
    return max(0, end - begin);
  };
  // Every warp that walks computes the same walk (lanes over 32 batches at a time), so all call item alike.
  int total = 0, max_tiles = 0;  // one head's tiles over all batches, and the most one batch has
  for (int b0 = 0; b0 < p.B; b0 += 32) {
    int first = 0, n = b0 + lane < p.B ? tiles_of(b0 + lane, first) : 0, m = n;
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
      n += __shfl_xor_sync(0xffffffffu, n, o);
      m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
    }
    total += n;
    max_tiles = max(max_tiles, m);
  }
  const int slices = max(1, int(gridDim.x) / p.H_kv);
  const int W = max(max((total + slices - 1) / slices, (max_tiles + p.num_splits - 2) / max(1, p.num_splits - 1)), 1);
  // Slice s of head h is the work of virtual CTA v = s H_kv + h; CTA c runs v = c, c + gridDim.x, ... (more than
  // one only when the grid has fewer CTAs than there are kv heads; none past slices x H_kv).
  for (int v = blockIdx.x; v < slices * p.H_kv; v += gridDim.x)
    walk_balanced_slice(p, v / p.H_kv, v % p.H_kv, slices, W, total, tiles_of, item);
}

}  // namespace rime_dev
