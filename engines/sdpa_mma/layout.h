// The launch shape of the sdpa_mma kernels (rows sdpa_mma_f16, sdpa_mma_fp8, sdpa_mma_mxfp8), read by the
// kernel (kernel.cuh carves its shared memory at these offsets) and by the host (engine.cpp sizes the launch
// with them), so the two cannot drift. No includes beyond host_device.h: NVRTC compiles it.
#pragma once

#include "common/host_device.h"

namespace rime_mma {

// A CTA of kTileQ packed rows is kTileQ / 16 warps, two threads per row.
RIME_HOST_DEVICE constexpr int threads(int tile_q) { return tile_q * 2; }

// Shared-memory rows are padded by 16 bytes so that consecutive rows start on different banks.
constexpr int kPad = 16;
constexpr int kStages = 2;  // K/V double buffering

// FP8 P.V needs V k-major (mma.sync's B operand): a transposed V tile in shared memory, except for FP8 tiles of
// 16 or 32 rows (decode, one or two warps), which build V^T's fragments with ldmatrix.trans, unless the inputs
// are MXFP8.
RIME_HOST_DEVICE constexpr bool vt_in_smem(int tile_q, int elem_bytes, bool mx_inputs) {
  return elem_bytes == 1 && (tile_q > 32 || mx_inputs);
}

// Byte offsets from the dynamic shared-memory base: the Q tile, kStages K tiles, kStages V tiles, the V^T
// tile (FP8), then for MXFP8 inputs the KV tile's scales as fp32 (K: one per key and 32-byte k step; V: one
// per d and 32-key block).
// A 16-bit Q over FP8 K/V (kv_fp8; the kernel computes in FP16, elem_bytes 2): the FP8 tiles land by cp.async in
// kStages raw stages of 8-bit rows (raw_k, raw_v), and each is widened into one FP16 K and one FP16 V tile (k, v:
// a single stage) before the mmas read it; q_scale holds each Q row's factor (a BF16 Q is widened to FP16 by a
// power-of-two row scale). Without kv_fp8 the raw stages are the k and v stages themselves and q_scale is empty.
struct Smem {
  int row_q, row_k, row_v, row_vt;  // pitches in bytes
  int row_raw_k, row_raw_v;
  int q, k, v, vt, scales_k, scales_v, raw_k, raw_v, q_scale;
  int total;
};
RIME_HOST_DEVICE constexpr Smem smem(int tile_q, int tile_kv, int d_qk, int d_v, int elem_bytes, bool mx_inputs,
                                     bool kv_fp8 = false) {
  Smem s{};
  const int kv_stages = kv_fp8 ? 1 : kStages;
  s.row_q = d_qk * elem_bytes + kPad;
  s.row_k = d_qk * elem_bytes + kPad;
  s.row_v = d_v * elem_bytes + kPad;
  s.row_vt = tile_kv + kPad;
  s.row_raw_k = kv_fp8 ? d_qk + kPad : s.row_k;
  s.row_raw_v = kv_fp8 ? d_v + kPad : s.row_v;
  s.q = 0;
  s.k = s.q + tile_q * s.row_q;
  s.v = s.k + kv_stages * tile_kv * s.row_k;
  s.vt = s.v + kv_stages * tile_kv * s.row_v;
  s.scales_k = s.vt + (vt_in_smem(tile_q, elem_bytes, mx_inputs) ? d_v * s.row_vt : 0);
  const int k_steps = d_qk * elem_bytes / 32;
  s.scales_v = s.scales_k + (mx_inputs ? 4 * tile_kv * k_steps : 0);
  const int end = s.scales_v + (mx_inputs ? 4 * d_v * (tile_kv / 32) : 0);
  s.raw_k = kv_fp8 ? end : s.k;
  s.raw_v = kv_fp8 ? s.raw_k + kStages * tile_kv * s.row_raw_k : s.v;
  s.q_scale = kv_fp8 ? s.raw_v + kStages * tile_kv * s.row_raw_v : end;
  s.total = kv_fp8 ? s.q_scale + 4 * tile_q : end;
  return s;
}

}  // namespace rime_mma
