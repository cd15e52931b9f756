#include "heuristics/tile.hpp"

#include <algorithm>
#include <string>

namespace rime::heuristics {

int combine_warps_per_row(int64_t rows, int sm_count) { return rows < int64_t{4} * sm_count ? 16 : 4; }

int ctas_per_sm(int64_t smem_bytes, int threads, int smem_per_sm) {
  const int64_t by_smem = smem_per_sm / (smem_bytes + 1024);
  const int64_t by_regs = 65536 / (int64_t{std::max(threads, 1)} * 256);
  const int64_t by_warps = 64 / std::max<int64_t>(1, threads / 32);
  return static_cast<int>(std::max<int64_t>(1, std::min({by_smem, by_regs, by_warps, int64_t{32}})));
}

TileChoice choose_tile(const TileProblem& p) {
  std::vector<TileOption> fitting;
  for (const TileOption& t : p.options)
    if (t.smem_bytes <= p.smem_per_block) fitting.push_back(t);
  TileChoice c;
  if (fitting.empty()) {
    c.reason = "no allowed tile fits in " + std::to_string(p.smem_per_block) + " bytes of shared memory";
    return c;
  }
  // Among tiles with q rows, the one with the largest KV tile (fewer barriers per key).
  auto find_q = [&](int q) -> std::optional<TileOption> {
    std::optional<TileOption> best;
    for (const TileOption& t : fitting)
      if (t.q == q && (!best || t.kv > best->kv)) best = t;
    return best;
  };
  if (p.packed_rows <= 16 && find_q(16)) {
    // Decode is bandwidth-bound with single-warp CTAs: the 16-row tile whose shared memory lets an SM hold the
    // most CTAs keeps the most loads in flight (16x32 holds 8 FP8 CTAs where 16x64 holds 4).
    TileOption best{};
    int best_ctas = 0;
    for (const TileOption& t : fitting) {
      if (t.q != 16) continue;
      const int n = ctas_per_sm(t.smem_bytes, t.threads, p.smem_per_sm);
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
  c.tile = *std::max_element(fitting.begin(), fitting.end(),
                             [](const TileOption& a, const TileOption& b) { return a.q < b.q; });
  c.reason = "largest fitting tile";
  return c;
}

}  // namespace rime::heuristics
