// rime plan: facts, every row's verdict, the heuristic's candidates and the chosen configuration.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "plan/facts_json.hpp"
#include "rime/json.hpp"
#include "rime/inspect/config.hpp"
#include "rime/inspect/facts.hpp"
#include "rime/inspect/rows.hpp"
#include "runtime/driver.hpp"

namespace rime::cli {

Result<DeviceChoice> choose_device(const Options& opts) {
  DeviceChoice out;
  Result<DeviceDesc> gpu = driver::query_device();
  if (gpu.ok()) {
    out.device = gpu.value();
    out.source = "queried from the GPU";
    out.has_gpu = true;
  } else {
    out.device = DeviceDesc::h200();
    out.source = "no GPU (" + gpu.status().message() + "): H200 defaults";
  }
  if (opts.arch || opts.sms) {
    // --arch / --sms plan for another device than the one present: they override the arch and SM count.
    Result<DeviceDesc> d = DeviceDesc::from_arch(opts.arch.value_or(out.device.arch_name()),
                                                 opts.sms.value_or(out.device.sm_count));
    if (!d.ok()) return Status(StatusCode::InvalidArgument, "--arch/--sms: " + d.status().message());
    out.device.arch = d->arch;
    out.device.arch_specific = d->arch_specific;
    out.device.sm_count = d->sm_count;
    out.device.name = d->name;
    out.source = "given by --arch/--sms";
    out.overridden = true;
  }
  return out;
}

namespace {

std::string yes_no(bool b) { return b ? "yes" : "no"; }

void print_facts(const Facts& f) {
  fmt::print("facts:\n");
  fmt::print("  shape     B {}  H_q {}  H_kv {} (group {})  S_q {}  S_kv {}  D_qk {}  D_v {}\n", f.B, f.H_q, f.H_kv,
             f.group, f.S_q, f.S_kv, f.D_qk, f.D_v);
  if (f.q().dtype == f.k().dtype)
    fmt::print("  dtypes    Q/K/V {}  O {} (format {})\n", to_string(f.q().dtype), to_string(f.o().dtype), f.o_format());
  else  // a 16-bit Q over FP8 K/V
    fmt::print("  dtypes    Q {}  K/V {}  O {} (format {})\n", to_string(f.q().dtype), to_string(f.k().dtype),
               to_string(f.o().dtype), f.o_format());
  fmt::print("  layouts   Q {}  K {}  V {}  O {}  (16-byte aligned: {})\n", to_string(f.q().layout),
             to_string(f.k().layout), to_string(f.v().layout), to_string(f.o().layout),
             yes_no(f.q().aligned16 && f.k().aligned16 && f.v().aligned16 && f.o().aligned16));
  fmt::print("  mask      {}\n", f.mask.describe());
  if (f.paged)
    fmt::print("  paged     K/V pools of {} pages x {} keys; page table of {} pages per sequence (S_kv {} is the "
               "longest it addresses; lengths from seq_len_kv)\n",
               f.num_pages, f.page_size, f.max_pages, f.S_kv);
  if (f.ragged_q || f.ragged_kv) {
    std::string sides;
    if (f.ragged_q) sides += fmt::format("Q/O {} tokens (S_q {} is max_seqlen_q)", f.T_q, f.S_q);
    if (f.ragged_kv) sides += fmt::format("{}K/V {} tokens (S_kv {} is max_seqlen_kv)", f.ragged_q ? "; " : "", f.T_kv, f.S_kv);
    fmt::print("  ragged    {} sequences through cu_seqlens: {}\n", f.B, sides);
  }
  std::string outs = "O";
  if (f.wants_stats) outs += f.stats_log2 ? ", Stats (log2)" : ", Stats";
  if (f.wants_amax_s) outs += ", Amax_S";
  if (f.wants_amax_o) outs += ", Amax_O";
  if (f.o_block_scale)
    outs += fmt::format(", sf_o ({} per {} d, {} [{}x{}])", f.o_block_scale == 16 ? "E4M3" : "UE8M0", f.o_block_scale,
                        to_string(*f.sf_o_layout), f.sf_o_rows, f.sf_o_cols);
  fmt::print("  outputs   {}\n", outs);
  fmt::print("  sink {}  scale_o {}  decode {}  attn_scale {}\n", yes_no(f.has_sink), yes_no(f.has_scale_o),
             yes_no(f.decode), f.attn_scale);
  fmt::print("  split     {}\n", f.split_eligible ? "eligible" : "ineligible: " + f.split_ineligible_reason);
  if (f.pinned_split) fmt::print("  pinned    split_kv {}\n", *f.pinned_split);
  if (f.pinned_tile) fmt::print("  pinned    tile {}x{}\n", f.pinned_tile->q, f.pinned_tile->kv);
}

void print_verdicts(const std::vector<RowVerdict>& verdicts) {
  fmt::print("rows:\n");
  for (const RowVerdict& v : verdicts) {
    if (v.accepted) fmt::print("  accepted  row {}\n", v.row_id);
    else fmt::print("  declined  {}\n", v.reason);
  }
}

void print_config(const Config& c) {
  const Decision& d = c.decision;
  const Derived& x = c.derived;
  fmt::print("choice:\n");
  fmt::print("  row       {} (engine {})\n", d.row_id, x.engine);
  fmt::print("  tile      {}x{} ({})\n", d.tile.q, d.tile.kv, d.tile_reason);
  if (d.consumer_warpgroups)
    fmt::print("  consumers {} consumer warpgroup{} of 64 rows\n", d.consumer_warpgroups,
               d.consumer_warpgroups > 1 ? "s" : "");
  fmt::print("  grid      {} packed rows per kv head -> {} row tiles; {} KV tiles\n", x.packed_rows, x.q_tiles,
             x.kv_tiles);
  fmt::print("  split_kv  {} ({})\n", d.split_kv, d.split_reason);
  for (const SplitCandidate& s : d.split_candidates)
    fmt::print("            candidate split {:<4} waves {:<5} cost {:.2f}{}\n", s.split, s.waves, s.cost,
               s.split == d.split_kv ? "  <- chosen" : "");
  fmt::print("  workspace {} bytes; shared memory {} bytes per CTA\n", x.workspace_bytes, x.smem_bytes);
  for (const KernelStage& s : x.stages)
    fmt::print("  stage     {:<11} {} grid [{},{},{}] x {} threads, {} bytes of shared memory{}\n", s.role,
               s.spec.name_expression, s.grid[0], s.grid[1], s.grid[2], s.block, s.smem_bytes,
               s.persistent ? " (persistent: grid x becomes the CTAs the GPU holds at once when loaded)" : "");
}

}  // namespace

void print_explanation(const Explanation& e) {
  fmt::print("graph '{}' ({}) on {}, {} SMs, {} bytes of shared memory per block ({})\n", e.graph.name(),
             to_string(e.facts.op), e.facts.device.arch_name(), e.facts.device.sm_count, e.facts.device.smem_per_block,
             e.device_source);
  print_facts(e.facts);
  print_verdicts(e.verdicts);
  if (e.config) print_config(*e.config);
}

nlohmann::json explanation_json(const Explanation& e) {
  // The graph in its canonical form (docs/graph-json.md), as in a plan artifact and `rime show --json`: a loadable
  // graph file.
  nlohmann::json j{{"graph", nlohmann::json::parse(graph_to_json(e.graph, false))}, {"device_source", e.device_source}};
  j["facts"] = facts_to_json(e.facts);
  j["rows"] = nlohmann::json::array();
  for (const RowVerdict& v : e.verdicts)
    j["rows"].push_back({{"row", v.row_id}, {"accepted", v.accepted}, {"field", v.field}, {"reason", v.reason}});
  if (e.config) {
    j["decision"] = decision_to_json(e.config->decision);
    j["derived"] = derived_to_json(e.config->derived);
  }
  return j;
}

int cmd_plan(const Options& opts) {
  const std::string source = source_of(opts);
  Result<LoadedGraph> loaded = load_graph(opts);
  if (!loaded.ok()) return report_failure(loaded.status(), opts, source);
  Result<DeviceChoice> dev = choose_device(opts);
  if (!dev.ok()) return report_failure(dev.status(), opts, source);
  Result<Facts> facts = analyze(loaded->graph, dev->device);  // the command's one validation
  if (!facts.ok()) return report_failure(facts.status(), opts, source);
  const std::vector<RowVerdict> verdicts = match(facts.value());
  Result<Config> config = choose(facts.value(), verdicts);
  const Explanation e{loaded->graph, facts.value(), verdicts, config.ok() ? &config.value() : nullptr, dev->source};

  if (opts.json) {
    nlohmann::json j = explanation_json(e);
    j["source"] = source;
    j["ok"] = config.ok();
    if (!config.ok()) {
      j["code"] = to_string(config.status().code());
      j["message"] = config.status().message();
    }
    fmt::print("{}\n", j.dump(2));
    return config.ok() ? kExitOk : exit_code_for(config.status().code());
  }
  if (opts.explain) print_explanation(e);
  if (!config.ok()) return report_failure(config.status(), opts, source);
  const Config& c = config.value();
  if (!opts.explain)
    fmt::print("{}: row {}, tile {}x{}, split_kv {}, workspace {} bytes\n", source, c.decision.row_id,
               c.decision.tile.q, c.decision.tile.kv, c.decision.split_kv, c.derived.workspace_bytes);
  return kExitOk;
}

}  // namespace rime::cli
