// tuning_candidates(): the configurations `rime tune` and the oracle time (include/rime/inspect/config.hpp).
#include <set>
#include <string>
#include <tuple>

#include "rime/inspect/config.hpp"
#include "rime/inspect/facts.hpp"
#include "rime/inspect/rows.hpp"

namespace rime {
namespace {

int64_t attention_ctas(const Config& c) {
  for (const KernelStage& st : c.derived.stages)
    if (st.role == "attention") return st.grid[0] * st.grid[1] * st.grid[2];
  return 0;
}

}  // namespace

std::vector<Config> tuning_candidates(const Facts& f) {
  std::vector<Config> out;
  std::set<std::tuple<std::string, int, int, int, int>> seen;
  Facts unpinned = f;
  unpinned.pinned_split.reset();
  unpinned.pinned_tile.reset();
  for (const RowVerdict& v : match(unpinned)) {
    if (!v.accepted) continue;
    const CapabilityRow* row = nullptr;
    for (const CapabilityRow& r : capability_rows())
      if (r.id == v.row_id) row = &r;
    if (!row || row->kind != "attention") continue;
    for (const RowTile& t : row->tiles_for(f.D_qk, f.D_v)) {
      for (int split = 1; split <= 1024; split *= 2) {
        Facts pinned = unpinned;
        pinned.pinned_tile = t.tile;
        pinned.pinned_split = split;
        Result<Config> c = choose(pinned, match(pinned));
        if (!c.ok()) {
          if (split == 1) break;  // the tile itself is declined
          continue;               // a split the rows do not list
        }
        const Decision& d = c->decision;
        if (seen.insert({d.row_id, d.tile.q, d.tile.kv, d.consumer_warpgroups, d.split_kv}).second)
          out.push_back(c.value());
        if (split >= c->derived.kv_tiles || attention_ctas(c.value()) >= 2 * f.device.sm_count) break;
      }
    }
  }
  return out;
}

}  // namespace rime
