// The one matcher: Facts against each row, field by field, first failure wins and names both values.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "rime/inspect/rows.hpp"

namespace rime {
namespace {

template <class T>
bool contains(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string set_of(const std::vector<std::string>& v) { return fmt::format("{{{}}}", fmt::join(v, ", ")); }

template <class T, class F>
std::string set_of(const std::vector<T>& v, F&& str) {
  std::vector<std::string> s;
  for (const T& x : v) s.push_back(str(x));
  return set_of(s);
}

std::string pair_str(const std::pair<int64_t, int64_t>& p) { return fmt::format("({}, {})", p.first, p.second); }
std::string tile_str(const TileShape& t) { return fmt::format("{}x{}", t.q, t.kv); }

// The mask features a graph uses, in the row vocabulary.
std::vector<std::string> mask_features(const MaskFacts& m) {
  std::vector<std::string> f;
  if (m.causal) f.push_back("causal");
  if (m.bottom_right && (m.causal || m.window_left || m.band_right)) f.push_back("bottom_right");
  if (m.window_left) f.push_back("window");
  if (m.band_right) f.push_back("band");
  if (m.padding) f.push_back("padding");
  return f;
}

struct Decline {
  std::string field, text;
};

std::optional<Decline> first_decline(const CapabilityRow& row, const Facts& f) {
  const int arch = f.device.arch;
  if (arch < row.sm_lo || arch > row.sm_hi)
    return Decline{"arch", fmt::format("arch {} not in [sm_{}, sm_{}]", f.device.arch_name(), row.sm_lo, row.sm_hi)};
  if (row.needs_arch_specific && !f.device.arch_specific)
    return Decline{"arch", fmt::format("arch {} is not sm_{}a (the arch-specific target its instructions need)",
                                       f.device.arch_name(), arch)};
  if (!contains(row.ops, f.op))
    return Decline{"op", fmt::format("op {} not in {}", to_string(f.op),
                                     set_of(row.ops, [](OpKind k) { return std::string(to_string(k)); }))};
  // A 16-bit Q over FP8 K/V (sdpa_fp8 reading an FP8 cache): the rows that widen K/V to Q's precision.
  if (f.q16_over_fp8_kv() && !row.q16_over_fp8_kv)
    return Decline{"q16_over_fp8_kv", fmt::format("Q dtype {} over K/V dtype {} (a 16-bit Q over an FP8 K/V cache) "
                                                  "not supported",
                                                  to_string(f.q().dtype), to_string(f.k().dtype))};
  if (row.only_q16_over_fp8_kv && !f.q16_over_fp8_kv())
    return Decline{"q16_over_fp8_kv", fmt::format("Q dtype {} over K/V dtype {}: the row serves only a 16-bit Q over "
                                                  "an FP8 K/V cache",
                                                  to_string(f.q().dtype), to_string(f.k().dtype))};
  if (row.kind == "attention" && f.q_quantization != row.q_quantization)  // a combine takes O's partials alone
    return Decline{"q_quantization",
                   row.q_quantization == QQuantization::None
                       ? fmt::format("q_quantization {} not supported (the row takes Q exactly)",
                                     to_string(f.q_quantization))
                       : fmt::format("q_quantization none: the row serves only q_quantization {}",
                                     to_string(row.q_quantization))};
  const DataType inputs = f.q16_over_fp8_kv() ? f.k().dtype : f.q().dtype;
  if (!contains(row.input_dtypes, inputs))
    return Decline{"input_dtypes",
                   fmt::format("{} dtype {} not in {}", f.q16_over_fp8_kv() ? "K/V" : "Q/K/V", to_string(inputs),
                               set_of(row.input_dtypes, [](DataType t) { return std::string(to_string(t)); }))};
  if (f.o().dtype == DataType::FP4_E2M1 && f.o_block_scale == 0)
    return Decline{"o_formats", "an FP4_E2M1 O is served only as a block-scaled O with sf_o"};
  if (!contains(row.o_formats, f.o_format()))
    return Decline{"o_formats", fmt::format("O format {} not in {}", f.o_format(), set_of(row.o_formats))};
  const std::pair<int64_t, int64_t> dims{f.D_qk, f.D_v};
  if (!contains(row.head_dims, dims)) {
    std::vector<std::string> qk;
    for (const auto& p : row.head_dims)
      if (!contains(qk, std::to_string(p.first))) qk.push_back(std::to_string(p.first));
    bool qk_known = contains(qk, std::to_string(f.D_qk));
    return Decline{"head_dims", qk_known ? fmt::format("(D_qk, D_v) {} not in {}", pair_str(dims),
                                                       set_of(row.head_dims, pair_str))
                                         : fmt::format("D_qk {} not in {}", f.D_qk, set_of(qk))};
  }
  for (const std::string& m : mask_features(f.mask))
    if (!contains(row.masks, m)) return Decline{"masks", fmt::format("mask {} not in {}", m, set_of(row.masks))};
  if ((f.ragged_q || f.ragged_kv) && !row.ragged)
    return Decline{"ragged", fmt::format("ragged (THD) {} through cu_seqlens not supported",
                                         f.ragged_q && f.ragged_kv ? "Q and K/V" : f.ragged_q ? "Q" : "K/V")};
  if (f.logit_softcap > 0 && !row.softcap)
    return Decline{"softcap", fmt::format("logit soft-capping (logit_softcap {}) not supported", f.logit_softcap)};
  if ((f.seq_start_q || f.seq_start_kv) && !row.seq_start)
    return Decline{"seq_start", fmt::format("per-sequence starts ({}) not supported",
                                            f.seq_start_q && f.seq_start_kv ? "seq_start_q and seq_start_kv"
                                            : f.seq_start_q                 ? "seq_start_q"
                                                                            : "seq_start_kv")};
  if (f.seq_start_kv && f.paged)
    return Decline{"seq_start", "seq_start_kv over a paged K/V cache not supported (its page table places each "
                                "sequence's keys)"};
  const std::pair<const char*, const TensorFacts*> tensors[] = {{"Q", &f.q()}, {"K", &f.k()}, {"V", &f.v()}, {"O", &f.o()}};
  for (const auto& [name, t] : tensors) {
    if (!contains(row.layouts, t->layout))
      return Decline{"layouts", fmt::format("{} layout {} not in {}", name, to_string(t->layout),
                                            set_of(row.layouts, [](Layout l) { return std::string(to_string(l)); }))};
    if (row.needs_aligned16 && !t->aligned16)
      return Decline{"needs_aligned16", fmt::format("{} strides are not multiples of 16 bytes", name)};
  }
  if (f.S_q * f.group < row.min_packed_rows) {
    const std::vector<RowTile> tiles = row.tiles_for(f.D_qk, f.D_v);
    const bool one_consumer = std::any_of(tiles.begin(), tiles.end(), [](const RowTile& t) {
      return t.consumer_warpgroups == 1;
    });
    if (!one_consumer)
      return Decline{"min_packed_rows",
                     fmt::format("packed rows S_q x group = {} x {} = {} < {}, and no one-consumer tile for head dims "
                                 "({}, {}): its row tiles would run mostly empty",
                                 f.S_q, f.group, f.S_q * f.group, row.min_packed_rows, f.D_qk, f.D_v)};
  }
  if (f.paged && !row.paged_kv)
    return Decline{"paged_kv", fmt::format("paged K/V (page_table, page size {}) not supported", f.page_size)};
  if (f.has_sink && !row.sink) return Decline{"sink", "sink not supported"};
  if (f.wants_stats && !row.stats) return Decline{"stats", "Stats output not supported"};
  if (f.wants_amax_s && !row.amax_s) return Decline{"amax_s", "Amax_S output not supported"};
  if (f.wants_amax_o && !row.amax_o) return Decline{"amax_o", "Amax_O output not supported"};
  if (f.pinned_split && *f.pinned_split > 1) {
    const int s = *f.pinned_split;
    if (!f.split_eligible)
      return Decline{"split_kv", fmt::format("split_kv {} is pinned but split is ineligible: {}", s,
                                             f.split_ineligible_reason)};
    if (!row.split_kv_supported)
      return Decline{"split_kv", fmt::format("split_kv {} is pinned and the row is not wired for split", s)};
    if (!contains(row.split_head_dims, dims))
      return Decline{"split_kv", fmt::format("split_kv {} is pinned and split is wired for head dims {}, not {}", s,
                                             set_of(row.split_head_dims, pair_str), pair_str(dims))};
  }
  if (f.context_parallel.world > 0 && row.kind == "attention") {
    if (!f.split_eligible)
      return Decline{"context_parallel", "context parallelism merges split partials, and split is ineligible: " +
                                             f.split_ineligible_reason};
    if (!row.writes_split_partials(f.D_qk, f.D_v))
      return Decline{"context_parallel", fmt::format("context parallelism merges split partials, and the row does "
                                                     "not write them for head dims {}",
                                                     pair_str(dims))};
  }
  if (f.pinned_split && !contains(row.split_counts, *f.pinned_split))
    return Decline{"split_kv", fmt::format("split_kv {} not in {}", *f.pinned_split,
                                           set_of(row.split_counts, [](int s) { return std::to_string(s); }))};
  if (f.pinned_tile && !row.tiles.empty()) {  // the combine row has no tiles of its own
    const std::vector<RowTile> listed = row.tiles_for(f.D_qk, f.D_v);
    if (std::none_of(listed.begin(), listed.end(), [&](const RowTile& t) { return t.tile == *f.pinned_tile; }))
      return Decline{"tiles", fmt::format("tile {} not in {} for head dims {}", tile_str(*f.pinned_tile),
                                          set_of(listed, [](const RowTile& t) { return tile_str(t.tile); }),
                                          pair_str(dims))};
  }
  return std::nullopt;
}

}  // namespace

RowVerdict match_row(const CapabilityRow& row, const Facts& facts) {
  RowVerdict v;
  v.row_id = row.id;
  if (auto d = first_decline(row, facts)) {
    v.field = d->field;
    v.reason = fmt::format("row {}: {}", row.id, d->text);
  } else {
    v.accepted = true;
  }
  return v;
}

std::vector<RowVerdict> match(const Facts& facts) {
  std::vector<std::pair<int, RowVerdict>> ranked;
  for (const CapabilityRow& row : capability_rows())
    if (row.kind == "attention") ranked.emplace_back(row.preference, match_row(row, facts));
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    if (a.second.accepted != b.second.accepted) return a.second.accepted;
    return a.second.accepted && a.first < b.first;
  });
  std::vector<RowVerdict> out;
  for (auto& r : ranked) out.push_back(std::move(r.second));
  return out;
}

Status not_supported(const Facts& facts, const std::vector<RowVerdict>& verdicts,
                     const std::vector<std::string>& passed_over) {
  std::string msg = fmt::format("no capability row serves this {} graph on {}:", to_string(facts.op),
                                facts.device.arch_name());
  for (const RowVerdict& v : verdicts)
    if (!v.accepted) msg += "\n  " + v.reason;
  for (const std::string& reason : passed_over) msg += "\n  " + reason;
  return Status(StatusCode::NotSupported, msg);
}

}  // namespace rime
