// Capability rows (SPEC section 8): data, no logic. Each row says what one engine serves; one matcher compares
// Facts to every row field by field and says, for each, accepted or the first field that failed with both
// values. The rows live in rows/*.json and are embedded at build time; docs/capabilities.md is generated from
// them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "rime/inspect/facts.hpp"
#include "rime/status.hpp"

namespace rime {

// One tile a row serves: packed rows x keys of one main-loop step, the consumer warpgroups that run it (0 for an
// engine that has none: the tile's rows say its warps), and the head dims it is for (empty: every head dim the
// row lists). The matcher refuses a pinned tile that the row does not list for the graph's head dims; the engine
// picks among the listed ones.
struct RowTile {
  TileShape tile;
  int consumer_warpgroups = 0;
  std::vector<std::pair<int64_t, int64_t>> head_dims;
  bool serves(int64_t d_qk, int64_t d_v) const;
};

struct CapabilityRow {
  std::string id;
  std::string engine;
  std::string kind;  // "attention" (serves graphs) or "combine" (the split-KV second pass)
  int preference = 0;  // lower is preferred among accepted rows
  std::string description;
  int sm_lo = 0, sm_hi = 0;
  bool needs_arch_specific = false;
  std::vector<OpKind> ops;
  std::vector<DataType> input_dtypes;
  std::vector<std::string> o_formats;  // O dtypes, plus "NVFP4" / "MXFP8" for block-scaled O
  std::vector<std::pair<int64_t, int64_t>> head_dims;  // (D_qk, D_v)
  std::vector<std::string> masks;                      // causal, bottom_right, window, band, padding
  std::vector<Layout> layouts;
  bool needs_aligned16 = false;
  bool sink = false, stats = false, amax_s = false, amax_o = false;
  bool paged_kv = false;  // K/V as page pools through a page table (role page_table)
  bool softcap = false;    // logit soft-capping (logit_softcap)
  bool seq_start = false;  // per-sequence starts (seq_start_q / seq_start_kv: left padding, SPEC section 2)
  bool ragged = false;    // ragged (THD) batches: token-major tensors through cu_seqlens_q / cu_seqlens_kv
  bool q16_over_fp8_kv = false;  // sdpa_fp8 with a FP16/BF16 Q over FP8 K/V (input_dtypes then name K/V's)
  bool only_q16_over_fp8_kv = false;  // that and nothing else ("q16_over_fp8_kv": "only")
  QQuantization q_quantization = QQuantization::None;  // the one q_quantization an attention row serves
  bool split_kv_supported = false;
  std::vector<std::pair<int64_t, int64_t>> split_head_dims;
  std::vector<int> split_counts;
  std::vector<RowTile> tiles;
  // The tiles listed for these head dims, in row order.
  std::vector<RowTile> tiles_for(int64_t d_qk, int64_t d_v) const;
  // Whether the row writes split-KV partials (split_kv supported, these head dims wired): what a split plan and a
  // context-parallel plan's combine need.
  bool writes_split_partials(int64_t d_qk, int64_t d_v) const;
  // Fewest packed rows (S_q x group) the row serves on tiles of more than one consumer warpgroup: an engine whose
  // large row tiles would run mostly empty (decode) declines such graphs, except for head dims it lists a
  // one-consumer (64-row) tile for, so that a row with small tiles runs the rest.
  int64_t min_packed_rows = 0;
  std::string notes;
};

// Every row, parsed once from the embedded rows/*.json, in id order.
const std::vector<CapabilityRow>& capability_rows();
// Parses one row document (exposed for tests and the docs generator).
Result<CapabilityRow> parse_capability_row(const std::string& json_text);

struct RowVerdict {
  std::string row_id;
  bool accepted = false;
  std::string field;   // the first field that failed
  std::string reason;  // "row sdpa_mma_fp8: D_qk 96 not in {64, 128, 256}"
};

// Matches every attention row against the facts. Accepted rows come first, by preference, then the declines in
// row order.
std::vector<RowVerdict> match(const Facts& facts);
// The verdict of one row (the combine row too).
RowVerdict match_row(const CapabilityRow& row, const Facts& facts);
// NotSupported listing every row's reason: the declines of `verdicts`, then `passed_over`, the reasons of rows
// that accepted the facts but whose heuristics found no configuration.
Status not_supported(const Facts& facts, const std::vector<RowVerdict>& verdicts,
                     const std::vector<std::string>& passed_over = {});

}  // namespace rime
