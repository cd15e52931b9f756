// choose(): the accepted rows in preference order; for each, its engine picks the tile and the split-KV
// heuristic the split, and derive() checks the result against the engine's launch limits. Pinned knobs are
// honoured or the row is passed over; they are never silently changed.
#include <fmt/format.h>

#include <algorithm>

#include "choose/split.hpp"
#include "engine.hpp"
#include "heuristics/split_kv.hpp"
#include "heuristics/tile.hpp"
#include "rime/inspect/config.hpp"

namespace rime {
namespace {

const CapabilityRow* find_row(const std::string& id) {
  for (const CapabilityRow& r : capability_rows())
    if (r.id == id) return &r;
  return nullptr;
}

// The decision for one accepted row, or why its heuristics found none.
Result<Config> choose_for_row(const Facts& f, const CapabilityRow& row) {
  const engines::Engine* engine = engines::find_engine(row.engine);
  if (!engine)
    return Status(StatusCode::Internal, fmt::format("row {} names engine {}, which is not registered", row.id, row.engine));
  Result<engines::TileChoice> tile = engine->choose_tile(f, row);
  if (!tile.ok()) return tile.status();
  Decision d;
  d.row_id = row.id;
  d.tile = tile->tile.tile;
  d.consumer_warpgroups = tile->tile.consumer_warpgroups;
  d.tile_reason = tile->reason;

  const std::string no_split = split_unavailable(f, row);
  if (f.pinned_split) {
    d.split_kv = *f.pinned_split;
    d.split_reason = "pinned by the graph";
  } else if (!no_split.empty()) {
    d.split_reason = "no split: " + no_split;
  } else {
    // Candidates are the row's split counts whose plan stays inside the engine's launch limits.
    const engines::TileGeometry g = engine->geometry(f, tile->tile);
    heuristics::SplitProblem sp;
    sp.ctas_per_split = g.q_tiles * f.B * f.H_kv;
    sp.kv_tiles = g.kv_tiles;
    sp.rows = f.S_q * f.H_q * f.B;
    sp.sm_count = f.device.sm_count;
    for (int s : row.split_counts) {
      Decision trial = d;
      trial.split_kv = s;
      if (s <= 1 || engine->derive(f, row, trial).ok()) sp.allowed.push_back(s);
    }
    sp.ctas_per_sm = g.split_ctas_per_sm > 0 ? g.split_ctas_per_sm
                     : g.ctas_per_sm > 0     ? g.ctas_per_sm
                                             : heuristics::ctas_per_sm(g.smem_bytes, static_cast<int>(g.threads),
                                                                       f.device.smem_per_sm);
    sp.lengths_vary = f.mask.padding;
    const heuristics::SplitChoice sc = heuristics::choose_split_kv(sp);
    d.split_kv = sc.split;
    for (const auto& s : sc.candidates) d.split_candidates.push_back({s.split, s.waves, s.cost});
    d.split_reason = sp.lengths_vary
                         ? fmt::format("per-sequence lengths: the largest split within {:.0f}% of the lowest wave/tile cost "
                                       "that saves a full-length sequence's walk at least what it costs",
                                       100 * heuristics::SplitCostModel{}.varying_lengths_slack)
                         : "lowest wave/tile cost";
  }
  Result<Derived> derived = derive(f, d);
  if (!derived.ok()) return derived.status();
  return Config{d, derived.value()};
}

}  // namespace

Result<Config> choose(const Facts& f, const std::vector<RowVerdict>& verdicts) {
  std::vector<std::string> passed_over;  // accepted rows whose heuristics found no decision
  for (const RowVerdict& v : verdicts) {
    if (!v.accepted) continue;
    const CapabilityRow* row = find_row(v.row_id);
    if (!row) return Status(StatusCode::Internal, fmt::format("verdict for unknown row {}", v.row_id));
    Result<Config> c = choose_for_row(f, *row);
    if (c.ok()) return c;
    if (c.status().code() != StatusCode::NotSupported) return c.status();
    passed_over.push_back(c.status().message());
  }
  return not_supported(f, verdicts, passed_over);
}

}  // namespace rime
