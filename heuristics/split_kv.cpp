#include "heuristics/split_kv.hpp"

#include <algorithm>

namespace rime::heuristics {

int64_t next_pow2(int64_t x) {
  int64_t p = 1;
  while (p < x) p *= 2;
  return p;
}

SplitChoice choose_split_kv(const SplitProblem& p, const SplitCostModel& m) {
  auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  SplitChoice choice;
  const int64_t limit = std::min(next_pow2(p.sm_count), p.kv_tiles / 2);
  for (int64_t s = 1; s == 1 || s <= limit; s *= 2) {
    if (s > 1 && std::find(p.allowed.begin(), p.allowed.end(), static_cast<int>(s)) == p.allowed.end()) continue;
    SplitScore score;
    score.split = static_cast<int>(s);
    score.waves = ceil_div(p.ctas_per_split * s, int64_t{p.sm_count} * std::max(1, p.ctas_per_sm));
    score.cost = static_cast<double>(score.waves) * (static_cast<double>(ceil_div(p.kv_tiles, s)) + m.c_tile);
    if (s > 1) score.cost += static_cast<double>(ceil_div(p.rows, p.sm_count) * s) * m.c_combine;
    choice.candidates.push_back(score);
  }
  double best = 0;
  for (const SplitScore& c : choice.candidates) {
    if (c.split == 1 || c.cost < best) {
      best = c.cost;
      choice.split = c.split;
    }
  }
  if (p.lengths_vary) {
    const int64_t best_walk = ceil_div(p.kv_tiles, choice.split);
    for (const SplitScore& c : choice.candidates) {
      const double walk_saved = static_cast<double>(best_walk - ceil_div(p.kv_tiles, c.split));
      if (c.split > choice.split && c.cost <= best * (1.0 + m.varying_lengths_slack) && walk_saved >= c.cost - best)
        choice.split = c.split;
    }
  }
  return choice;
}

}  // namespace rime::heuristics
