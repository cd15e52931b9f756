// The explanation of a plan: facts, every row's verdict, the decision with its candidates and the stages. The CLI,
// Plan::explain and rime::explain print this one text.
#include "plan/explain.hpp"
#include "plan/tuned.hpp"

#include <fmt/format.h>

#include "plan/context_parallel.hpp"
#include "plan/facts_json.hpp"
#include "rime/json.hpp"
#include "rime/plan.hpp"
#include "status_macros.hpp"

namespace rime {

namespace {

std::string yes_no(bool b) { return b ? "yes" : "no"; }

void print_facts(std::string& out, const Facts& f) {
  out += fmt::format("facts:\n");
  out += fmt::format("  shape     B {}  H_q {}  H_kv {} (group {})  S_q {}  S_kv {}  D_qk {}  D_v {}\n", f.B, f.H_q,
                     f.H_kv, f.group, f.S_q, f.S_kv, f.D_qk, f.D_v);
  if (f.q().dtype == f.k().dtype)
    out += fmt::format("  dtypes    Q/K/V {}  O {} (format {})\n", to_string(f.q().dtype), to_string(f.o().dtype),
                       f.o_format());
  else  // a 16-bit Q over FP8 K/V
    out += fmt::format("  dtypes    Q {}  K/V {}  O {} (format {})\n", to_string(f.q().dtype), to_string(f.k().dtype),
                       to_string(f.o().dtype), f.o_format());
  out += fmt::format("  layouts   Q {}  K {}  V {}  O {}  (16-byte aligned: {})\n", to_string(f.q().layout),
                     to_string(f.k().layout), to_string(f.v().layout), to_string(f.o().layout),
                     yes_no(f.q().aligned16 && f.k().aligned16 && f.v().aligned16 && f.o().aligned16));
  out += fmt::format("  mask      {}\n", f.mask.describe());
  if (f.paged)
    out += fmt::format(
        "  paged     K/V pools of {} pages x {} keys; page table of {} pages per sequence (S_kv {} is the "
        "longest it addresses; lengths from seq_len_kv)\n",
        f.num_pages, f.page_size, f.max_pages, f.S_kv);
  if (f.ragged_q || f.ragged_kv) {
    std::string sides;
    if (f.ragged_q) sides += fmt::format("Q/O {} tokens (S_q {} is max_seqlen_q)", f.T_q, f.S_q);
    if (f.ragged_kv)
      sides += fmt::format("{}K/V {} tokens (S_kv {} is max_seqlen_kv)", f.ragged_q ? "; " : "", f.T_kv, f.S_kv);
    out += fmt::format("  ragged    {} sequences through cu_seqlens: {}\n", f.B, sides);
  }
  if (f.logit_softcap > 0)
    out += fmt::format("  softcap   {} (each logit s becomes {} * tanh(s / {}) before masks and the sink)\n",
                       f.logit_softcap, f.logit_softcap, f.logit_softcap);
  if (f.q_quantization == QQuantization::E4M3PerRow)
    out += "  q quant   e4m3_per_row (each Q row rounded to E4M3 on its own power-of-two scale before Q.K^T)\n";
  if (f.seq_start_q || f.seq_start_kv)
    out += fmt::format("  starts    {}{}{} (left padding: sequence b begins at its start, not at 0)\n",
                       f.seq_start_q ? "Q rows from seq_start_q" : "", f.seq_start_q && f.seq_start_kv ? ", " : "",
                       f.seq_start_kv ? "K/V positions from seq_start_kv" : "");
  std::string outs = "O";
  if (f.wants_stats) outs += f.stats_log2 ? ", Stats (log2)" : ", Stats";
  if (f.wants_amax_s) outs += ", Amax_S";
  if (f.wants_amax_o) outs += ", Amax_O";
  if (f.o_block_scale)
    outs += fmt::format(", sf_o ({} per {} d, {} [{}x{}])", f.o_block_scale == 16 ? "E4M3" : "UE8M0", f.o_block_scale,
                        to_string(*f.sf_o_layout), f.sf_o_rows, f.sf_o_cols);
  out += fmt::format("  outputs   {}\n", outs);
  out += fmt::format("  sink {}  scale_o {}  decode {}  attn_scale {}\n", yes_no(f.has_sink), yes_no(f.has_scale_o),
                     yes_no(f.decode), f.attn_scale);
  if (f.per_head_descales) {
    std::string which;
    for (Role r : {Role::DescaleQ, Role::DescaleK, Role::DescaleV})
      if (const TensorFacts& d = f.operand(r); d.bound && d.dims[0] * d.dims[1] > 1)
        which += (which.empty() ? "" : ", ") + d.name;
    out += fmt::format("  descales  per (batch, kv head): {}\n", which);
  }
  out += fmt::format("  split     {}\n", f.split_eligible ? "eligible" : "ineligible: " + f.split_ineligible_reason);
  if (f.context_parallel.world > 0)
    out += fmt::format("  context   parallel: rank {} of {}, K/V sharded by sequence (this graph is the rank's shard); "
                       "the combine merges the {} ranks' split partials, all-gathered with NCCL\n",
                       f.context_parallel.rank, f.context_parallel.world, f.context_parallel.world);
  if (f.pinned_split) out += fmt::format("  pinned    split_kv {}\n", *f.pinned_split);
  if (f.pinned_tile) out += fmt::format("  pinned    tile {}x{}\n", f.pinned_tile->q, f.pinned_tile->kv);
}

void print_verdicts(std::string& out, const std::vector<RowVerdict>& verdicts) {
  out += fmt::format("rows:\n");
  for (const RowVerdict& v : verdicts) {
    if (v.accepted)
      out += fmt::format("  accepted  row {}\n", v.row_id);
    else
      out += fmt::format("  declined  {}\n", v.reason);
  }
}

void print_config(std::string& out, const Config& c) {
  const Decision& d = c.decision;
  const Derived& x = c.derived;
  out += fmt::format("choice:\n");
  out += fmt::format("  row       {} (engine {})\n", d.row_id, x.engine);
  out += fmt::format("  tile      {}x{} ({})\n", d.tile.q, d.tile.kv, d.tile_reason);
  if (d.consumer_warpgroups)
    out += fmt::format("  consumers {} consumer warpgroup{} of 64 rows\n", d.consumer_warpgroups,
                       d.consumer_warpgroups > 1 ? "s" : "");
  out += fmt::format("  grid      {} packed rows per kv head -> {} row tiles; {} KV tiles\n", x.packed_rows, x.q_tiles,
                     x.kv_tiles);
  out += fmt::format("  split_kv  {} ({})\n", d.split_kv, d.split_reason);
  for (const SplitCandidate& s : d.split_candidates)
    out += fmt::format("            candidate split {:<4} waves {:<5} cost {:.2f}{}\n", s.split, s.waves, s.cost,
                       s.split == d.split_kv ? "  <- chosen" : "");
  out += fmt::format("  workspace {} bytes; shared memory {} bytes per CTA\n", x.workspace_bytes, x.smem_bytes);
  for (const KernelStage& s : x.stages)
    out += fmt::format("  stage     {:<11} {} grid [{},{},{}] x {} threads, {} bytes of shared memory{}\n", s.role,
                       s.spec.name_expression, s.grid[0], s.grid[1], s.grid[2], s.block, s.smem_bytes,
                       s.persistent ? " (persistent: grid x becomes the CTAs the GPU holds at once when loaded)" : "");
}

}  // namespace

std::string explanation_text(const ExplanationParts& e) {
  std::string out;
  out += fmt::format("graph '{}' ({}) on {}, {} SMs, {} bytes of shared memory per block ({})\n", e.graph.name(),
                     to_string(e.facts.op), e.facts.device.arch_name(), e.facts.device.sm_count,
                     e.facts.device.smem_per_block, e.device_source);
  print_facts(out, e.facts);
  print_verdicts(out, e.verdicts);
  if (e.config) print_config(out, *e.config);
  if (!e.tuned.empty()) out += fmt::format("  tuned     {}\n", e.tuned);
  return out;
}

nlohmann::json explanation_json(const ExplanationParts& e) {
  // The graph in its canonical form (docs/graph-json.md), as in a plan artifact and `rime show --json`: a loadable
  // graph file.
  nlohmann::json j{{"graph", nlohmann::json::parse(graph_to_json(e.graph, false))}, {"device_source", e.device_source}};
  j["facts"] = facts_to_json(e.facts);
  j["rows"] = nlohmann::json::array();
  for (const RowVerdict& v : e.verdicts)
    j["rows"].push_back({{"row", v.row_id}, {"accepted", v.accepted}, {"field", v.field}, {"reason", v.reason}});
  if (!e.tuned.empty()) j["tuned"] = e.tuned;
  if (e.config) {
    j["decision"] = decision_to_json(e.config->decision);
    j["derived"] = derived_to_json(e.config->derived);
  }
  return j;
}

Explanation explanation_of(const ExplanationParts& parts) {
  Explanation out;
  out.text = explanation_text(parts);
  out.json = explanation_json(parts).dump(2);
  out.served = parts.config != nullptr;
  out.tuned = parts.config && !parts.config->decision.tuned.empty();
  return out;
}

Result<Explanation> explain(const Graph& graph, const PlanOptions& options) {
  const Result<DeviceResolution> device = resolve_device(options);
  if (!device.ok()) return device.status();
  Result<Facts> facts = analyze(graph, device->device);  // validates the graph
  if (!facts.ok()) return facts.status();
  RIME_RETURN_IF_ERROR(context_parallel::apply(facts.value(), options.context_parallel));
  const std::vector<RowVerdict> verdicts = match(facts.value());
  std::string tuned_line;
  Result<Config> config = tuned::choose(graph, facts.value(), verdicts, options.use_tuned && !options.context_parallel,
                                        device->queried, tuned_line);
  const ExplanationParts parts{graph,          facts.value(), verdicts, config.ok() ? &config.value() : nullptr,
                               device->source, tuned_line};
  Explanation out = explanation_of(parts);
  if (!config.ok()) out.decline = config.status().message();
  return out;
}

}  // namespace rime
