// sdpa_sm90: what one specialization decides at compile time, in one place that every role reads. The template
// arguments are the kernel's (engines/common/params.h names them in kernel names): element types in and out, the
// head dims, the feature bits and the consumer warpgroups.
#pragma once

#include "common/attention.cuh"
#include "sdpa_sm90/layout.h"

namespace rime_dev {
namespace sm90 {

// kDqk: the head dim of Q and K; kDv: of V and O (192 / 128 for MLA-style prefill, else equal).
// kC: consumer warpgroups (1, 2 or 3; rime_sm90::three_consumers_fit says where 1 and 3 fit).
template <int kIn_, int kOut_, int kDqk_, int kDv_, int kFeatures_, int kC_>
struct Config {
  static constexpr int kIn = kIn_, kOut = kOut_, kDqk = kDqk_, kDv = kDv_, kFeatures = kFeatures_, kC = kC_;
  static constexpr bool kFp8 = kIn == RIME_T_E4M3 || kIn == RIME_T_E5M2;
  static constexpr int kEB = kFp8 ? 1 : 2;
  // A 16-bit Q over FP8 K/V (an FP8 KV cache under a BF16/FP16 model, RIME_F_KV_FP8), in one of two forms:
  //  - kWidenKv (D 256, and D 64 on two consumers): the kernel is the 16-bit one (kIn is Q's type), and the
  //    producer widens each FP8 K and V tile exactly to Q's type in place, in its 16-bit stage (widen.cuh); Q's
  //    second term does not fit the FP8 consumers' registers there (32 at D 256; at D 64 on two consumers, beside
  //    S of 256 keys, ptxas serialized the wgmmas);
  //  - kQSplit (D 64 and D 128 otherwise, decode and prefill): the kernel is the FP8 one (kIn is K/V's type), and each
  //    consumer splits its Q rows into two E4M3 terms on a power-of-two scale per row (load_q_split), hi in shared
  //    memory and lo in registers, so that Q.K^T = hi.K^T + lo.K^T carries Q to about 2^-8 of each value, as its
  //    16-bit type does. The widened form moves half the FP8 kernel's bytes per KV tile (64 keys against 128:
  //    16-bit stages of 128 keys do not fit two CTAs per SM), and a decode's time goes by its tiles: 0.47x of a
  //    copy on the H200 where the FP8 kernel reaches 0.92x; the widened prefill ran 347 TFLOP/s on B4 S4096 causal
  //    where the FP8 Q graph ran 733 (docs/perf-history.md, "Measured: a 16-bit Q over FP8 K/V on the Hopper
  //    engine").
  //  - kQRounded (q_quantization e4m3_per_row): the kQSplit form with hi alone, Q rounded to E4M3 per row as its
  //    graph asks; no register beyond the FP8 Q kernel's, so it runs that kernel's tiles.
  static constexpr bool kKvFp8 = (kFeatures & RIME_F_KV_FP8) != 0;
  static constexpr bool kWidenKv = kKvFp8 && !kFp8;
  static constexpr bool kQ16 = kKvFp8 && kFp8;  // a 16-bit Q on the FP8 kernel, put into E4M3 by its consumers
  static constexpr bool kQRounded = kQ16 && (kFeatures & RIME_F_Q_E4M3_ROWS) != 0;
  static constexpr bool kQSplit = kQ16 && !kQRounded;
  static constexpr bool kKvE5m2 = (kFeatures & RIME_F_KV_E5M2) != 0;
  static constexpr int kQType = !kQ16 ? kIn : (kFeatures & RIME_F_Q_BF16) != 0 ? RIME_T_BF16 : RIME_T_FP16;
  static_assert(!kQSplit || rime_sm90::q_split_fits(kDqk, kC), "Q in two E4M3 terms: see q_split_fits");
  static_assert(kC == 1 || kC == 2 || (kC == 3 && rime_sm90::three_consumers_fit(kDqk, kDv)), "consumer warpgroups");
  static constexpr int kTileQ = rime_sm90::tile_q(kC);
  static constexpr int kN = rime_sm90::tile_kv(kEB, kDqk, kC, kQSplit);
  static constexpr int kNT = kN / 8, kDT = kDv / 8;
  static constexpr int kRow = rime_sm90::row_bytes(kDqk * kEB);  // sub-tile row width of Q and K
  static constexpr int kSubs = kDqk * kEB / kRow;              // sub-tiles along d of Q and K
  static constexpr int kRowV = rime_sm90::row_bytes(kDv * kEB);  // and of V
  static constexpr int kSubsV = kDv * kEB / kRowV;
  static constexpr int kKSteps = kDqk * kEB / 32;              // 32-byte k steps of Q.K^T
  static_assert(kDqk * kEB % 32 == 0 && kDv * kEB % 32 == 0, "rows of whole 32-byte k steps (FP8: no D 80)");
  static constexpr bool kSplit = (kFeatures & RIME_F_SPLIT) != 0;
  static constexpr bool kPadding = (kFeatures & RIME_F_PADDING) != 0;
  static constexpr bool kMask = (kFeatures & RIME_F_MASK) != 0;
  // Masked grids with the same lengths in every batch launch their row tiles heaviest first (tile_scheduler.cuh;
  // every masked grid puts its partial row tile at the start of the rows, where it is the lightest).
  static constexpr bool kMaskedRowOrder = kMask && !kPadding;
  static constexpr int kBlock = OutFormat<kOut>::kBlock;
  // FP8 with 2-3 consumers and D_v <= 128: V^T sub-tiles have room for 8 rows of ones (rime_sm90::vt_sum_rows),
  // and where no LSE is written the tensor cores sum P with them. The sum of P as held in E4M3 normalizes O by the
  // weights P.V used, but as an LSE it is off the exact one by up to 0.03 on short rows, past SPEC's Stats
  // tolerance (docs/perf-history.md, "Kernel versions: prediction and result", v19): Stats, split partials and Amax_S
  // keep the fp32 sums of the unquantized P.
  static constexpr int kSumRows = rime_sm90::vt_sum_rows(kFp8, kDv, kC);
  static constexpr bool kMmaSums = kSumRows > 0 && (kFeatures & (RIME_F_STATS | RIME_F_SPLIT | RIME_F_AMAX_S)) == 0;
  static constexpr int kVtRows = kDv + kSumRows;  // rows of a V^T sub-tile (FP8): V's d, then the rows of ones
  static constexpr rime_sm90::Smem kSmem =
      rime_sm90::smem(kEB, kDqk, kDv, kC, kFp8, kBlock > 0 && !kSplit, rime_sm90::kSmemLimit, kQSplit);
  static_assert((kFeatures & RIME_F_MX_INPUTS) == 0, "MXFP8 inputs run on sdpa_mma_mxfp8");

