// The launch shape of the sdpa_sm90 kernels (rows sdpa_sm90_fp8 and sdpa_sm90_f16), read by kernel.cuh and by
// engine.cpp alike, so the two cannot drift. No includes beyond host_device.h: NVRTC compiles it.
#pragma once

#include "common/host_device.h"

namespace rime_sm90 {

// A CTA is one producer warpgroup (warpgroup 0: TMA loads of K and V; for FP8 also the transpose of V) and one,
// two or three consumer warpgroups of 64 query rows each, taking turns at the tensor cores (ping-pong); the engine
// picks the count per graph (engine.cpp). A third consumer gives every scheduler a second warp with softmax work
// (ncu of the two-consumer kernel found the FP8 D 128 consumers latency-bound in their softmax: 0.64 eligible
// warps per scheduler, docs/perf-history.md, "Kernel versions: prediction and result", the v10 profile); it leaves
// each consumer 152-160 registers (producer_regs, below), which hold O (64 for D_v 128), S (32 registers for 64 keys)
// and P, so three consumers take 64- or 96-key tiles (128 at D 64, whose O is 32 registers; tile_kv).
// D_v 256 (O of 128 registers) keeps two.
RIME_HOST_DEVICE constexpr bool three_consumers_fit(int d_qk, int d_v) { return d_qk <= 192 && d_v <= 128; }
// A 16-bit Q over FP8 K/V runs the FP8 kernel with Q split into two E4M3 terms where Q's second term fits the
// consumer's registers: D_qk up to 128, but not D 64 on two consumers, whose 256-key tile's S (128 registers)
// beside it made ptxas serialize the wgmmas. Elsewhere (D 256, D 64 on two) the 16-bit kernel widens K and V.
RIME_HOST_DEVICE constexpr bool q_split_fits(int d_qk, int n_consumers) {
  return d_qk <= 128 && !(d_qk == 64 && n_consumers == 2);
}
RIME_HOST_DEVICE constexpr int threads(int n_consumers) { return 128 * (1 + n_consumers); }
// One consumer (graphs of at most 64 packed rows: a multi-token decode, 8 tokens x a group of 4): 256 threads,
// two CTAs per SM, which take turns at the tensor cores as two consumers of one CTA do, where a CTA of two
// consumers would idle one (measured on the 8-token paged decode: 0.75x the time of the mma.sync 32x32 tile that
// served it; docs/perf-history.md, "Session 12: one consumer warpgroup for the 8-token decode").
// One 16-bit consumer at D_v 256 (decodes of Gemma's head dim): one CTA per SM, whose 256 threads hold the whole
// register file, since O (128 registers) beside S of 64 keys needs 240 (ptxas 13.0: no spills at 240, 72-92 bytes
// at 200), and 64-key K and V stages of 32 KB each leave room for one CTA's 160 KB.
RIME_HOST_DEVICE constexpr int ctas_per_sm(int n_consumers, int d_v = 0) {
  return n_consumers == 1 && d_v != 256 ? 2 : 1;
}
// Whether the warpgroups trade registers with setmaxnreg: not where one CTA of one consumer holds the whole file,
// whose launch already gives every thread 255.
RIME_HOST_DEVICE constexpr bool shares_registers(int n_consumers, int d_v = 0) {
  return !(n_consumers == 1 && d_v == 256);
}
RIME_HOST_DEVICE constexpr int tile_q(int n_consumers) { return 64 * n_consumers; }
// Registers per thread after setmaxnreg: the producer gives up all but 56 (its transpose's addresses), the
// consumers take the rest of the 64K register file (multiples of 8).
constexpr int kProducerRegs = 56;
// One FP8 consumer: 72 for the producer (at 56 and 64, under the 128-register launch cap of two CTAs per SM, ptxas
// spilled 24-72 bytes in the producer's transpose), 184 for the consumer; a 16-bit producer only issues loads
// (56), and its consumer, whose P is twice as many registers, takes 200. Beside three 16-bit consumers the
// producer keeps 32, so that each consumer gets 160: at 152 a 16-bit D 64 consumer with S of 128 keys spilled 48
// bytes and ptxas serialized its wgmmas; at 160 neither (ptxas 13.0). At 32 the paged producer of a 16-bit D 64
// kernel spills 4 bytes (its page-id prefetch, one store and load per tile beside a barrier wait), at 24 every
// paged 16-bit producer spills.
// FP8 D 256 on two consumers (128-key tiles) keeps 24: each consumer takes 240 for O (128 registers), S of 128 keys
// (64) and P, which at 232 spilled and serialized its wgmmas; the producer's transpose is written for 24
// (transpose_v_tile_d256).
// FP8 D_v 128 and 96 on three consumers keep 32 (FlashAttention 3's split beside three): their transpose is written
// for it (transpose_v_tile_three_consumers; transpose_v_tile spilled 36 bytes at 32 at D 128, 124 at D 96), and each
// consumer's 160 hold S of 96 keys beside O of 64 registers (D 128) or S of 128 beside O of 48 (D 96) (ptxas 13.0:
// no spills; at 96 keys beside a producer of 56, 60 bytes at D 128; 128 keys at D 96 on 152, 108). A 16-bit Q in
// two E4M3 terms keeps 56.
// FP8 D 96 on two consumers keeps 64: at 56 its transpose (six units of 32-byte-row sub-tiles a warp) spilled 12
// bytes of hoisted addresses (ptxas 13.0); its consumers' 216 hold O of 48 registers beside S of 128 keys.
// A 16-bit Q over FP8 K/V on the FP8 kernel (q_split: its consumer holds Q's second E4M3 term, 16 registers at
// D 128) leaves its producer 64 and takes 192: at 184 ptxas serialized every wgmma of the consumer's tile and spilled
// a Q fragment; at 192 neither, and the producer's transpose reloads what it does at 72 (ptxas 13.0).
RIME_HOST_DEVICE constexpr int producer_regs(int n_consumers, bool fp8, bool q_split = false, int d_v = 0) {
  return n_consumers == 1 && fp8 ? (q_split ? 64 : 72)
         : n_consumers == 3 && !fp8 ? 32
         : n_consumers == 3 && fp8 && (d_v == 128 || d_v == 96) && !q_split ? 32
         : n_consumers == 2 && fp8 && d_v == 256 ? 24
         : n_consumers == 2 && fp8 && d_v == 96  ? 64
                                                : kProducerRegs;
}
// The registers a thread has at launch: the 64K register file over the SM's threads, in multiples of 8 (ptxas's
// cap under the kernel's launch bounds): 168 for two consumers, 128 for one or three.
RIME_HOST_DEVICE constexpr int launch_regs(int n_consumers, int d_v = 0) {
  return 65536 / (ctas_per_sm(n_consumers, d_v) * threads(n_consumers)) / 8 * 8;
}
// setmaxnreg.inc takes registers only from those the CTA's own warps released (its CTA pool), so the consumers
// share what the producer gave up: asking for more waits forever (a two-consumer kernel asking 240 beside a
// producer of 32 hung on the H200, docs/perf-history.md, "Kernel versions: prediction and result", session 22;
// 65536 / 384 is not a multiple of 8).
RIME_HOST_DEVICE constexpr int consumer_regs(int n_consumers, bool fp8, bool q_split = false, int d_v = 0) {
  return (launch_regs(n_consumers) +
          (launch_regs(n_consumers) - producer_regs(n_consumers, fp8, q_split, d_v)) / n_consumers) /
         8 * 8;
}
// K / V (/ V^T) ring depth (the kernel's barriers and stage arithmetic follow it). A third stage (loads of tile
// j + 2 in flight while the consumers read j and j + 1) measured no faster on any bench row (A/B in one H200 run:
// 1.00x-1.03x of the 2-stage time for FP8, 0.99x-1.01x for BF16; docs/perf-history.md, "Kernel versions: prediction
// and result", v8): the TMA is not what the consumers wait for. Two stages leave the shared memory to wider KV tiles.
constexpr int kStages = 2;

// Keys per KV tile: 256 for FP8 D 64 (a consumer holds S of 256 keys in 128 registers, O in 32 and P in 32: ptxas
// places them past the launch's 168 registers, which setmaxnreg raises to 224, without spilling; 6% faster than
// 128 keys on the bench row); for D 256 on two consumers 128 FP8 keys (consumers of 240 registers beside a producer
// of 24: 0.86x the time of 64-key tiles on the bench row, docs/perf-history.md, "Measured: FP8 D 256 on 128 x 128
// tiles") and 64 16-bit ones (16-bit K and V stages of 128 keys would not fit shared memory); 128 otherwise (192 keys
// for FP8 D 128 measured 2-7% slower than 128: docs/perf-history.md, "Kernel versions: prediction and result", v10).
// Three consumers: 96 FP8 keys at D 128 (O of 64 registers, S of 96 in 48; the fixed work of a tile, ~80
// instructions a warp, then comes per 96 keys instead of 64), 128 at D 96 (O of 48 registers beside S of 128 in
// 64, as many as D 128's; 96-key tiles ran FP8 D 96 at 0.84x the D 128 kernel's TFLOP/s, the fixed work per tile
// weighing more beside 3/4 of the tensor work), 64 for a 16-bit Q in two E4M3 terms (its second term, 16
// registers, beside S of 96 keys spilled 244 bytes) and the other head dims, 128 at D 64. 96 16-bit keys at D 80
// and 96 (O of 40-48 registers, S of 96 in 48 and P in 24; at 128 keys 48-212 bytes spilled, ptxas 13.0).
// One consumer: 128 FP8 keys (two CTAs of it share the SM's shared memory, and its 184 registers hold S of 128 keys
// beside O; D 256 is never served with one); 16-bit, 64 keys at D 128 and above (the same 16 KB per K stage as the
// FP8 tile, so that two CTAs fit the SM's shared memory: 128 keys would take 145 KB a CTA at D 128) and 128 below:
// the B8 S_kv 32k decodes took 0.934x (D 64), 0.936x (D 80) and 0.988x (D 96) the time of 64-key tiles (H100 A/B,
// 3 rounds, docs/perf.md), half as many tiles' waits and turns per byte.
RIME_HOST_DEVICE constexpr int tile_kv(int elem_bytes, int d, int n_consumers, bool q_split = false) {
  return n_consumers == 1 ? (d == 256 || (elem_bytes == 2 && d >= 128) ? 64 : 128)
         : n_consumers == 3 ? (d == 64 ? 128
                               : elem_bytes == 1 && d == 96 && !q_split ? 128
                               : (elem_bytes == 1 && d == 128 && !q_split) || (elem_bytes == 2 && d < 128)
                                   ? 96
                                   : 64)
         : d == 256                         ? (elem_bytes == 1 ? 128 : 64)
         : elem_bytes == 1 && d == 64       ? 256
                                            : 128;
}

// FP8 prefill (two or three consumers) with D_v <= 128: each V^T sub-tile has room for 8 rows after its D_v rows.
// Where the plan writes no LSE the kernel fills them with ones and runs P.V with N = D_v + 8, so that its last 8
// columns are the rows' sums of P, summed by the tensor cores: the consumers' 64 FADDs per tile go. (D_v 256 would
// need N = 264 > 256; one consumer serves decode, where the consumers are not what binds.)
RIME_HOST_DEVICE constexpr int vt_sum_rows(bool fp8, int d_v, int n_consumers) {
  return fp8 && n_consumers > 1 && d_v <= 128 ? 8 : 0;
}

// Row tiles taken from a counter (tile_scheduler.cuh, for_each_work): three-consumer grids under a mask with the
// same lengths in every batch (their launch order is heaviest first), unsplit, without pages, ragged tensors or
// per-sequence starts, launch as many CTAs as the GPU holds at once; each CTA takes the next row tile in that order
// from a counter in the workspace, and the producer loads the next tile's K and V while the consumers finish. The
// counter hands each free SM the next heaviest tile, as the hardware's launch order did (a static walk of the same
// tiles lost 9-13% on the long causal rows), and the last consumer wakes consumer 0 after its last turn, so that
// consumer 0 starts the next row tile while the others finish theirs. H100 A/B against the grid of one CTA a tile,
// two calls (docs/perf-history.md, "a persistent grid taking row tiles from a counter"): B64 H32/8 S512 D 128
// causal 0.941x the time, FP8 B4 S4096 D 128 causal 0.967x-0.975x, BF16 1.009x-1.020x, the D 80 / 96 ones
// 0.983x-1.008x. Not where Q is split into two E4M3 terms (a 16-bit Q over FP8 K/V, Config::kQSplit): the second
// term's registers and the loop's made ptxas spill 88 bytes in the kernel (none on the grid of one CTA a tile), and
// the B4 S4096 D 128 causal row ran 1.74x the time on an H100. The launch indices count in 32 bits: a grid's row
// tiles stay far below 2^31 (each holds 192 rows of Q, at least 12 KB).
RIME_HOST_DEVICE constexpr bool dynamic_row_tiles(int n_consumers, bool masked_row_order, bool split,
                                                  bool paged_ragged_or_starts, bool q_split) {
  return n_consumers == 3 && masked_row_order && !split && !paged_ragged_or_starts && !q_split;
}

// A paged tile's TMA box: min(page_size, the largest power of two dividing tile_kv) keys (96-key tiles: boxes of at
// most 32), so that a tile is whole boxes and no box crosses a page (page sizes are powers of two).
RIME_HOST_DEVICE constexpr int box_log2_cap(int tile_kv) {
  return tile_kv % 2 == 0 ? 1 + box_log2_cap(tile_kv / 2) : 0;
}
RIME_HOST_DEVICE constexpr int paged_box_log2(int page_size_log2, int tile_kv) {
  return page_size_log2 < box_log2_cap(tile_kv) ? page_size_log2 : box_log2_cap(tile_kv);
}

// The width of a shared-memory sub-tile row and its swizzle: operands are stored as sub-tiles of rows of
// `row_bytes`, the TMA box width: the widest of 128, 64 and 32 that divides the operand's rows (FP8 D 64 and
// D_qk 192, 16-bit D 96: 64-byte sub-tiles; FP8 D 96 and 16-bit D 80: three and five of 32 bytes, one k step of
// Q.K^T each).
RIME_HOST_DEVICE constexpr int row_bytes(int bytes_per_row) {
  return bytes_per_row % 128 == 0 ? 128 : bytes_per_row % 64 == 0 ? 64 : 32;
}

// Shared memory, byte offsets from the 1024-byte-aligned base (the 128-byte swizzle's atoms are 1024 bytes):
// Q (tile_q rows), kStages K and V tiles, for FP8 kStages V^T tiles (D_v rows of tile_kv keys, + vt_sum_rows
// rows of ones per sub-tile), the mbarriers,
// then for block-scaled O the staging area of the consumers' epilogues when it fits. `total` includes the
// 1024 bytes the kernel uses to align the dynamic base.
struct Smem {
  int q, k, v, vt, barriers, stage, total;
  int k_stage_bytes, v_stage_bytes, vt_stage_bytes, stage_bytes_per_consumer;
  bool staged_epilogue;
};
RIME_HOST_DEVICE constexpr int align1024(int x) { return (x + 1023) / 1024 * 1024; }
RIME_HOST_DEVICE constexpr Smem smem(int elem_bytes, int d_qk, int d_v, int n_consumers, bool fp8, bool block_scaled_o,
                                     int smem_limit, bool q_split = false) {
  Smem s{};
  const int n = tile_kv(elem_bytes, d_qk, n_consumers, q_split);
  s.k_stage_bytes = n * d_qk * elem_bytes;
  s.v_stage_bytes = n * d_v * elem_bytes;
  s.vt_stage_bytes = fp8 ? (d_v + vt_sum_rows(fp8, d_v, n_consumers)) * n : 0;
  s.q = 0;
  s.k = align1024(s.q + tile_q(n_consumers) * d_qk * elem_bytes);
  s.v = align1024(s.k + kStages * s.k_stage_bytes);
  s.vt = align1024(s.v + kStages * s.v_stage_bytes);
  s.barriers = align1024(s.vt + kStages * s.vt_stage_bytes);
  const int end = s.barriers + 16 * 8;  // up to 7 mbarriers per stage used (pipeline.cuh), 16 reserved
  // The staged block-scaled epilogue (common/attention.cuh, BlockStage<64, D_v>): 64 rows of D_v + 4 floats and
  // 64 row records of 24 bytes per consumer.
  s.stage_bytes_per_consumer = 64 * (d_v + 4) * 4 + 64 * 24;
  s.stage = align1024(end);
  // The staged epilogue's threads take 64 columns a pair (D_v 96 writes its blocks from the registers).
  s.staged_epilogue = block_scaled_o && d_v % 64 == 0 &&
                      s.stage + n_consumers * s.stage_bytes_per_consumer + 1024 <= smem_limit;
  s.total = (s.staged_epilogue ? s.stage + n_consumers * s.stage_bytes_per_consumer : end) + 1024;
  return s;
}

// The H100/H200 opt-in shared memory per block, which the kernel's compile-time layout is sized against.
constexpr int kSmemLimit = 227 * 1024;

}  // namespace rime_sm90
