// The decision (SPEC section 8): which row runs the graph and with which knobs. Kept apart from Facts, the
// problem.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rime/facts.hpp"
#include "rime/rows.hpp"
#include "rime/status.hpp"

namespace rime {

struct SplitCandidate {
  int split = 1;
  int64_t waves = 0;
  double cost = 0;
};

struct Config {
  std::string row_id;
  std::string engine;
  TileShape tile;
  int split_kv = 1;
  int64_t packed_rows = 0;  // S_q * group: the row tile packs the q heads of one kv head
  int64_t q_tiles = 0;      // row tiles per (b, h_kv)
  int64_t kv_tiles = 0;     // KV tiles per row tile, unsplit and unmasked
  std::string tile_reason;
  std::string split_reason;
  std::vector<SplitCandidate> split_candidates;  // empty when split was not considered
  int64_t workspace_bytes = 0;                   // split partials (O, LSE), then sdpa_fp8_sm90's V^T
  int64_t smem_bytes = 0;                        // dynamic shared memory per CTA
};

// Picks the configuration for the first accepted row (match() orders them by preference). NotSupported when no
// row accepts, with every row's reason.
Result<Config> choose(const Facts& facts, const std::vector<RowVerdict>& verdicts);

// Workspace of a split plan: split-major partial O (fp32) and LSE (fp32), each 256-byte aligned.
int64_t split_workspace_bytes(const Facts& facts, int split);

}  // namespace rime
