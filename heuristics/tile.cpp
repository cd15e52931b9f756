#include "heuristics/tile.hpp"

#include <algorithm>
#include <string>

namespace rime::heuristics {

int64_t sdpa_mma_smem_bytes(int q_tile, int kv_tile, int64_t d_qk, int64_t d_v, int elem_bytes, bool transpose_v,
                            bool mx_scales) {
  constexpr int kStages = 2;
  constexpr int kPad = 16;
  const int64_t q = q_tile * (d_qk * elem_bytes + kPad);
  const int64_t kv = kStages * kv_tile * ((d_qk * elem_bytes + kPad) + (d_v * elem_bytes + kPad));
  // 16-row FP8 tiles (decode) take V^T fragments from the V tile with ldmatrix.trans instead (not MXFP8 inputs).
  const bool vt_in_smem = transpose_v && (q_tile != 16 || mx_scales);
  const int64_t vt = vt_in_smem ? d_v * (kv_tile * elem_bytes + kPad) : 0;
  const int64_t scales = mx_scales ? 4 * (kv_tile * (d_qk / 32) + d_v * (kv_tile / 32)) : 0;
  return q + kv + vt + scales;
}

int64_t sdpa_wgmma_smem_bytes() { return kWgmmaTileQ * 128 + 4 * kWgmmaTileKv * 128 + 1024; }

int64_t wgmma_vt_keys(int64_t s_kv) { return (s_kv + kWgmmaTileKv - 1) / kWgmmaTileKv * kWgmmaTileKv; }

int64_t wgmma_vt_bytes(int64_t batch, int64_t h_kv, int64_t d_v, int64_t s_kv) {
  return (batch * h_kv * d_v * wgmma_vt_keys(s_kv) + 255) / 256 * 256;
}

int combine_warps_per_row(int64_t rows, int sm_count) { return rows < int64_t{4} * sm_count ? 16 : 4; }

int ctas_per_sm(int64_t smem_bytes, int threads, int smem_per_sm) {
  const int64_t by_smem = smem_per_sm / (smem_bytes + 1024);
  const int64_t by_regs = 65536 / (int64_t{threads} * 256);
  const int64_t by_warps = 64 / std::max<int64_t>(1, threads / 32);
  return static_cast<int>(std::max<int64_t>(1, std::min({by_smem, by_regs, by_warps, int64_t{32}})));
}

TileChoice choose_tile(const TileProblem& p) {
  std::vector<Tile> fitting;
  for (const Tile& t : p.allowed)
    if (sdpa_mma_smem_bytes(t.q, t.kv, p.d_qk, p.d_v, p.elem_bytes, p.transpose_v, p.mx_scales) <= p.smem_per_block)
      fitting.push_back(t);
  TileChoice c;
  if (fitting.empty()) {
    c.reason = "no allowed tile fits in " + std::to_string(p.smem_per_block) + " bytes of shared memory";
    return c;
  }
  // Among tiles with q rows, the one with the largest KV tile (fewer barriers per key).
  auto find_q = [&](int q) -> std::optional<Tile> {
    std::optional<Tile> best;
    for (const Tile& t : fitting)
      if (t.q == q && (!best || t.kv > best->kv)) best = t;
    return best;
  };
  if (p.packed_rows <= 16 && find_q(16)) {
    // Decode is bandwidth-bound with single-warp CTAs: the 16-row tile whose shared memory lets an SM hold the
    // most CTAs keeps the most loads in flight (16x32 holds 8 FP8 CTAs where 16x64 holds 4).
    Tile best{};
    int best_ctas = 0;
    for (const Tile& t : fitting) {
      if (t.q != 16) continue;
      const int n = ctas_per_sm(sdpa_mma_smem_bytes(t.q, t.kv, p.d_qk, p.d_v, p.elem_bytes, p.transpose_v, p.mx_scales), 32,
                                p.smem_per_sm);
      if (n > best_ctas || (n == best_ctas && t.kv > best.kv)) best = t, best_ctas = n;
    }
    c.tile = best;
    c.reason = "packed rows " + std::to_string(p.packed_rows) + " <= 16: one warp per CTA, " +
               std::to_string(best_ctas) + " CTAs per SM";
    return c;
  }
  const int64_t ctas128 = (p.packed_rows + 127) / 128 * p.batch_heads;
  if (find_q(128) && ctas128 >= p.sm_count) {
    c.tile = find_q(128);
    c.reason = std::to_string(ctas128) + " CTAs of 128 rows fill " + std::to_string(p.sm_count) + " SMs";
    return c;
  }
  if (find_q(64)) {
    c.tile = find_q(64);
    c.reason = find_q(128) ? std::to_string(ctas128) + " CTAs of 128 rows would not fill " +
                                 std::to_string(p.sm_count) + " SMs"
                           : "largest fitting tile";
    return c;
  }
  c.tile = *std::max_element(fitting.begin(), fitting.end(), [](Tile a, Tile b) { return a.q < b.q; });
  c.reason = "largest fitting tile";
  return c;
}

}  // namespace rime::heuristics
