// sdpa_sm90: the producer warpgroup. One thread (paged: the first warp) issues the TMA loads of K and V tiles into
// the ring as stages free up; for FP8 all 128 threads (paged: the other 96) then transpose each V tile into V^T,
// keys in P's register order and keys past the batch's valid length zeroed, and signal pv_full; 16-bit V is used
// as it lands (the consumers wait for the TMA itself), or, with per-batch padding, once the producer has zeroed the
// rows past the valid length. FP8 K and V under a 16-bit Q: the first warp issues, the other three widen each K
// and V tile to Q's type in place (widen.cuh) and signal k_widened and pv_full.
#pragma once

#include "sdpa_sm90/pipeline.cuh"
#include "sdpa_sm90/tile_scheduler.cuh"
#include "sdpa_sm90/transpose.cuh"
#include "sdpa_sm90/widen.cuh"

namespace rime_dev {
namespace sm90 {

// The loads (and the V^T or zeroing) of one piece of work. ptid: the thread within the producer warpgroup.
template <class Cfg>
__device__ __forceinline__ void produce_work(const SdpaSm90Params& params, const Tiles& tiles, const Ring& ring,
                                             int ptid, bool issuer, const Work& w) {
  constexpr int kN = Cfg::kN, kDqk = Cfg::kDqk, kDv = Cfg::kDv, kEB = Cfg::kEB, kFeatures = Cfg::kFeatures;
  constexpr int kC = Cfg::kC, kRow = Cfg::kRow, kSubsV = Cfg::kSubsV, kRowV = Cfg::kRowV;
  constexpr int kVtRows = Cfg::kVtRows, kStages = Cfg::kStages, kTransposeThreads = Cfg::kTransposeThreads;
  constexpr bool kUnsignedRing = Cfg::kUnsignedRing;
  constexpr int kProducerBar = Cfg::kProducerBar;
  constexpr bool kFp8 = Cfg::kFp8, kIssuerWarp = Cfg::kIssuerWarp, kVDirect = Cfg::kVDirect;
  constexpr bool kPadding = Cfg::kPadding;
  constexpr rime_sm90::Smem kSmem = Cfg::kSmem;
  // What the TMA writes: K and V in Q's type, or FP8 bytes in the upper half of each 16-bit stage (kWidenKv), as
  // sub-tiles of the FP8 rows' width.
  constexpr bool kWidenKv = Cfg::kWidenKv;
  constexpr int kKvEB = kWidenKv ? 1 : kEB;
  constexpr int kLoadRowK = kWidenKv ? rime_sm90::row_bytes(kDqk) : kRow, kLoadSubsK = kDqk * kKvEB / kLoadRowK;
  constexpr int kLoadRowV = kWidenKv ? rime_sm90::row_bytes(kDv) : kRowV, kLoadSubsV = kDv * kKvEB / kLoadRowV;
  constexpr int kKLanding = kWidenKv ? kN * kDqk : 0, kVLanding = kWidenKv ? kN * kDv : 0;
  constexpr unsigned kKBytes = kN * kDqk * kKvEB, kVBytes = kN * kDv * kKvEB;
  const SdpaParams& p = params.p;
  u8* const sK = tiles.k;
  u8* const sV = tiles.v;
  u8* const sVt = tiles.vt;
  u64* const k_full = ring.k_full;
  u64* const k_empty = ring.k_empty;
  u64* const v_full = ring.v_full;
  u64* const pv_full = ring.pv_full;
  u64* const pv_empty = ring.pv_empty;
  u64* const v_empty = ring.v_empty;
  const int b = w.b, h_kv = w.h_kv, kt_begin = w.kt_begin, n_tiles = w.n_tiles;
  const BatchExtent& ext = w.ext;
  auto stage_of = [&](int j) {
    return kUnsignedRing ? int(unsigned(w.base + j) % kStages) : (w.base + j) % kStages;
  };
  auto phase_of = [&](int j) {
    return kUnsignedRing ? unsigned(w.base + j) / kStages & 1u : unsigned((w.base + j) / kStages) & 1u;
  };
  // Ragged K/V: the maps are (d, T, h, 1) and the batch's keys start at token kv_tok0. A tile running past the
  // batch's end reads the next sequence's tokens (or TMA's zeros past T): masked in S, and V's rows past the
  // length are zeroed below, as for any padded batch.
  constexpr bool kRaggedKv = (kFeatures & RIME_F_RAGGED_KV) != 0;
  const int kv_b = kRaggedKv ? 0 : b;
  // Paged K/V: the maps are (d, slot, h, page) over the pools, boxes of min(page_size, kN) keys, and a tile is
  // kN / box boxes, each from the page the table gives its first key. A box of >= 16 keys lands at a multiple
  // of 16 rows of its sub-tile, a whole number of the swizzle's atoms (8 rows of 128 bytes, or of 64), so the
  // stage is laid out as a dense tile's and the consumers read it the same way. A box whose first key is at
  // or past the sequence's length (its page id may be anything: the contract covers only pages holding keys
  // below seq_len_kv) reads page 0 instead, which exists: those keys are masked in S and V's rows past the
  // length are zeroed below, as for any padded batch. The expected byte count of a stage is unchanged.
  constexpr bool kPagedKv = (kFeatures & RIME_F_PAGED) != 0;
  constexpr int kMaxBoxes = kPagedKv ? kN / 16 : 1;
  static_assert(kMaxBoxes <= 32, "a lane of the issuing warp holds one box's page id");
  const int box_log2 = kPagedKv ? rime_sm90::paged_box_log2(p.page_size_log2, kN) : 0;
  const int* page_row = kPagedKv ? p.page_table + i64(b) * p.page_table_stride : nullptr;
  // Paged: the whole first warp issues; lane q loads box q's page id (all of a tile's ids in flight at once,
  // one register each: held by one thread they spilled under the producer's 56 registers), and lane 0 issues
  // the boxes, taking each id by a shuffle. Dense: thread 0 alone.
  const bool issues = kPagedKv ? ptid < 32 : issuer;
  // A box's first slot is its first key's place in the page (0 unless the page is larger than the tile); a
  // box at or past the length reads slot 0 of page 0.
  auto box_used = [&](int key0, int q) { return (q << box_log2) < kN && key0 + (q << box_log2) < ext.kv_limit; };
  auto page_id = [&](int j) {  // this lane's box of tile j: its page id
    const int key0 = ext.kv_tok0 + (kt_begin + j) * kN;
    return ptid < kMaxBoxes && j < n_tiles && box_used(key0, ptid)
               ? __ldg(page_row + ((key0 + (ptid << box_log2)) >> p.page_size_log2))
               : 0;
  };
  // Paged: tile j + 1's page ids are loaded when tile j is issued, so that their latency (a dependent global
  // load before every tile's TMA) overlaps the issue of a whole tile (8-token decode: 2% faster,
  // docs/perf-history.md, "Session 14: the paged producer of the Hopper kernel").
  int next_page = 0;
  if constexpr (kPagedKv) next_page = page_id(0);
  auto issue = [&](int j) {  // the loads of the j-th tile of this CTA's range into its stage
    const int s = stage_of(j);
    const unsigned ph = phase_of(j);
    const int key0 = ext.kv_tok0 + (kt_begin + j) * kN;
    int lane_page = 0;
    if constexpr (kPagedKv) {
      lane_page = next_page;
      next_page = page_id(j + 1);
    }
    auto load = [&](u8* stage, const RimeTensorMap* map, int subs, int row, u64* bar) {
      if constexpr (kPagedKv) {
        const int slot_mask = (1 << p.page_size_log2) - 1;
#pragma unroll
        for (int q = 0; q < kMaxBoxes; ++q) {
          if ((q << box_log2) >= kN) break;  // uniform across the warp
          const int page = __shfl_sync(0xffffffffu, lane_page, q);
          if (issuer) {
            const int slot = box_used(key0, q) ? (key0 + (q << box_log2)) & slot_mask : 0;
#pragma unroll
            for (int c = 0; c < subs; ++c)
              tma_load_4d(stage + c * kN * row + (q << box_log2) * row, map, c * (row / kKvEB), slot, h_kv, page, bar);
          }
        }
      } else if (!kIssuerWarp || issuer) {  // an issuing warp runs this whole; its first thread issues
#pragma unroll
        for (int c = 0; c < subs; ++c)
          tma_load_4d(stage + c * kN * row, map, c * (row / kKvEB), key0, h_kv, kv_b, bar);
      }
    };
    mbar_wait(&k_empty[s], ph ^ 1);
    if (issuer) mbar_expect_tx(&k_full[s], kKBytes);
    load(sK + s * kSmem.k_stage_bytes + kKLanding, &params.k_map, kLoadSubsK, kLoadRowK, &k_full[s]);
    // FP8: V lands in a raw stage the producer itself reads (the transpose of tile j - kStages finished before
    // the producers' barrier at the end of its iteration); 16-bit (widened or not): the consumers read the stage,
    // so wait for them.
    if constexpr (!kFp8) mbar_wait(&pv_empty[s], ph ^ 1);
    if constexpr (kIssuerWarp && kFp8) mbar_wait(&v_empty[s], ph ^ 1);  // the transposes of tile j - kStages read it
    if (issuer) mbar_expect_tx(&v_full[s], kVBytes);
    load(sV + s * kSmem.v_stage_bytes + kVLanding, &params.v_map, kLoadSubsV, kLoadRowV, &v_full[s]);
  };
  if constexpr (kVDirect) {
    // Nothing to do to V between the TMA and the consumers: only the loads, each as soon as its stage is free.
    if (issues)
      for (int j = 0; j < n_tiles; ++j) issue(j);
    return;
  }
  // Paged FP8, widened K/V and one-consumer 16-bit over lengths (kIssuerWarp, config.cuh): the first warp issues
  // every tile's loads as soon as its stages are free (k_empty, v_empty; 16-bit: k_empty, pv_empty), and the other
  // three transpose, widen or zero each tile as it lands. Otherwise the issuing thread also transposes: it keeps the
  // loads kStages - 1 tiles ahead of its transpose (the raw V stage a load overwrites is that of the tile
  // transposed in the previous iteration).
  // Widened K/V need the issuing warp: the load of V(j + 1) waits for the consumers' P(j - 1).V, which follows
  // their Q.K(j)^T, which waits for K(j)'s widening, so a thread that both issued and widened would wait on itself.
  // The whole warp walks the issue loop (paged: page ids by lane; dense: the first thread issues), so that it
  // leaves it converged: the balanced walk's next barrier (tile_scheduler.cuh) is warp-aligned.
  if constexpr (kIssuerWarp) {
    if (ptid < 32) {
      for (int j = 0; j < n_tiles; ++j) issue(j);
      return;
    }
  }
  constexpr int kTransposeWarps = kTransposeThreads / 32, kFirstTransposer = 128 - kTransposeThreads;
  constexpr int kAhead = kStages - 1;
  if (!kIssuerWarp && issues)
    for (int j = 0; j < kAhead && j < n_tiles; ++j) issue(j);
  for (int j = 0; j < n_tiles; ++j) {
    const int s = stage_of(j);
    const unsigned ph = phase_of(j);
    if (!kIssuerWarp && issues && j + kAhead < n_tiles) issue(j + kAhead);
    if constexpr (kWidenKv) {
      mbar_wait(&k_full[s], ph);
      widen_tile<Cfg::kIn, Cfg::kKvE5m2, kDqk, kN, kTransposeThreads, Cfg::kWidenBar>(
          sK + s * kSmem.k_stage_bytes, ptid - kFirstTransposer, kN);
      fence_proxy_async_shared();  // generic-proxy writes, then the consumers' wgmma reads
      mbar_arrive(&ring.k_widened[s]);
    }
    mbar_wait(&v_full[s], ph);
    const int kv_end = ext.kv_limit - (kt_begin + j) * kN;  // keys of this tile at or past it are zero
    if constexpr (kFp8) {
      mbar_wait(&pv_empty[s], ph ^ 1);
      // FP8 D 256 on 128-key tiles: the transpose written for a producer of 24 registers. One consumer (decode): the
      // opaque lane (transpose_v_tile) where the producer's tile chain binds.
      if constexpr (kDv == 256 && kN == 128)
        transpose_v_tile_d256<kDv, kRowV, kN, kTransposeWarps, kVtRows>(
            sV + s * kSmem.v_stage_bytes, sVt + s * kSmem.vt_stage_bytes, ptid - kFirstTransposer, kv_end);
      else if constexpr (rime_sm90::producer_regs(kC, kFp8, Cfg::kQSplit, kDv) == 32)
        transpose_v_tile_three_consumers<kDv, kRowV, kN, kTransposeWarps, kVtRows>(
            sV + s * kSmem.v_stage_bytes, sVt + s * kSmem.vt_stage_bytes, ptid - kFirstTransposer, kv_end);
      else
        transpose_v_tile<kDv, kRowV, kN, kTransposeWarps, kC == 1, kVtRows>(
            sV + s * kSmem.v_stage_bytes, sVt + s * kSmem.vt_stage_bytes, ptid - kFirstTransposer, kv_end);
    } else if constexpr (kWidenKv) {
      widen_tile<Cfg::kIn, Cfg::kKvE5m2, kDv, kN, kTransposeThreads, Cfg::kWidenBar>(sV + s * kSmem.v_stage_bytes,
                                                                                   ptid - kFirstTransposer, kv_end);
    } else if (kPadding && kv_end < kN) {
      // Rows of V past the batch's valid length hold the caller's data (seq_len_kv < S_kv): zero them.
      u8* tile = sV + s * kSmem.v_stage_bytes;
      for (int e = (ptid - kFirstTransposer) * 16; e < kSubsV * kN * kRowV; e += kTransposeThreads * 16) {
        const int key = (e % (kN * kRowV)) / kRowV;
        if (key >= kv_end) *reinterpret_cast<uint4*>(tile + e) = make_uint4(0, 0, 0, 0);
      }
    }
    fence_proxy_async_shared();  // generic-proxy writes (V^T, zeroed rows), then the consumers' wgmma reads
    mbar_arrive(&pv_full[s]);
    // The transposing threads are done reading the raw V stage: the issuing warp waits for them on v_empty,
    // or, where the issuing thread transposes too, every producer thread meets here.
    if constexpr (kIssuerWarp && kFp8) mbar_arrive(&v_empty[s]);
    else if constexpr (kFp8) named_sync(kProducerBar, 128);
  }
}

// Warpgroup 0 of the CTA: gives up registers for the consumers (rime_sm90::producer_regs), then loads every piece
// of the CTA's work.
template <class Cfg>
__device__ __forceinline__ void producer(const SdpaSm90Params& params, const Tiles& tiles, const Ring& ring,
                                         const Work& grid_work, PieceList* piece_lists, int tid, int wg,
                                         DynamicSlots* dyn) {
  if constexpr (rime_sm90::shares_registers(Cfg::kC, Cfg::kDv))
    setmaxnreg_dec<rime_sm90::producer_regs(Cfg::kC, Cfg::kFp8, Cfg::kQSplit, Cfg::kDv)>();
  const int ptid = tid;
  const bool issuer = ptid == 0;
  if (issuer) {
    prefetch_tensor_map(&params.k_map);
    prefetch_tensor_map(&params.v_map);
  }
  for_each_work<Cfg>(params.p, grid_work, piece_lists, tid, wg,
                     [&](const Work& w) { produce_work<Cfg>(params, tiles, ring, ptid, issuer, w); }, dyn);
}

}  // namespace sm90
}  // namespace rime_dev
