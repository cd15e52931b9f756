#include "heuristics/tile.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>
#include <vector>
#include <string>

namespace rime::heuristics {

int combine_warps_per_row(int64_t rows, int sm_count) { return rows < int64_t{4} * sm_count ? 16 : 4; }

namespace {
// Rows of a row tile of q that cost time when `rows` of them are live: whole granules, or all q without granules.
int64_t live_rows(int64_t rows, int64_t q, int granule) {
  if (granule <= 0) return q;
  return std::min(q, (rows + granule - 1) / granule * granule);
}
}  // namespace

RowTileCost row_tile_cost(int64_t packed_rows, int64_t batch_heads, int sm_count, const RowTileOption& o,
                          int granule) {
  RowTileCost c;
  const int64_t q = std::max(o.q, 1);
  const int64_t tiles = (packed_rows + q - 1) / q;
  c.ctas = tiles * batch_heads;
  const int64_t per_wave = int64_t{std::max(sm_count, 1)} * std::max(o.ctas_per_sm, 1);
  // The work in whole-CTA units: the partial tile counts as its live rows' share.
  const int64_t last = packed_rows - (tiles - 1) * q;
  const double work = static_cast<double>(batch_heads) *
                      (static_cast<double>(tiles - 1) + static_cast<double>(live_rows(last, q, granule)) / q);
  c.waves = static_cast<int64_t>(std::ceil(work / static_cast<double>(per_wave) - 1e-9));
  c.cost = static_cast<double>(c.waves) * static_cast<double>(q) * o.time_per_row;
  return c;
}

double causal_row_tile_cost(const CausalGrid& g, int sm_count, const RowTileOption& o, int kv, int granule) {
  const int64_t q = std::max(o.q, 1), tile_kv = std::max(kv, 1), group = std::max<int64_t>(g.group, 1);
  const int64_t packed_rows = g.S_q * group, n = (packed_rows + q - 1) / q, pad = n * q - packed_rows;
  const int64_t shift = g.bottom_right ? g.S_kv - g.S_q : 0;
  // Keys (whole KV tiles) that rows up to packed row `last` see.
  auto walked = [&](int64_t last) {
    const int64_t keys = std::clamp<int64_t>(last / group + shift + 1, 0, g.S_kv);
    return static_cast<double>((keys + tile_kv - 1) / tile_kv * tile_kv);
  };
  std::vector<double> work(static_cast<size_t>(n));
  double total = 0, heaviest = 0;
  for (int64_t c = 0; c < n; ++c) {
    const int64_t first_row = c * q - pad;  // packed; the first tile's rows from -pad exist nowhere
    double w = 0;
    if (granule <= 0) {
      w = static_cast<double>(q) * walked(first_row + q - 1);
    } else {
      for (int64_t lo = first_row; lo < first_row + q; lo += granule)
        if (lo + granule > 0) w += static_cast<double>(granule) * walked(lo + granule - 1);
    }
    work[static_cast<size_t>(c)] = w;
    total += w;
    heaviest = std::max(heaviest, w);
  }
  const int64_t slots = int64_t{std::max(sm_count, 1)} * std::max(o.ctas_per_sm, 1);
  const int64_t ctas = n * std::max<int64_t>(g.batch_heads, 1);
  if (ctas > 8 * slots)
    return std::max(heaviest, total * static_cast<double>(g.batch_heads) / static_cast<double>(slots)) *
           o.time_per_row;
  // A grid of a few waves: list scheduling of the CTAs, heaviest first, onto the CTA slots (the bound above ignores
  // the last wave's quantization, which decides grids of one or two waves).
  std::vector<double> order;
  order.reserve(static_cast<size_t>(ctas));
  for (int64_t b = 0; b < std::max<int64_t>(g.batch_heads, 1); ++b) order.insert(order.end(), work.begin(), work.end());
  std::sort(order.begin(), order.end(), std::greater<double>());
  std::priority_queue<double, std::vector<double>, std::greater<double>> free_at;
  for (int64_t i = 0; i < std::min(slots, ctas); ++i) free_at.push(0.0);
  double makespan = 0;
  for (double w : order) {
    const double end = free_at.top() + w;
    free_at.pop();
    free_at.push(end);
    makespan = std::max(makespan, end);
  }
  return makespan * o.time_per_row;
}

int ctas_per_sm(int64_t smem_bytes, int threads, int smem_per_sm) {
  const int64_t by_smem = smem_per_sm / (smem_bytes + 1024);
  // Registers at the 255 a thread may hold bind before the SM's 64 warps ever do (65536 / (256 t) < 64 / (t / 32)
  // for every t of at least a warp), and the 32-CTA limit before both for small CTAs.
  const int64_t by_regs = 65536 / (int64_t{std::max(threads, 1)} * 256);
  return static_cast<int>(std::max<int64_t>(1, std::min({by_smem, by_regs, int64_t{32}})));
}

TileOptionChoice choose_tile(const TileProblem& p) {
  std::vector<TileOption> fitting;
  for (const TileOption& t : p.options)
    if (t.smem_bytes <= p.smem_per_block) fitting.push_back(t);
  TileOptionChoice c;
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
  // Decode is bandwidth-bound with CTAs of one or two warps: the tile of 16 (or 32) rows whose shared memory
  // lets an SM hold the most CTAs keeps the most loads in flight (16x32 holds 8 FP8 CTAs where 16x64 holds 4).
  // 17-32 packed rows (8 query tokens of a GQA group of 4) take the 32-row tile: one K/V tile for both warps, where
  // two 16-row CTAs read it twice and a 64- or 128-row tile idles half its warps or more (measured on the H200:
  // 16x32 1.28 ms, 64x64 1.75 ms, 128x64 3.65 ms for the B 64 paged decode of 8 tokens; docs/perf-history.md,
  // "Session 8: multi-token decode and the dense decode").
  for (const int rows : {16, 32}) {
    if (p.packed_rows > rows || !find_q(rows)) continue;
    TileOption best{};
    int best_ctas = 0;
    for (const TileOption& t : fitting) {
      if (t.q != rows) continue;
      const int n = ctas_per_sm(t.smem_bytes, t.threads, p.smem_per_sm);
      if (n > best_ctas || (n == best_ctas && t.kv > best.kv)) best = t, best_ctas = n;
    }
    c.tile = best;
    c.reason = "packed rows " + std::to_string(p.packed_rows) + " <= " + std::to_string(rows) + ": " +
               (rows == 16 ? "one warp" : "two warps") + " per CTA, " + std::to_string(best_ctas) + " CTAs per SM";
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
