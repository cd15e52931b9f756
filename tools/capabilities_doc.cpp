// Prints docs/capabilities.md from the embedded capability rows. `cmake --build build --target capabilities-doc`
// rewrites the checked-in file; the test `docs: capabilities.md is current` fails when it is stale.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "rime/inspect/rows.hpp"

int main() {
  using namespace rime;
  fmt::print("# Capability rows\n\n");
  fmt::print("Generated from `rows/*.json` by `cmake --build build --target capabilities-doc`; do not edit.\n");
  fmt::print("A row is data: the matcher compares a graph's facts to each field in this order and reports the "
             "first that fails, with both values (`rime plan --explain`). `starts`: per-sequence starts "
             "(seq_start_q / seq_start_kv) on dense sides; a paged K/V cache's keys are placed by its page table, "
             "and seq_start_kv over one is declined.\n\n");
  fmt::print("| row | arch | ops | Q/K/V | O formats | (D_qk, D_v) | masks | layouts | paged K/V | ragged | "
             "starts | softcap | sink | Stats | Amax_S | Amax_O | split-KV | tiles |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  auto yn = [](bool b) { return b ? "yes" : "no"; };
  for (const CapabilityRow& r : capability_rows()) {
    std::vector<std::string> ops, dtypes, dims, layouts, tiles, splits;
    for (OpKind k : r.ops) ops.emplace_back(to_string(k));
    for (DataType t : r.input_dtypes) dtypes.emplace_back(to_string(t));
    if (r.only_q16_over_fp8_kv) dtypes = {fmt::format("only a FP16/BF16 Q over {}", fmt::join(dtypes, " or "))};
    else if (r.q16_over_fp8_kv) dtypes.emplace_back("FP16/BF16 Q over them");
    for (const auto& d : r.head_dims) dims.push_back(fmt::format("({}, {})", d.first, d.second));
    for (Layout l : r.layouts) layouts.emplace_back(to_string(l));
    for (const RowTile& t : r.tiles) {
      std::string text = fmt::format("{}x{}", t.tile.q, t.tile.kv);
      if (t.consumer_warpgroups)
        text += fmt::format(" ({} consumer warpgroup{})", t.consumer_warpgroups, t.consumer_warpgroups > 1 ? "s" : "");
      if (!t.head_dims.empty()) {
        std::vector<std::string> d;
        for (const auto& [qk, v] : t.head_dims) d.push_back(qk == v ? fmt::format("D {}", qk) : fmt::format("D {}/{}", qk, v));
        text += fmt::format(" for {}", fmt::join(d, ", "));
      }
      tiles.push_back(text);
    }
    for (int s : r.split_counts) splits.push_back(std::to_string(s));
    fmt::print("| `{}` | sm_{}{}..sm_{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
               r.id, r.sm_lo, r.needs_arch_specific ? "a" : "", r.sm_hi, fmt::join(ops, ", "),
               fmt::join(dtypes, ", "), fmt::join(r.o_formats, ", "), fmt::join(dims, ", "),
               fmt::join(r.masks, ", "), fmt::join(layouts, ", "), yn(r.paged_kv), yn(r.ragged), yn(r.seq_start), yn(r.softcap), yn(r.sink), yn(r.stats), yn(r.amax_s),
               yn(r.amax_o), r.split_kv_supported ? fmt::format("{{{}}}", fmt::join(splits, ", ")) : "no",
               tiles.empty() ? "-" : fmt::format("{}", fmt::join(tiles, "; ")));
  }
  fmt::print("\n## Rows\n");
  for (const CapabilityRow& r : capability_rows()) {
    fmt::print("\n### `{}` ({}, engine `{}`, preference {})\n\n{}\n", r.id, r.kind, r.engine, r.preference,
               r.description);
    if (r.min_packed_rows > 0)
      fmt::print("\nServes graphs of fewer than {} packed rows (S_q x group) only for the head dims it lists a "
                 "one-consumer tile for; others decline.\n",
                 r.min_packed_rows);
    if (!r.notes.empty()) fmt::print("\n{}\n", r.notes);
  }
  return 0;
}
