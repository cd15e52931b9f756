// choose(): runs the heuristics for the preferred accepted row. Pinned knobs are honoured or the plan is
// declined; they are never silently changed.
#include <fmt/format.h>

#include <algorithm>

#include "graph/geometry.hpp"
#include "heuristics/split_kv.hpp"
#include "heuristics/tile.hpp"
#include "rime/config.hpp"

namespace rime {

int64_t split_workspace_bytes(const Facts& f, int split) {
  if (split <= 1) return 0;
  const int64_t rows = f.B * f.H_q * f.S_q;
  return round_up(int64_t{split} * rows * f.D_v * 4, 256) + round_up(int64_t{split} * rows * 4, 256);
}

Result<Config> choose(const Facts& f, const std::vector<RowVerdict>& verdicts) {
  const CapabilityRow* row = nullptr;
  for (const RowVerdict& v : verdicts) {
    if (!v.accepted) continue;
    for (const CapabilityRow& r : capability_rows())
      if (r.id == v.row_id) row = &r;
    break;
  }
  if (!row) return not_supported(f, verdicts);

  Config c;
  c.row_id = row->id;
  c.engine = row->engine;
  c.packed_rows = f.S_q * f.group;

  const bool wgmma = row->engine == heuristics::kWgmmaEngine;
  if (wgmma) {
    // One shape (its row lists it); the row's min_packed_rows keeps graphs that would leave it empty away.
    c.tile = row->tiles.at(0);
    c.tile_reason = f.pinned_tile ? "pinned by the graph" : "the wgmma engine's one tile: one warpgroup of 64 rows, 128 keys";
    c.smem_bytes = heuristics::sdpa_wgmma_smem_bytes();
    if (c.smem_bytes > f.device.smem_per_block)
      return Status(StatusCode::NotSupported, fmt::format("row {}: needs {} bytes of shared memory per block, the "
                                                          "device has {}",
                                                          row->id, c.smem_bytes, f.device.smem_per_block));
  } else {
    const int elem_bytes = f.is_fp8 || f.is_mxfp8 ? 1 : 2;
    const bool transpose_v = elem_bytes == 1;
    heuristics::TileProblem tp;
    tp.packed_rows = c.packed_rows;
    tp.batch_heads = f.B * f.H_kv;
    tp.d_qk = f.D_qk;
    tp.d_v = f.D_v;
    tp.elem_bytes = elem_bytes;
    tp.transpose_v = transpose_v;
    tp.mx_scales = f.is_mxfp8;
    tp.sm_count = f.device.sm_count;
    tp.smem_per_block = f.device.smem_per_block;
    tp.smem_per_sm = f.device.smem_per_sm;
    for (const TileShape& t : row->tiles)
      if (!f.pinned_tile || t == *f.pinned_tile) tp.allowed.push_back({t.q, t.kv});
    heuristics::TileChoice tc = heuristics::choose_tile(tp);
    if (!tc.tile)
      return Status(StatusCode::NotSupported,
                    fmt::format("row {}: {}{}", row->id, f.pinned_tile ? "the pinned tile: " : "", tc.reason));
    c.tile = {tc.tile->q, tc.tile->kv};
    c.tile_reason = f.pinned_tile ? "pinned by the graph" : tc.reason;
    c.smem_bytes = heuristics::sdpa_mma_smem_bytes(c.tile.q, c.tile.kv, f.D_qk, f.D_v, elem_bytes, transpose_v,
                                                    f.is_mxfp8);
  }
  c.q_tiles = ceil_div(c.packed_rows, c.tile.q);
  c.kv_tiles = ceil_div(f.S_kv, c.tile.kv);

  // Split-KV: needs the facts to allow it, the row to be wired for these head dims, and the combine row to
  // accept the graph's outputs.
  const std::pair<int64_t, int64_t> dims{f.D_qk, f.D_v};
  std::string no_split;
  if (!f.split_eligible) {
    no_split = f.split_ineligible_reason;
  } else if (!row->split_kv_supported ||
             std::find(row->split_head_dims.begin(), row->split_head_dims.end(), dims) == row->split_head_dims.end()) {
    no_split = fmt::format("row {} is not wired for split at these head dims", row->id);
  } else {
    for (const CapabilityRow& r : capability_rows()) {
      if (r.kind != "combine") continue;
      Facts unpinned = f;
      unpinned.pinned_split.reset();
      RowVerdict cv = match_row(r, unpinned);
      if (!cv.accepted) no_split = cv.reason;
    }
  }

  if (f.pinned_split) {
    if (*f.pinned_split > 1 && !no_split.empty())
      return Status(StatusCode::NotSupported, fmt::format("split_kv {} is pinned but {}", *f.pinned_split, no_split));
    c.split_kv = *f.pinned_split;
    c.split_reason = "pinned by the graph";
  } else if (!no_split.empty()) {
    c.split_reason = "no split: " + no_split;
  } else {
    heuristics::SplitProblem sp;
    sp.ctas_per_split = c.q_tiles * f.B * f.H_kv;
    sp.kv_tiles = c.kv_tiles;
    sp.rows = f.S_q * f.H_q * f.B;
    sp.sm_count = f.device.sm_count;
    sp.allowed = row->split_counts;
    sp.ctas_per_sm = heuristics::ctas_per_sm(c.smem_bytes, c.tile.q * 2, f.device.smem_per_sm);
    heuristics::SplitChoice sc = heuristics::choose_split_kv(sp);
    c.split_kv = sc.split;
    for (const auto& s : sc.candidates) c.split_candidates.push_back({s.split, s.waves, s.cost});
    c.split_reason = "lowest wave/tile cost";
  }
  c.workspace_bytes = split_workspace_bytes(f, c.split_kv);
  if (wgmma) c.workspace_bytes += heuristics::wgmma_vt_bytes(f.B, f.H_kv, f.D_v, f.S_kv);
  return c;
}

}  // namespace rime
