// sdpa_sm90: warp-specialized Hopper forward for FP8 (E4M3/E5M2) and BF16/FP16, D 64, 128, 256, and D_qk 192
// with D_v 128 (MLA-style prefill). This file is the kernel's entry: it lays out shared memory, initializes the
// ring and hands each warpgroup its role. The roles live in files of their own:
//   config.cuh          every compile-time decision of a specialization (tile, stages, feature switches)
//   tile_scheduler.cuh  which work a CTA does (the grid's order, the balanced decode's pieces)
//   pipeline.cuh        the ring of K / V (/ V^T) stages and its mbarriers; the shared-memory regions
//   producer.cuh        warpgroup 0: TMA loads of K and V (paged: page by page), for FP8 the V transpose
//   transpose.cuh       the FP8 V -> V^T transpose in shared memory (ldmatrix / stmatrix)
//   consumer.cuh        warpgroups 1 .. kC: the main loop (wgmmas, turns, ghost turns) and the epilogue's call
//   mma.cuh             shared-memory swizzles, wgmma descriptors, S = Q K^T and O += P V per type
//   mask.cuh            the mask of a tile of scores;  softmax.cuh  the online softmax of a tile
//   ptx.cuh             the PTX wrappers (mbarriers, TMA, named barriers, fences, setmaxnreg)
//   layout.h            the launch shape and shared-memory layout, shared with the host (engine.cpp)
// The epilogue (normalisation, sink, Stats, Amax, every O format, split partials) is common/attention.cuh's.
//
// A CTA owns 64, 128 or 192 packed rows of one (batch, kv head) (GQA packs the q heads of a kv head into rows, as
// in the other engines) and is one producer and kC = 1, 2 or 3 consumer warpgroups (one: two CTAs per SM). Registers
// after setmaxnreg (layout.h): the producer 56 (72 beside one FP8 consumer, 32 beside three 16-bit ones or three
// FP8 ones of D_v 128, 24 beside two FP8 D 256 ones); a consumer 184 (one FP8), 224 (two), 240 (two FP8 D 256), 160
// (three beside a producer of 32) or 152 (three beside one of 56).
// Masked grids (without per-batch lengths) run their partial row tile first, so that it is the lightest.
// Q is loaded by each consumer for its own rows with cp.async into the same swizzled layout the TMA writes for
// K. Shared-memory operands are stored as sub-tiles of rows of 128 bytes (64 for FP8 D 64) with the matching TMA /
// wgmma swizzle: the 16-byte chunk c of row r sits at c ^ (r % 8) (128-byte) or c ^ ((r / 2) % 4) (64-byte).
#pragma once

#include "sdpa_sm90/config.cuh"
#include "sdpa_sm90/consumer.cuh"
#include "sdpa_sm90/pipeline.cuh"
#include "sdpa_sm90/producer.cuh"
#include "sdpa_sm90/tile_scheduler.cuh"

namespace rime_dev {

// kDqk: the head dim of Q and K; kDv: of V and O (192 / 128 for MLA-style prefill, else equal).
// kC: consumer warpgroups (1, 2 or 3; rime_sm90::three_consumers_fit says where 1 and 3 fit).
template <int kIn, int kOut, int kDqk, int kDv, int kFeatures, int kC>
__global__ void __launch_bounds__(rime_sm90::threads(kC), rime_sm90::ctas_per_sm(kC, kDv)) sdpa_sm90_fwd(const __grid_constant__ SdpaSm90Params params) {
  using namespace sm90;
  using Cfg = Config<kIn, kOut, kDqk, kDv, kFeatures, kC>;
  constexpr rime_sm90::Smem kSmem = Cfg::kSmem;
  const SdpaParams& p = params.p;

  extern __shared__ __align__(1024) u8 smem_raw[];
  u8* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  const Tiles tiles{smem, smem + kSmem.q, smem + kSmem.k, smem + kSmem.v, smem + kSmem.vt};
  const Ring ring = ring_at<Cfg>(reinterpret_cast<u64*>(smem + kSmem.barriers));

  pdl_launch_dependents();  // the combine waits for this grid's completion itself
  // The warpgroup index through a shuffle from lane 0: the compiler then knows it is warp-uniform and keeps what
  // derives from it (the consumer's Q address, its wgmma descriptors) in uniform registers.
  const int tid = threadIdx.x, wg = __shfl_sync(0xffffffffu, tid / 128, 0);
  const Work grid_work = grid_work_of<Cfg>(p);
  PieceList* piece_lists = nullptr;  // [2]: the producer's, the consumer's (tile_scheduler.cuh)
  if constexpr (Cfg::kBalanced) {
    __shared__ PieceList balanced_lists[2];
    piece_lists = balanced_lists;
  }

  DynamicSlots* dyn = nullptr;  // dynamic row tiles: the ring of launch indices taken (tile_scheduler.cuh)
  if constexpr (Cfg::kDynamic) {
    __shared__ DynamicSlots dynamic_slots;
    dyn = &dynamic_slots;
    if (tid == 0)
      for (int i = 0; i < 4; ++i) {
        mbar_init(&dyn->full[i], 1);
        mbar_init(&dyn->empty[i], 128 * (Cfg::kC + 1));
      }
  }
  if (tid == 0) init_ring<Cfg>(ring);
  if constexpr (Cfg::kMmaSums) {
    // The rows of ones after each V^T sub-tile's kDv rows, in every stage: written once (the transposes write
    // rows below kDv only). 1.0 in V's type; every byte of a row is the same, so the swizzle does not matter.
    constexpr int kN = Cfg::kN, kVtRows = Cfg::kVtRows;
    constexpr int kVtRow = rime_sm90::row_bytes(kN), kSubTiles = kN / kVtRow;
    constexpr int kWordsPerSub = Cfg::kSumRows * kVtRow / 4;
    constexpr u32 kOnes = kIn == RIME_T_E5M2 ? 0x3C3C3C3Cu : 0x38383838u;
    for (int i = tid; i < Cfg::kStages * kSubTiles * kWordsPerSub; i += blockDim.x) {
      const int stage = i / (kSubTiles * kWordsPerSub), sub = i / kWordsPerSub % kSubTiles, w = i % kWordsPerSub;
      reinterpret_cast<u32*>(tiles.vt + stage * kSmem.vt_stage_bytes + sub * kVtRows * kVtRow + kDv * kVtRow)[w] =
          kOnes;
    }
    fence_proxy_async_shared();  // generic-proxy writes, then the consumers' wgmma reads
  }
  __syncthreads();

  if (wg == 0) {
    producer<Cfg>(params, tiles, ring, grid_work, piece_lists, tid, wg, dyn);
    return;
  }
  consumer<Cfg>(params, tiles, ring, grid_work, piece_lists, tid, wg, dyn);
}

}  // namespace rime_dev