  // The ring (pipeline.cuh).
  static constexpr int kStages = rime_sm90::kStages;
  // The stage and phase of tile j in unsigned arithmetic (the count never goes negative; signed % and / cost sign
  // fix-ups in every tile), except in the D_qk 192 / D_v 128 kernels: there ptxas scheduled the unsigned form 2-3%
  // slower (FP8 MLA prefill on the H200, one run: signed 0.989x of the earlier kernel's time, unsigned 1.020x).
  static constexpr bool kUnsignedRing = kDqk == kDv;
  // Paged FP8: a paged tile is kN / page_size boxes each of K and V (16 TMA instructions for 16-key pages and
  // 128-key tiles), which the first producer warp issues one by one. Issuing and then taking its share of the
  // transposes made that warp the producer's critical path: ncu of the 8-token decode sampled the other three
  // producer warps waiting at the producer's per-tile barrier for it 24% of the time, and the consumers waiting
  // for K and for V^T. So there the first warp only issues loads and the other three transpose, and the raw V
  // stage's release is a barrier of its own (v_empty: the three warps' threads arrive once they have read it).
  // Widened FP8 K/V (kWidenKv) take the issuing warp paged or not: producer.cuh says why.
  // One-consumer 16-bit kernels over per-sequence lengths take it too: there V reaches the consumer through the
  // producer's pv_full (after zeroing the rows past the length), and with the first thread issuing as well, V_j's
  // readiness waited for its issue of tile j + kStages - 1, which waits for the consumer's release of V_(j-1).
  // B8 decode over lengths (2176 keys, split 1, H100): 0.0346-0.0360 against 0.0371-0.0387 ms, the plain kernel's
  // time; the kernels that ran as fast stayed within 1% (docs/perf-history.md, "The padded decode's issuing warp").
  static constexpr bool kIssuerWarp =
      (kFp8 && (kFeatures & RIME_F_PAGED) != 0) || kWidenKv || (!kFp8 && kPadding && kC == 1);
  static constexpr int kTransposeThreads = kIssuerWarp ? 96 : 128;
  // 16-bit V with no rows to zero (no per-batch padding) is read as the TMA left it: the consumers wait for the
  // load itself. Routing it through the producer's pv_full made V_j's readiness wait for the producer's issue of
  // tile j + 1, which waits for both consumers' release of V_(j-1): a chain across the two consumers' turns.
  static constexpr bool kVDirect = !kFp8 && !kPadding && !kWidenKv;

  // Named barriers (0 is __syncthreads): the consumers' turns (1 .. kC), the producer warpgroup's own, and each
  // consumer's own (its Q load and its staged epilogue). With two consumers the ids (1, 2; 3; 4, 5) and the turn
  // expressions are those of the kernel before three existed, and its SASS is the same: with other ids and
  // expressions ptxas scheduled the BF16 D 64 specialization differently and it measured 7% slower (A/B, 3 rounds).
  static constexpr int kTurnBar = 1, kProducerBar = kTurnBar + kC, kOwnBar = kProducerBar + 1;
  // The widening threads' own (kWidenKv, 96 threads): not kProducerBar, which the balanced walk's producer
  // warpgroup meets at with 128 (tile_scheduler.cuh) while the issuing warp may already be there.
  static constexpr int kWidenBar = kOwnBar + kC;
  static_assert(kWidenBar < 16, "16 named barriers");

  // Balanced (tile_scheduler.cuh): a CTA walks pieces of a split decode over per-sequence lengths.
  static constexpr bool kBalanced = (kFeatures & RIME_F_BALANCED) != 0;
  // Row tiles taken from a counter on a persistent grid (rime_sm90::dynamic_row_tiles, tile_scheduler.cuh).
  static constexpr bool kDynamic = rime_sm90::dynamic_row_tiles(
      kC, kMaskedRowOrder, kSplit,
      (kFeatures & (RIME_F_PAGED | RIME_F_RAGGED_Q | RIME_F_RAGGED_KV | RIME_F_STARTS)) != 0, kQSplit);
  static_assert(!kDynamic || !kBalanced, "one scheduler");
  static_assert(!kBalanced || (kC == 1 && kSplit && kPadding), "balanced: one consumer, a split decode over lengths");
};

}  // namespace sm90
}  // namespace rime_dev
