// sdpa_mma: what one specialization decides at compile time, in one place that every step of the kernel reads.
// The template arguments are the kernel's (engines/common/params.h names them in kernel names): element types in
// and out, the head dims, the row and KV tiles and the feature bits.
#pragma once

#include "common/attention.cuh"
#include "sdpa_mma/layout.h"

namespace rime_dev {
namespace mma_engine {

template <int kIn_, int kOut_, int kDqk_, int kDv_, int kTileQ_, int kTileKv_, int kFeatures_>
struct Config {
  static constexpr int kIn = kIn_, kOut = kOut_, kDqk = kDqk_, kDv = kDv_, kTileQ = kTileQ_, kTileKv = kTileKv_,
                       kFeatures = kFeatures_;
  static constexpr int kEB = (kIn == RIME_T_FP16 || kIn == RIME_T_BF16) ? 2 : 1;  // bytes of an input element
  static constexpr bool kFp8 = kEB == 1;
  static constexpr int kThreads = rime_mma::threads(kTileQ);
  // A 16-bit Q over FP8 K/V (RIME_F_KV_FP8): computed in FP16; K and V arrive as FP8 bytes (kKvEB) in raw stages
  // and are widened exactly to FP16 tiles before the mmas, Q is FP16 or a BF16 widened by a row factor
  // (load_q_bf16_as_fp16).
  static constexpr bool kKv8 = (kFeatures & RIME_F_KV_FP8) != 0;
  static constexpr bool kQBf16 = kKv8 && (kFeatures & RIME_F_Q_BF16) != 0;
  static constexpr bool kKvE5m2 = (kFeatures & RIME_F_KV_E5M2) != 0;
  static constexpr int kKvEB = kKv8 ? 1 : kEB;
  static_assert(!kKv8 || kIn == RIME_T_FP16, "a 16-bit Q over FP8 K/V computes in FP16");
  // MXFP8 inputs (SPEC section 6): one UE8M0 scale per 32 d of Q and K rows and per 32 keys of V columns. A
  // 32-byte k step of Q.K^T is exactly one Q/K scale block and a 32-key P.V step one V block, so each mma goes
  // into a zeroed fp32 partial that is scaled (by a power of two: exact) and added.
  static constexpr bool kMx = (kFeatures & RIME_F_MX_INPUTS) != 0;
  // Shared memory as layout.h lays it out for the host too; pitches in bytes, padded to spread banks.
  static constexpr rime_mma::Smem kSmem = rime_mma::smem(kTileQ, kTileKv, kDqk, kDv, kEB, kMx, kKv8);
  static constexpr int kRowQ = kSmem.row_q, kRowK = kSmem.row_k, kRowV = kSmem.row_v, kRowVt = kSmem.row_vt;
  // FP8 K/V under a 16-bit Q land in raw 8-bit stages (pitches kLdRowK / kLdRowV), widened into sK / sV per tile.
  static constexpr int kLdRowK = kSmem.row_raw_k, kLdRowV = kSmem.row_raw_v;
  static constexpr int kKSteps = kDqk * kEB / 32;  // 32-byte k steps of Q.K^T
  static constexpr int kNT = kTileKv / 8;          // 8-key accumulator tiles per KV tile
  static constexpr int kDT = kDv / 8;              // 8-column accumulator tiles of O
  static constexpr bool kQInRegs = kDqk * kEB <= 256;
  static constexpr int kQFragSteps = kQInRegs ? kKSteps : 1;  // Q fragments held in registers
  static constexpr bool kSplit = (kFeatures & RIME_F_SPLIT) != 0;
  static constexpr bool kPadding = (kFeatures & RIME_F_PADDING) != 0;
  static constexpr bool kMask = (kFeatures & RIME_F_MASK) != 0;
  static constexpr bool kRaggedQ = (kFeatures & RIME_F_RAGGED_Q) != 0;
  static constexpr bool kSoftcap = (kFeatures & RIME_F_SOFTCAP) != 0;
  static constexpr bool kPaged = (kFeatures & RIME_F_PAGED) != 0;
  static_assert(!kPaged || kPadding, "paged K/V comes with per-sequence lengths (validation requires padding)");
  static constexpr int kVBlocks = kTileKv / 32;  // V scale blocks per KV tile
  static constexpr int kMxKSteps = kMx ? kKSteps : 1;
  static_assert(!kMx || kFp8, "MXFP8 inputs are FP8");
  static_assert(!kKv8 || !kMx, "MXFP8 inputs are not a 16-bit Q over FP8 K/V");
  // FP8 decode tiles (16 rows, one warp) skip the shared-memory transpose of V: they compute O^T = V^T P^T,
  // whose A operand (V^T, d x keys) comes straight from the V tile through ldmatrix.trans (on byte pairs) and
  // two byte permutes, and whose B operand (P^T) is the P fragment as it is (kernel.cuh's loop).
  static constexpr bool kVtRegs = kFp8 && !kMx && kTileQ <= 32;  // rime_mma::vt_in_smem's complement
  static constexpr int kOtTiles = kVtRegs ? kDv / 16 : 1;        // 16-d m tiles of the O^T accumulators
  // A 32-byte k step of Q.K^T is 16 elements of a 16-bit Q (head dims 80 and 96 too) and 32 of an FP8 one.
  static_assert(kDqk * kEB % 32 == 0 && kDv % 16 == 0, "head dims must be whole 32-byte k steps and multiples of 16");
  static_assert(kTileKv % 32 == 0, "KV tiles are whole 32-key FP8 k steps");
};

}  // namespace mma_engine
}  // namespace rime_dev
