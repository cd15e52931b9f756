#include "heuristics/tile.hpp"

#include <algorithm>
#include <string>

namespace rime::heuristics {

int64_t sdpa_mma_smem_bytes(int q_tile, int kv_tile, int64_t d_qk, int64_t d_v, int elem_bytes, bool transpose_v) {
  constexpr int kStages = 2;
  constexpr int kPad = 16;
  const int64_t q = q_tile * (d_qk * elem_bytes + kPad);
  const int64_t kv = kStages * kv_tile * ((d_qk * elem_bytes + kPad) + (d_v * elem_bytes + kPad));
  const int64_t vt = transpose_v ? d_v * (kv_tile * elem_bytes + kPad) : 0;
  return q + kv + vt;
}

TileChoice choose_tile(const TileProblem& p) {
  std::vector<Tile> fitting;
  for (const Tile& t : p.allowed)
    if (sdpa_mma_smem_bytes(t.q, t.kv, p.d_qk, p.d_v, p.elem_bytes, p.transpose_v) <= p.smem_per_block)
      fitting.push_back(t);
  TileChoice c;
  if (fitting.empty()) {
    c.reason = "no allowed tile fits in " + std::to_string(p.smem_per_block) + " bytes of shared memory";
    return c;
  }
  auto find_q = [&](int q) -> std::optional<Tile> {
    for (const Tile& t : fitting)
      if (t.q == q) return t;
    return std::nullopt;
  };
  if (p.packed_rows <= 16 && find_q(16)) {
    c.tile = find_q(16);
    c.reason = "packed rows " + std::to_string(p.packed_rows) + " <= 16: one warp per CTA";
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
