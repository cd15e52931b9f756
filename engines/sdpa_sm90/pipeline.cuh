// sdpa_sm90: what the producer and the consumers share. The shared-memory regions (rime_sm90::smem lays them out)
// and the ring of K / V (/ V^T) stages with its mbarriers: the j-th KV tile a CTA walks (over all its pieces when
// balanced) uses stage j % kStages in phase (j / kStages) % 2 of its barriers.
#pragma once

#include "sdpa_sm90/config.cuh"
#include "sdpa_sm90/ptx.cuh"

namespace rime_dev {
namespace sm90 {

// The shared-memory regions of a CTA, from its 1024-byte-aligned base.
struct Tiles {
  u8* base;
  u8* q;   // Q: 64 rows per consumer
  u8* k;   // kStages K tiles
  u8* v;   // kStages V tiles
  u8* vt;  // FP8: kStages V^T tiles (the producer's transposes)
};

// The ring's mbarriers, kStages of each.
struct Ring {
  u64* k_full;    // TMA of K landed
  u64* k_ready;   // what a consumer waits for before Q.K^T: k_full, or where FP8 K is widened (kWidenKv) the
                  // widening threads' arrivals (k_widened)
  u64* k_widened; // (kWidenKv) K widened to Q's type: the producer's 96 widening threads
  u64* k_empty;   // every consumer done with K (lane 0 of each of their warps)
  u64* v_full;    // TMA of V landed (the producer waits; the consumers too for 16-bit V as is)
  u64* pv_full;   // the P.V operand is ready (V^T for FP8, V for 16-bit): the producer threads (128; the 96 that
                  // transpose beside an issuing warp)
  u64* pv_empty;  // every consumer done with it
  u64* v_empty;   // (kIssuerWarp) the transposing threads done reading raw V
  u64* pv_ready;  // what a consumer waits for before P.V: v_full where 16-bit V is read as it lands (kVDirect),
                  // else pv_full
};

template <class Cfg>
__device__ __forceinline__ Ring ring_at(u64* bars) {
  constexpr int kStages = Cfg::kStages;
  static_assert(7 * kStages <= 16, "the barriers reserved in rime_sm90::smem");
  Ring r;
  r.k_full = bars;
  r.k_empty = bars + kStages;
  r.v_full = bars + 2 * kStages;
  r.pv_full = bars + 3 * kStages;
  r.pv_empty = bars + 4 * kStages;
  r.v_empty = bars + 5 * kStages;
  r.k_widened = bars + 6 * kStages;
  r.k_ready = Cfg::kWidenKv ? r.k_widened : r.k_full;
  r.pv_ready = Cfg::kVDirect ? r.v_full : r.pv_full;
  return r;
}

// By one thread, before the CTA's first __syncthreads.
template <class Cfg>
__device__ __forceinline__ void init_ring(const Ring& ring) {
  for (int i = 0; i < Cfg::kStages; ++i) {
    mbar_init(&ring.k_full[i], 1);
    mbar_init(&ring.k_empty[i], 4 * Cfg::kC);
    mbar_init(&ring.v_full[i], 1);
    mbar_init(&ring.pv_full[i], Cfg::kTransposeThreads);
    if (Cfg::kIssuerWarp) mbar_init(&ring.v_empty[i], Cfg::kTransposeThreads);
    if (Cfg::kWidenKv) mbar_init(&ring.k_widened[i], Cfg::kTransposeThreads);
    mbar_init(&ring.pv_empty[i], 4 * Cfg::kC);
  }
  fence_mbarrier_init();
}

// The stage and the phase of tile j of a piece whose tiles follow `base` earlier ones: each role spells them inline
// (stage_of / phase_of in producer.cuh and consumer.cuh) as `(base + j) % kStages` and `(base + j) / kStages & 1`,
// unsigned where Config::kUnsignedRing. Through one shared function, ptxas scheduled 3 of 4 specializations tried
// differently (BF16 D 64 three consumers: 8 fewer instructions, 2088 lines changed), which no bench run has
// measured; inline, every specialization compiles to the SASS it had as one function.

}  // namespace sm90
}  // namespace rime_dev
