// sdpa_sm90: the producer's transpose of an FP8 V tile into V^T (FP8 wgmma takes its B operand k-major only).
#pragma once

#include "sdpa_sm90/layout.h"
#include "sdpa_sm90/mma.cuh"

namespace rime_dev {
namespace sm90 {

// The FP8 transpose of one V tile (kN keys of kDv bytes, as the TMA wrote it: sub-tiles of kRowV-byte rows) into
// V^T (kDv rows of kN key bytes, as sub-tiles of row_bytes(kN)-byte rows along the keys, each with the swizzle
// of its row width), keys permuted within each 16 as pack_p_fp8's P fragment holds them (vt_key_of_position),
// keys at or past kv_end zeroed. A warp moves a unit of 16 keys x 32 d with one ldmatrix.x4.trans, four byte
// permutes and one stmatrix.x4:
//   the four 8x8 b16 matrices loaded are keys 0-7 / 8-15 (m & 1) x d 0-15 / 16-31 (m >> 1); transposed, lane
//   (c = lane / 4, q = lane % 4) holds, per matrix, keys 2q and 2q + 1 of the b16 column c (d 2c and 2c + 1), so
//   bytes 0 and 2 of matrices 0 and 1 are row d = 2c of V^T at positions 4q .. 4q + 3 (keys 2q, 2q + 1, 8 + 2q,
//   9 + 2q: exactly vt_key_of_position's order), bytes 1 and 3 row 2c + 1;
//   the four words are stored as stmatrix rows: row c of stored matrix 0 is V^T row 2c for c < 4 and 2c + 1 for
//   c >= 4 (matrix 1 the other one; 2 and 3 the same 16 d on), so that a stored matrix's 8 rows have 8 distinct
//   row % 8 and its 16-byte writes fall in 8 different bank groups under the swizzle.
// Loads are conflict-free too: a loaded matrix is 8 consecutive keys at one 16-byte chunk, which the TMA swizzle
// spreads over 8 bank groups. (The 32-bit-load form this replaces issued ~460 instructions per producer warp per
// FP8 D 128 tile, as many as a consumer warp: docs/perf-history.md, "Kernel versions: prediction and result", v9.)
// kWarps: the warps that share the tile (ptid counts their threads from 0): 4, or 3 beside a warp that only issues
// loads (paged FP8: see the producer). Units need not divide evenly (D 96 on 96-key tiles: 18 over 4 warps).
// kOpaqueLane: the lane passes through an opaque move, once per tile, so that what derives from it (each unit's two
// addresses) is not loop-invariant across the producer's tile loop: ptxas then computes the addresses where they
// are used, where otherwise it hoists every unit's addresses out of the loop and spills them under the producer's
// 56-72 registers (nvcc 13.0: 56 bytes in the FP8 two-consumer kernels, 136-220 in the paged ones, reloaded in
// every tile's transpose; none with the move), at ~14 more ALU instructions per unit. Measured (H200, one call,
// docs/perf-history.md, "Session 15: every FP8 decode on the one-consumer Hopper kernel"): the one-consumer 8-token
// paged decode 0.906x-0.916x the time, but the two- and three-consumer FP8 prefill rows 1.02x-1.17x and the paged
// prefill 1.135x: where the consumers bind, the extra instructions take
// issue slots of their SM sub-partitions; where the producer's tile chain binds (decode), the reloads cost more.
// So one consumer only.
// kVtRows: the rows of a V^T sub-tile (kDv, + rime_sm90::vt_sum_rows rows of ones, which this leaves alone).
template <int kDv, int kRowV, int kN, int kWarps = 4, bool kOpaqueLane = false, int kVtRows = kDv>
__device__ __forceinline__ void transpose_v_tile(const u8* sv, u8* svt, int ptid, int kv_end) {
  constexpr int kVtRow = rime_sm90::row_bytes(kN);  // V^T sub-tiles along the keys: [kVtRows rows][kVtRow bytes]
  constexpr int kGroups = kN / 16, kUnits = kGroups * (kDv / 32);

  constexpr int kPerWarp = (kUnits + kWarps - 1) / kWarps;
  int lane = ptid % 32;
  if constexpr (kOpaqueLane) asm volatile("mov.b32 %0, %0;\n" : "+r"(lane));
  const int warp = ptid / 32;
  const int m = lane / 8, r = lane % 8;  // this lane's addresses: row r of matrix m
  const int c = lane / 4, q = lane % 4;  // this lane's fragment: b16 column c, key positions 4q .. 4q + 3
  // Word 0 (2) takes bytes 0 and 2 (row 2c) for c < 4 and bytes 1 and 3 (row 2c + 1) for c >= 4; word 1 (3) the
  // other row.
  const u32 sel_lo = c < 4 ? 0x6420u : 0x7531u, sel_hi = c < 4 ? 0x7531u : 0x6420u;
  const int ld_key = (m & 1) * 8 + r, ld_d = (m >> 1) * 16;
  const int st_d = (m >> 1) * 16 + 2 * r + ((m & 1) ^ (r >= 4 ? 1 : 0));
  // Fully unrolled (8 units per warp for every tile shape), except for 256-key tiles, whose 8 units' addresses
  // (two V^T sub-tiles) then spilled past the producer's 56 registers. (Unrolled by 4, the D 256 kernel measured
  // 17% slower: docs/perf-history.md, "Kernel versions: prediction and result", v10.)
  constexpr int kUnroll = kN > 128 ? 4 : kPerWarp;
#pragma unroll kUnroll
  for (int i = 0; i < kPerWarp; ++i) {
    const int u = warp + kWarps * i;
    if (kUnits % kWarps != 0 && u >= kUnits) break;  // the last round of three warps: not every warp has a unit
    const int g = u % kGroups, d0 = (u / kGroups) * 32;
    const int key = g * 16 + ld_key, d = d0 + ld_d;
    u32 v[4];
    ldmatrix_x4_trans(v, sv + (d / kRowV) * (kN * kRowV) + swz<kRowV>(key, d % kRowV));
    u32 w[4] = {__byte_perm(v[0], v[1], sel_lo), __byte_perm(v[0], v[1], sel_hi), __byte_perm(v[2], v[3], sel_lo),
                __byte_perm(v[2], v[3], sel_hi)};
    if (kv_end < kN) {  // the last tile of the keys (or of a batch's padding): zero keys at or past kv_end
      const int lim = kv_end - g * 16;
      const u32 keep = (2 * q < lim ? 0xFFu : 0u) | (2 * q + 1 < lim ? 0xFF00u : 0u) |
                       (8 + 2 * q < lim ? 0xFF0000u : 0u) | (9 + 2 * q < lim ? 0xFF000000u : 0u);
#pragma unroll
      for (int k = 0; k < 4; ++k) w[k] &= keep;
    }
    const int pos = g * 16;  // this unit's 16 key positions: in sub-tile pos / kVtRow
    stmatrix_x4(svt + (pos / kVtRow) * (kVtRows * kVtRow) + swz<kVtRow>(d0 + st_d, pos % kVtRow), w);
  }
}

// The same transpose for FP8 D 256 on 128-key tiles, within the 24 registers a producer keeps beside two consumers
// of 240 (O of 256 columns and S of 128 keys). transpose_v_tile deals units to warps round-robin and derives each
// unit's two swizzled addresses from it: fully unrolled, ptxas kept the 16 units' addresses of both stages across
// the tile loop and spilled 704 bytes at 24 registers; rolled, 16 bytes and a serial chain per unit. Here warp w
// takes whole d blocks of 32 (blocks w, w + kWarps, ...), each over the tile's 8 key groups. Within a block the
// load addresses differ per key group by a constant; the store's 16-byte chunk is the key group XOR the
// row's swizzle, and the V^T stage is 1024-aligned, so each unit's store address is the block's address of key
// group 0 XOR an immediate. Per unit: ldmatrix, four byte permutes, one LOP3, stmatrix.
template <int kDv, int kRowV, int kN, int kWarps, int kVtRows>
__device__ __forceinline__ void transpose_v_tile_d256(const u8* sv, u8* svt, int ptid, int kv_end) {
  static_assert(kDv == 256 && kRowV == 128 && kN == 128 && kVtRows == kDv,
                "two 128-byte V sub-tiles, one V^T sub-tile of 128 keys");
  constexpr int kBlocks = kDv / 32, kBlocksPerWarp = (kBlocks + kWarps - 1) / kWarps, kVtRow = kN;
  const int lane = ptid % 32, warp = ptid / 32;
  const int m = lane / 8, r = lane % 8, c = lane / 4, q = lane % 4;
  const u32 sel_lo = c < 4 ? 0x6420u : 0x7531u, sel_hi = c < 4 ? 0x7531u : 0x6420u;
  // Load: row (m & 1) * 8 + r of key group 0; d block b's 16-byte chunk 2 (b % 4) + (m >> 1) of the row in V
  // sub-tile b / 4, swizzled by r: the block's part, 2 (b % 4), XORs into bits 5-6 (the stage is 1024-aligned).
  const u32 ld = smem_addr(sv) + ((m & 1) * 8 + r) * kRowV + (((m >> 1) ^ r) << 4);
  // Store: V^T row st_d of d block 0, chunk 0 (key group 0) swizzled by the row: st_d % 8 (32 b + st_d alike).
  const int st_d = (m >> 1) * 16 + 2 * r + ((m & 1) ^ (r >= 4 ? 1 : 0));
  const u32 st = smem_addr(svt) + st_d * kVtRow + ((st_d & 7) << 4);
  auto unit = [&](u32 ld_b, u32 st_b, int g, u32 keep) {
    u32 v[4];
    ldmatrix_x4_trans(v, ld_b + g * 16 * kRowV);
    const u32 w[4] = {__byte_perm(v[0], v[1], sel_lo) & keep, __byte_perm(v[0], v[1], sel_hi) & keep,
                      __byte_perm(v[2], v[3], sel_lo) & keep, __byte_perm(v[2], v[3], sel_hi) & keep};
    stmatrix_x4(st_b ^ u32(g << 4), w);
  };
  const bool last = kv_end < kN;  // the last tile of the keys (or of a batch's padding): zero keys at or past kv_end
#pragma unroll
  for (int i = 0; i < kBlocksPerWarp; ++i) {
    const int b = warp + kWarps * i;
    if (kBlocks % kWarps != 0 && b >= kBlocks) break;  // three warps: the last round has two blocks
    const u32 ld_b = (ld ^ u32((b % 4) << 5)) + u32(b / 4) * (kN * kRowV);
    const u32 st_b = st + u32(b) * (32 * kVtRow);
    if (!last) {
#pragma unroll
      for (int g = 0; g < kN / 16; ++g) unit(ld_b, st_b, g, ~0u);
    } else {
#pragma unroll 1
      for (int g = 0; g < kN / 16; ++g) {
        const int lim = kv_end - g * 16;
        unit(ld_b, st_b, g,
             (2 * q < lim ? 0xFFu : 0u) | (2 * q + 1 < lim ? 0xFF00u : 0u) | (8 + 2 * q < lim ? 0xFF0000u : 0u) |
                 (9 + 2 * q < lim ? 0xFF000000u : 0u));
      }
    }
  }
}

// The same transpose within the 32 registers a producer keeps beside three consumers of 160 (FP8 D_v 128 on 96-key
// tiles, D_v 96 on 128-key tiles), on tiles of any whole number of 16-key groups. As in transpose_v_tile_d256,
// each warp's units share one load base and one store base, from which a unit's addresses differ by immediates,
// so that nothing per unit is held across the tile loop: with the four warps of a dense producer, warp w takes d
// block w over every key group (D_v 128) or key groups w, w + 4, ... of every d block (D_v 96); with three (paged:
// the fourth issues), key groups w, w + 3, ... where they divide (96 keys), else units dealt round-robin. V's rows
// are one sub-tile of 128 bytes (D_v 128) or sub-tiles of 32 (D_v 96: d block b is sub-tile b); either way a
// lane's swizzle term comes from its row within the 8-key matrix alone (key groups start at multiples of 16).
template <int kDv, int kRowV, int kN, int kWarps, int kVtRows>
__device__ __forceinline__ void transpose_v_tile_three_consumers(const u8* sv, u8* svt, int ptid, int kv_end) {
  static_assert((kRowV == 128 || kRowV == 32) && kDv % 32 == 0 && kDv <= 128 && kN % 16 == 0,
                "V in sub-tiles of 128- or 32-byte rows");
  using SwV = Swizzle<kRowV>;
  constexpr int kBlocks = kDv / 32, kGroups = kN / 16, kVtRow = rime_sm90::row_bytes(kN);
  constexpr int kBlocksPerSub = kRowV / 32;  // d blocks of 32 bytes per V sub-tile row
  constexpr int kChunks = kVtRow / 16, kVtSub = kVtRows * kVtRow;  // key groups per V^T row; bytes per V^T sub-tile
  constexpr bool kByBlock = kBlocks == kWarps;
  const int lane = ptid % 32, warp = ptid / 32;
  const int m = lane / 8, r = lane % 8, c = lane / 4, q = lane % 4;
  const u32 sel_lo = c < 4 ? 0x6420u : 0x7531u, sel_hi = c < 4 ? 0x7531u : 0x6420u;
  // Load: row (m & 1) * 8 + r of key group 0, 16-byte chunk (m >> 1) of d block 0, swizzled by the row (r's bits:
  // 8 (m & 1) and 16 g leave the swizzle term of 32- and 128-byte rows alone); d block b adds its chunks 2 (b %
  // kBlocksPerSub), XORed into bits 5-6 (the stage is 1024-aligned), and its sub-tile.
  const int row_swizzle = kRowV == 128 ? r : (r >> SwV::kShift) & SwV::kMask;
  const u32 ld = smem_addr(sv) + ((m & 1) * 8 + r) * kRowV + (((m >> 1) ^ row_swizzle) << 4);
  // Store: V^T row st_d of d block 0, chunk 0 of sub-tile 0, swizzled by the row; key group g is chunk g % kChunks
  // of sub-tile g / kChunks (a sub-tile's size keeps the swizzle's address bits: 136 rows of 32 bytes = 34 x 128).
  const int st_d = (m >> 1) * 16 + 2 * r + ((m & 1) ^ (r >= 4 ? 1 : 0));
  const u32 st = smem_addr(svt) + u32(swz<kVtRow>(st_d, 0));
  const bool last = kv_end < kN;
  auto unit = [&](int b, int g) {
    u32 keep = ~0u;
    if (last) {
      const int lim = kv_end - g * 16;
      keep = (2 * q < lim ? 0xFFu : 0u) | (2 * q + 1 < lim ? 0xFF00u : 0u) | (8 + 2 * q < lim ? 0xFF0000u : 0u) |
             (9 + 2 * q < lim ? 0xFF000000u : 0u);
    }
    u32 v[4];
    const int sub = kBlocks <= kBlocksPerSub ? 0 : b / kBlocksPerSub;  // V^T of D_v 128: one sub-tile
    ldmatrix_x4_trans(v, (ld ^ u32((b % kBlocksPerSub) << 5)) + u32(sub * (kN * kRowV) + g * 16 * kRowV));
    const u32 w[4] = {__byte_perm(v[0], v[1], sel_lo) & keep, __byte_perm(v[0], v[1], sel_hi) & keep,
                      __byte_perm(v[2], v[3], sel_lo) & keep, __byte_perm(v[2], v[3], sel_hi) & keep};
    stmatrix_x4((st + u32(b * 32 * kVtRow + (g / kChunks) * kVtSub)) ^ u32((g % kChunks) << 4), w);
  };
  if constexpr (kByBlock) {
#pragma unroll
    for (int g = 0; g < kGroups; ++g) unit(warp, g);
  } else if constexpr (kGroups % kWarps == 0) {
#pragma unroll
    for (int b = 0; b < kBlocks; ++b)
#pragma unroll
      for (int i = 0; i < kGroups / kWarps; ++i) unit(b, warp + kWarps * i);
  } else {  // three warps over a number of key groups they do not divide (paged): units dealt round-robin
#pragma unroll 1
    for (int u = warp; u < kBlocks * kGroups; u += kWarps) unit(u / kGroups, u % kGroups);
  }
}

}  // namespace sm90
}  // namespace rime_dev
