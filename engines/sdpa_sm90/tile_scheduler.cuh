// sdpa_sm90: which work a CTA does. Unbalanced, one row tile's KV tiles of one (kv head, batch, split): the grid's
// coordinates, which masked grids reorder heaviest first; dynamic (layout.h, dynamic_row_tiles), the row tiles of
// that order taken one after the other from a counter; balanced (a split decode over per-sequence lengths), the
// pieces for_each_balanced_item deals this CTA, one after the other.
#pragma once

#include "sdpa_sm90/config.cuh"
#include "sdpa_sm90/ptx.cuh"

namespace rime_dev {
namespace sm90 {

// One piece of a CTA's work: the KV tiles [kt_begin, kt_begin + n_tiles) of row tile q_tile (rows from row0) of
// (batch b, kv head h_kv, split). `base` counts the KV tiles of the pieces before, so that the ring's stages and
// phases run on across pieces.
struct Work {
  int b, h_kv, split, q_tile, row0, kt_begin, n_tiles, base;
  BatchExtent ext;
};

// The grid's work of this CTA, computed before the roles part (the two-consumer kernels' SASS is sensitive to
// where it is computed, docs/perf-history.md, "Kernel versions: prediction and result", session 21 (v22)). Balanced:
// none (for_each_work deals the pieces).
// `launch`: with Config::kDynamic, the launch index taken from the counter (for_each_work), which stands for the
// CTA of the grid of one CTA a row tile that it replaces; -1: none yet (Work{}).
template <class Cfg>
__device__ __forceinline__ Work grid_work_of(const SdpaParams& p, int launch = -1) {
  constexpr int kFeatures = Cfg::kFeatures, kTileQ = Cfg::kTileQ, kN = Cfg::kN;
  constexpr bool kBalanced = Cfg::kBalanced, kMaskedRowOrder = Cfg::kMaskedRowOrder, kMask = Cfg::kMask;
  constexpr bool kSplit = Cfg::kSplit, kPadding = Cfg::kPadding;
  constexpr bool kDynamic = Cfg::kDynamic;
  if constexpr (kBalanced || kDynamic) {
    if (launch < 0) return Work{};
  }
  if constexpr (kBalanced) {
    return Work{};
  } else {
    // The CTA's (row tile, kv head, batch, split).
    int q_tile, h_kv, b, split;
    if constexpr (kMaskedRowOrder) {
      // Masked (causal, window): row tile q has up to q + 1 KV tiles, and in launch order (x fastest) the grid
      // ended on the heaviest tiles of its last slices, a tail of up to one slice's longest CTA (list scheduling
      // of B4 H32 S4096 on 132 SMs: 1.039x the ideal time). Launch order now takes the row tiles heaviest first
      // within groups of kGroup (kv head, batch x split) slices: 1.002x (tools/bench/causal_order_sim.py), and
      // the CTAs in flight still share the K/V of a few heads in L2 (132 CTAs span ~kGroup slices, as before).
      // Measured (H200, A/B of 3 and 5 rounds): FP8 causal B4 H32 S4096 0.983x-0.992x the time, BF16 0.983x; with
      // per-batch lengths (padded, ragged, paged) the highest row tile is not the heaviest one, and the padded
      // and ragged B16 rows ran 1.011x-1.022x slower, so those keep launch order (docs/perf-history.md, "Measured: a
      // 16-bit Q prefill on the FP8 kernel, per-head descales on one problem, heaviest first per batch").
      // The launch index is x + nq (y + H_kv z), x < nq, so its group of kGroup slices and its place r in the
      // group's nq x kGroup CTAs come from the slice index y + H_kv z by shifts; only the last group, with fewer
      // slices, divides (its CTAs alone). The slice's (kv head, batch, split) by SdpaParams' divisors.
      constexpr int kGroup = 4;
      const unsigned nq = kDynamic ? unsigned((p.packed_rows + kTileQ - 1) / kTileQ) : gridDim.x;
      const unsigned slices = kDynamic ? unsigned(p.H_kv * p.B) : gridDim.y * gridDim.z;
      const unsigned grid_slice = kDynamic ? unsigned(launch) / nq : blockIdx.y + gridDim.y * blockIdx.z;
      const unsigned bx = kDynamic ? unsigned(launch) - grid_slice * nq : blockIdx.x;
      const unsigned group = grid_slice / kGroup, r = bx + nq * (grid_slice % kGroup);
      const unsigned in_group = min(unsigned(kGroup), slices - group * kGroup);
      int slice;
      if (in_group == kGroup) {
        slice = int(group * kGroup + r % kGroup);
        q_tile = int(nq - 1 - r / kGroup);
      } else {
        slice = int(group * kGroup + r % in_group);
        q_tile = int(nq - 1 - r / in_group);
      }
      const int b_split = div_by(p.h_kv_div, slice, h_kv);
      split = div_by(p.b_div, b_split, b);
    } else {
      q_tile = blockIdx.x;
      h_kv = blockIdx.y;
      split = div_by(p.b_div, int(blockIdx.z), b);
    }
    // Masked grids put the partial row tile first (rows from -pad, the pad rows exist nowhere): its keys then end
    // at its own last row instead of the last row tile's S_kv. At the end of the rows, a 192-row tile with 64 live
    // rows (S_q 4096) ran all 64 KV tiles of the sequence in each of its three consumers, 5.6% of a causal
    // head's work for rows that do not exist; at the start, it runs one tile. With per-batch lengths (padding) the
    // partial tile is the batch's own, ending at its seq_q. A padded batch's rows past seq_q exist (written as
    // empty rows), so a row tile must still reach the grid's last row: the shift is at most the grid's pad. Ragged
    // Q has no rows past seq_q.
    const BatchExtent ext = batch_extent<kFeatures>(p, b);
    int row0 = q_tile * kTileQ;
    if constexpr (kMask) {
      const int n_q_tiles = kDynamic ? (p.packed_rows + kTileQ - 1) / kTileQ : int(gridDim.x);
      const int grid_pad = n_q_tiles * kTileQ - p.packed_rows;
      if constexpr (kPadding) {
        const int own_pad = (kTileQ - max(ext.seq_q, 0) * p.group % kTileQ) % kTileQ;
        row0 -= (kFeatures & RIME_F_RAGGED_Q) != 0 ? own_pad : min(own_pad, grid_pad);
      } else {
        row0 -= grid_pad;
      }
    }
    // Every thread is converged here (kv_tile_range): this is the kernel's first statement (split grids are
    // never dynamic).
    int kt_begin, kt_end;
    kv_tile_range<kTileQ, kN, kMask, kSplit, kFeatures>(p, ext, row0, split, kt_begin, kt_end);
    return Work{b, h_kv, split, q_tile, row0, kt_begin, kt_end - kt_begin, 0, ext};
  }
}

// Balanced: each role's first warp walks this CTA's pieces (for_each_balanced_item) and lists up to kMaxPieces
// of them in the role's own list in shared memory (the producer's first warp also writes the LSE of the split
// slots no piece fills as it goes); then the role runs the listed pieces in a plain loop (more pieces: further
// rounds). Running the pieces inside the walk's own loops (its shuffles and early exits) made ptxas serialize
// every wgmma (C7520: warpgroup.arrive in a divergent path). One list per role, each behind the role's own named
// barrier: with one list behind a barrier of both roles (256 threads, met at two places in the code),
// compute-sanitizer's synccheck reported every consumer warp divergent at it. The lists are the kernel's
// __shared__ variable (one per kernel, whichever role function reads it).
constexpr int kMaxPieces = 16;
struct Piece {
  int b, h_kv, piece, kt_begin, n_tiles;
};
struct PieceList {
  Piece pieces[kMaxPieces];
  int n_pieces, more_pieces;
};

// Config::kDynamic: the launch indices a CTA took, in a ring of four slots (for_each_work). full: the index is
// written (one arrival); empty: every thread of the CTA has read it.
struct DynamicSlots {
  u64 full[4], empty[4];
  int index[4];
};

// The row tiles of a persistent grid's order (Config::kDynamic): launch indices past them end a CTA's work.
__device__ __forceinline__ int dynamic_work_count(const SdpaParams& p, int tile_q) {
  return ((p.packed_rows + tile_q - 1) / tile_q) * p.H_kv * p.B;  // below 2^31: layout.h
}

// Config::kDynamic: the launch index of the CTA's k-th work, once the producer's first thread has taken it. A
// consumer reads the next work's index this way before its for_each_work loop does, to load that work's Q early
// (consume_work); the loop's own read and arrival then follow as before (the slot cannot be refilled before every
// thread of the CTA has arrived on its empty barrier). Safe to wait where this thread holds back none of the
// producer's loads of the current work: the producer takes index k right after issuing the last loads of work k - 1.
__device__ __forceinline__ int launch_of(DynamicSlots& d, int k) {
  mbar_wait(&d.full[k % 4], unsigned(k / 4) & 1u);
  return *static_cast<volatile int*>(&d.index[k % 4]);
}

// Runs run(work) for each piece of this CTA's work, in the role of warpgroup `wg` (0: the producer).
// piece_lists: [2], the producer's and the consumer's (balanced only); dyn: the slots (Config::kDynamic only).
template <class Cfg, class Run>
__device__ __forceinline__ void for_each_work(const SdpaParams& p, const Work& grid_work, PieceList* piece_lists,
                                              int tid, int wg, Run&& run, DynamicSlots* dyn = nullptr) {
  constexpr int kFeatures = Cfg::kFeatures, kTileQ = Cfg::kTileQ, kN = Cfg::kN;
  constexpr int kProducerBar = Cfg::kProducerBar, kOwnBar = Cfg::kOwnBar;
  constexpr bool kBalanced = Cfg::kBalanced, kMask = Cfg::kMask;
  if constexpr (kBalanced) {
    const bool producer = wg == 0;
    PieceList& list = piece_lists[producer ? 0 : 1];
    const int rtid = tid - (producer ? 0 : 128);  // the thread within its role's warpgroup (one consumer)
    const int list_bar = producer ? kProducerBar : kOwnBar;
    int base = 0;
    for (int first = 0;; first += kMaxPieces) {
      if (rtid < 32) {
        int item = 0, listed = 0;
        for_each_balanced_item<kTileQ, kN, kMask, kFeatures>(
            p, [&](int b, int h_kv, int piece, int kt_begin, int kt_end, bool last_piece) {
              const int k = item++;
              if (k < first || k >= first + kMaxPieces) return;  // another round's
              if (piece >= 0) {
                if (rtid == 0) list.pieces[listed] = Piece{b, h_kv, piece, kt_begin, kt_end - kt_begin};
                ++listed;
              }
              // Slots past the pair's last piece (all of them for a pair with no keys) hold no keys: LSE -inf.
              if (producer && last_piece) {
                const BatchExtent e = batch_extent<kFeatures>(p, b);
                for (int s = piece + 1; s < p.num_splits; ++s)
                  write_empty_chunk_lse<kTileQ, (kFeatures & RIME_F_RAGGED_Q) != 0>(p, e, b, s, h_kv, 0, rtid, 32);
              }
            });
        if (rtid == 0) {
          list.n_pieces = listed;
          list.more_pieces = item > first + kMaxPieces;  // the walk has items past this round's
        }
      }
      named_sync(list_bar, 128);
      const int n = list.n_pieces;
      const bool more = list.more_pieces != 0;
      for (int i = 0; i < n; ++i) {
        const Piece q = list.pieces[i];
        run(Work{q.b, q.h_kv, q.piece, 0, 0, q.kt_begin, q.n_tiles, base, batch_extent<kFeatures>(p, q.b)});
        base += q.n_tiles;
      }
      named_sync(list_bar, 128);  // every thread of the role has read the list before the next round's
      if (!more) break;
    }
  } else if constexpr (Cfg::kDynamic) {
    // The producer's first thread takes the CTA's k-th launch index from the counter (zeroed by the plan before
    // each launch) into slot k % 4, once every thread has read what the slot held four works before, and every
    // thread reads it there: the producer runs ahead of the consumers by up to its ring's stages of K/V, which may
    // span several short row tiles. An index past the grid's last ends the CTA's work.
    DynamicSlots& d = *dyn;
    const int total = dynamic_work_count(p, kTileQ);
    int base = 0;
    for (int k = 0;; ++k) {
      const int slot = k % 4;
      const unsigned ph = unsigned(k / 4) & 1u;
      if (tid == 0) {
        if (k >= 4) mbar_wait(&d.empty[slot], ph ^ 1u);
        d.index[slot] = int(atomicAdd(p.row_tile_counter, 1u));
        mbar_arrive(&d.full[slot]);
      }
      const int launch = launch_of(d, k);
      // Every thread arrives (an arrival releases the arriving thread's own read only): one arrival a warp after a
      // __syncwarp left compute-sanitizer's racecheck reporting the slot's next write against the other lanes'
      // reads.
      mbar_arrive(&d.empty[slot]);
      if (launch >= total) break;
      Work w = grid_work_of<Cfg>(p, launch);
      w.base = base;
      run(w);
      base += w.n_tiles;
    }
  } else {
    run(grid_work);
  }
}

}  // namespace sm90
}  // namespace rime_dev
