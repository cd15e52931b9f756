// Split-KV count: the upstream wave/tile cost model (SPEC section 8). Pure: no I/O, no device queries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rime::heuristics {

// Costs are in units of one KV-tile iteration of one CTA.
struct SplitCostModel {
  // Fixed cost of a CTA (Q load, prologue, epilogue), in KV tiles. Provisional: the upstream value's order of
  // magnitude, to be re-measured on our kernels (docs/perf-history.md, "Split-KV heuristic quality").
  double c_tile = 2.0;
  // Cost of the combine per split per row-wave, in KV tiles. Provisional. The upstream worked example (148 SMs,
  // B=1, H=4, S_q=128, S_kv=2048, tiles of 128) picks split 8 for any c_combine < 0.125.
  double c_combine = 0.0625;
  // With per-sequence lengths: how much more than the minimum cost (at full lengths) a larger split may cost and
  // still be chosen. Provisional, measured on the paged decode rows (docs/perf-history.md, "Paged decode").
  double varying_lengths_slack = 0.15;
};

struct SplitProblem {
  int64_t ctas_per_split = 0;  // CTAs of the unsplit launch (q tiles x heads x batch)
  int64_t kv_tiles = 0;        // KV tiles one CTA walks unsplit
  int64_t rows = 0;            // S_q * H_q * B: rows the combine folds
  int sm_count = 0;
  std::vector<int> allowed;  // split counts the row is wired for (1 is always allowed)
  // CTAs one SM runs at once. The upstream model assumes 1; our decode CTAs are one warp and several share an
  // SM, so a wave holds sm_count * ctas_per_sm CTAs.
  int ctas_per_sm = 1;
  // Per-sequence lengths (padding, paged K/V): the kernels then cut every sequence's keys into chunks of the
  // same size (kv_tiles / s of the longest possible sequence, docs/serving.md), so a short sequence's trailing
  // CTAs exit at once and a long one gets up to s CTAs. The cost model only sees full lengths; the lengths the
  // plan will meet are device data it cannot see. A larger split costs little at full lengths (more, shorter
  // CTAs in more waves) and bounds the tail of an uneven batch (the longest sequence's CTAs each walk
  // kv_tiles / s tiles), so with varying lengths the largest split within the slack of the minimum wins, where that
  // bound pays for the split: the tiles it takes off a full-length sequence's walk are at least what it costs at full
  // lengths. A grid that fills the GPU without a split on short K/V gains too little tail to pay its combine:
  // B64 H32/8 over a 1024-key capacity (16 tiles) ran 0.0579 ms unsplit against 0.0676 split 2 (H100), where the
  // cost model puts split 2 at 1.14x, inside the slack, for a walk 8 tiles shorter.
  bool lengths_vary = false;
};

struct SplitScore {
  int split = 1;
  int64_t waves = 0;
  double cost = 0;
};

struct SplitChoice {
  int split = 1;
  std::vector<SplitScore> candidates;  // every candidate scored, in increasing split
};

int64_t next_pow2(int64_t x);

// Candidates s = 1, 2, 4, ... up to min(next_pow2(SMs), kv_tiles / 2) (and in `allowed`);
// waves(s) = ceil(ctas * s / (SMs * ctas_per_sm)); cost(s) = waves(s) * (ceil(kv_tiles / s) + c_tile)
//   + ceil(rows / SMs) * s * c_combine. The minimum wins; ties go to the smaller s. With lengths_vary, the
//   largest s whose cost is within (1 + varying_lengths_slack) of the minimum and at most the minimum plus the
//   tiles it saves the longest walk (ceil(kv_tiles / s_min) - ceil(kv_tiles / s)) wins.
SplitChoice choose_split_kv(const SplitProblem& problem, const SplitCostModel& model = {});

}  // namespace rime::heuristics
