// Tile choice from numbers: the engine lists its candidate tiles with the shared memory and threads each one
// needs (its layout header computes them), the device gives its limits. Pure: no I/O, no device queries, no
// engine headers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rime::heuristics {

struct TileOption {
  int q = 0, kv = 0;       // packed rows per CTA, keys per main-loop step
  int64_t smem_bytes = 0;  // dynamic shared memory of one CTA with this tile
  int threads = 0;         // threads of one CTA
};

struct TileProblem {
  int64_t packed_rows = 0;  // S_q * group: GQA packs the q heads of one kv head into the row tile
  int64_t batch_heads = 0;  // B * H_kv
  int sm_count = 0;
  int smem_per_block = 0;
  int smem_per_sm = 228 * 1024;
  std::vector<TileOption> options;
};

struct TileOptionChoice {
  std::optional<TileOption> tile;  // nullopt: no option fits in shared memory
  std::string reason;
};

// 16 rows (one warp) when the packed rows fit in 16 (decode), with the KV tile that fits the most CTAs per SM;
// else 128 rows when 128-row tiles still give at least one full wave of CTAs, else 64. Only options that fit
// smem_per_block are considered.
TileOptionChoice choose_tile(const TileProblem& problem);

// One row-tile option of a kernel whose CTAs all run the same key range (no causal or window mask): q packed rows
// per CTA, `ctas_per_sm` CTAs per SM at once, and the time a CTA takes per row relative to the other options
// (measured).
struct RowTileOption {
  int q = 0;
  int ctas_per_sm = 1;
  double time_per_row = 1.0;
};
struct RowTileCost {
  int64_t ctas = 0, waves = 0;
  double cost = 0;  // waves x q x time_per_row: the grid's time in units of one row of the reference option
};
// The grid of ceil(packed_rows / q) x batch_heads CTAs in waves of sm_count x ctas_per_sm, a partial last wave
// as long as a full one. With `granule` > 0, a row tile's rows past packed_rows cost nothing in whole granules (the
// Hopper engine's consumer warpgroups of 64 rows whose rows all lie past the end skip the tile): a partial row tile
// counts as the fraction of the CTA its live granules are, so that the waves are those of the grid's real work.
RowTileCost row_tile_cost(int64_t packed_rows, int64_t batch_heads, int sm_count, const RowTileOption& option,
                          int granule = 0);

// A causal grid (top-left or bottom-right diagonal, no window, the same lengths in every batch) of row tiles of q
// packed rows, the partial one first (the Hopper engine's order: engines/sdpa_sm90/tile_scheduler.cuh,
// grid_work_of), each running KV tiles of kv keys up to its last row's diagonal. group q heads share a kv head (GQA
// packs them into rows).
struct CausalGrid {
  int64_t S_q = 0, S_kv = 0, group = 1, batch_heads = 1;
  bool bottom_right = false;
};
// The grid's time in units of one (row, key) pair of the reference option: the larger of its heaviest CTA and its
// whole work spread over sm_count x ctas_per_sm CTA slots (the launch order takes the heaviest row tiles first, so
// list scheduling ends near that bound: tools/bench/causal_order_sim.py); a grid of at most eight waves is list-
// scheduled instead, heaviest CTA first, since its last wave's quantization decides it. With `granule` > 0, a CTA's
// rows run in granules that each walk the keys up to their own last row's diagonal, and granules wholly before the
// first packed row cost nothing (the Hopper engine's three consumer warpgroups: ghost turns, consumer.cuh).
double causal_row_tile_cost(const CausalGrid& g, int sm_count, const RowTileOption& option, int kv, int granule = 0);

// CTAs of `threads` threads using `smem_bytes` that one SM holds at once: the tighter of shared memory (1 KB
// of each CTA's share is reserved by the hardware), registers (assuming the 255-register worst case of these
// kernels until the compiler's figure is fed back) and the 64-warp limit.
int ctas_per_sm(int64_t smem_bytes, int threads, int smem_per_sm);

// Warps per CTA of the split-KV combine (one CTA per output row): 16 when the rows are fewer than 4 per SM (decode
// with few heads: each row's splits are spread over more warps to keep loads in flight), else 4.
int combine_warps_per_row(int64_t rows, int sm_count);

}  // namespace rime::heuristics
