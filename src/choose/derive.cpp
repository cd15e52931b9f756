// derive(): everything a decision implies, through the chosen row's engine. choose(), Plan::build and
// Plan::load all call it, so that a plan artifact's recorded decision is checked by the same code that made it.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "choose/split.hpp"
#include "engine.hpp"
#include "rime/inspect/config.hpp"

namespace rime {

const WorkspaceRegion* Derived::region(const std::string& name) const {
  for (const WorkspaceRegion& r : workspace)
    if (r.name == name) return &r;
  return nullptr;
}

std::string split_unavailable(const Facts& f, const CapabilityRow& row) {
  if (!f.split_eligible) return f.split_ineligible_reason;
  if (!row.writes_split_partials(f.D_qk, f.D_v))
    return fmt::format("row {} is not wired for split at these head dims", row.id);
  Facts unpinned = f;
  unpinned.pinned_split.reset();
  for (const CapabilityRow& r : capability_rows()) {
    if (r.kind != "combine") continue;
    RowVerdict v = match_row(r, unpinned);
    if (!v.accepted) return v.reason;
  }
  return {};
}

Result<Derived> derive(const Facts& f, const Decision& d) {
  const CapabilityRow* row = nullptr;
  for (const CapabilityRow& r : capability_rows())
    if (r.id == d.row_id && r.kind == "attention") row = &r;
  if (!row) return Status(StatusCode::NotSupported, fmt::format("no attention row '{}'", d.row_id));
  const RowVerdict v = match_row(*row, f);
  if (!v.accepted) return Status(StatusCode::NotSupported, v.reason);
  auto fail = [&](const std::string& what) {
    return Status(StatusCode::NotSupported, fmt::format("row {}: {}", row->id, what));
  };
  auto tile_str = [](TileShape t, int consumers) {
    return consumers ? fmt::format("{}x{} on {} consumer warpgroups", t.q, t.kv, consumers)
                     : fmt::format("{}x{}", t.q, t.kv);
  };
  if (f.pinned_tile && d.tile != *f.pinned_tile)
    return fail(
        fmt::format("tile {} differs from the pinned tile {}", tile_str(d.tile, 0), tile_str(*f.pinned_tile, 0)));
  const std::vector<RowTile> listed = row->tiles_for(f.D_qk, f.D_v);
  if (std::none_of(listed.begin(), listed.end(), [&](const RowTile& t) {
        return t.tile == d.tile && t.consumer_warpgroups == d.consumer_warpgroups;
      })) {
    std::vector<std::string> tiles;
    for (const RowTile& t : listed) tiles.push_back(tile_str(t.tile, t.consumer_warpgroups));
    return fail(fmt::format("tile {} not in {{{}}} for head dims ({}, {})", tile_str(d.tile, d.consumer_warpgroups),
                            fmt::join(tiles, ", "), f.D_qk, f.D_v));
  }
  if (f.pinned_split && d.split_kv != *f.pinned_split)
    return fail(fmt::format("split_kv {} differs from the pinned split_kv {}", d.split_kv, *f.pinned_split));
  if (d.split_kv < 1) return fail(fmt::format("split_kv {} is not a split count", d.split_kv));
  if (d.split_kv > 1) {
    if (std::find(row->split_counts.begin(), row->split_counts.end(), d.split_kv) == row->split_counts.end())
      return fail(fmt::format("split_kv {} not in {{{}}}", d.split_kv, fmt::join(row->split_counts, ", ")));
    const std::string no_split = split_unavailable(f, *row);
    if (!no_split.empty()) return fail(fmt::format("split_kv {}: {}", d.split_kv, no_split));
  }
  if (f.context_parallel.world > 0) {  // the ranks' partials are merged by the split-KV combine
    const std::string no_split = split_unavailable(f, *row);
    if (!no_split.empty()) return fail("context parallelism merges split partials: " + no_split);
  }
  const engines::Engine* engine = engines::find_engine(row->engine);
  if (!engine)
    return Status(StatusCode::Internal, fmt::format("row {} names engine {}, which is not registered", row->id,
                                                    row->engine));
  Result<Derived> out = engine->derive(f, *row, d);
  if (!out.ok()) return out;
  if (out->stages.size() > static_cast<size_t>(engines::kMaxStages))
    return Status(StatusCode::Internal, fmt::format("engine {} derived {} stages; plans hold at most {}", row->engine,
                                                    out->stages.size(), engines::kMaxStages));
  for (const KernelStage& s : out->stages) {
    if (s.smem_bytes > f.device.smem_per_block)
      return fail(fmt::format("the {} kernel needs {} bytes of shared memory per block, the device has {}", s.role,
                              s.smem_bytes, f.device.smem_per_block));
    if (s.block < 1 || s.block > 1024)
      return Status(StatusCode::Internal, fmt::format("engine {}: {} threads per block", row->engine, s.block));
  }
  return out;
}

}  // namespace rime
