// Tile choice for the mma.sync engines. Pure: no I/O, no device queries.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/params.h"

namespace rime::heuristics {

struct Tile {
  int q = 0, kv = 0;
};

// Shared memory of one CTA of the sdpa_f16_sm80 / sdpa_fp8_sm89 kernels (engines/sdpa_mma/kernel.cuh owns the
// layout; its launcher calls this same function): a Q tile, two K/V stages, each row padded by 16 bytes to
// spread rows over the banks, for FP8 one transposed V tile (mma.sync's B operand wants V k-major; not for the
// 16-row tiles, which build V^T fragments in registers, unless MXFP8 inputs), and for
// MXFP8 inputs the KV tile's scales as fp32 (K: one per key and 32 d; V: one per d and 32 keys).
int64_t sdpa_mma_smem_bytes(int q_tile, int kv_tile, int64_t d_qk, int64_t d_v, int elem_bytes, bool transpose_v,
                            bool mx_scales = false);

// The sdpa_fp8_sm90 (wgmma) engine: one shape (engines/common/params.h), 64 packed rows by 128 keys, D 128.
constexpr char kWgmmaEngine[] = "sdpa_fp8_sm90";  // the engine name its row, choose and the plan share
constexpr int kWgmmaThreads = RIME_WGMMA_THREADS;
constexpr int kWgmmaTileQ = RIME_WGMMA_TILE_Q;
constexpr int kWgmmaTileKv = RIME_WGMMA_TILE_KV;
// Its shared memory (engines/sdpa_wgmma/kernel.cuh): a Q tile of 64 rows and two stages of K and of V^T of 128
// rows each, all rows 128 bytes, plus 1024 bytes of slack to align the base to the swizzle's 1024-byte atoms.
int64_t sdpa_wgmma_smem_bytes();
// The keys of one V^T row in its workspace copy: S_kv rounded up to whole KV tiles.
int64_t wgmma_vt_keys(int64_t s_kv);
// The workspace of V^T: B x H_kv x D_v rows of wgmma_vt_keys bytes, rounded up to 256 bytes.
int64_t wgmma_vt_bytes(int64_t batch, int64_t h_kv, int64_t d_v, int64_t s_kv);

// Warps per CTA of the split-KV combine (one CTA per output row): 16 when the rows are fewer than 4 per SM (decode
// with few heads: each row's splits are spread over more warps to keep loads in flight), else 4.
int combine_warps_per_row(int64_t rows, int sm_count);

// CTAs of `threads` threads using `smem_bytes` that one SM holds at once: the tighter of shared memory (1 KB
// of each CTA's share is reserved by the hardware), registers (assuming the 255-register worst case of these
// kernels until the compiler's figure is fed back) and the 64-warp limit.
int ctas_per_sm(int64_t smem_bytes, int threads, int smem_per_sm);

struct TileProblem {
  int64_t packed_rows = 0;  // S_q * group: GQA packs the q heads of one kv head into the row tile
  int64_t batch_heads = 0;  // B * H_kv
  int64_t d_qk = 0, d_v = 0;
  int elem_bytes = 2;
  bool transpose_v = false;
  int sm_count = 0;
  int smem_per_block = 0;
  int smem_per_sm = 228 * 1024;
  std::vector<Tile> allowed;
  bool mx_scales = false;  // MXFP8 inputs: the KV tile's scales take shared memory too
};

struct TileChoice {
  std::optional<Tile> tile;  // nullopt: no allowed tile fits in shared memory
  std::string reason;
};

// 16 rows (one warp) when the packed rows fit in 16 (decode), with the KV tile that fits the most CTAs per SM;
// else 128 rows when 128-row tiles still give at
// least one full wave of CTAs, else 64. Only tiles that fit smem_per_block are considered.
TileChoice choose_tile(const TileProblem& problem);

}  // namespace rime::heuristics
