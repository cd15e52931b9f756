// rime run: plan, compile, and on a GPU execute with fresh random inputs (or --inputs) and check against the
// CPU reference; --save writes every tensor as .npy.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "rime/plan.hpp"
#include "testing/npy.hpp"
#include "testing/trial.hpp"

namespace rime::cli {

int cmd_run(const Options& opts) {
  const std::string source = source_of(opts);
  Result<LoadedGraph> loaded = load_graph(opts);
  if (!loaded.ok()) return report_failure(loaded.status(), opts, source);
  Graph graph = loaded->graph;
  if (opts.split) {
    // --split pins the knob on a copy of the graph: honoured or declined, like a pin in the file, and the plan
    // --explain shows is the pinned one.
    if (!graph.op()) return report_failure(validate(graph), opts, source);
    SdpaOp op = *graph.op();
    op.attributes.split_kv = *opts.split;
    Graph pinned(graph.name());
    for (const TensorDesc& t : graph.tensors()) pinned.add_tensor(t);
    (void)pinned.set_op(op);
    graph = pinned;
  }
  if (opts.ranks > 0 || opts.launched) return cmd_run_ranks(opts, graph);
  if (opts.kv_lengths && !graph.operand(Role::SeqLenKv))
    return report_failure(Status(StatusCode::InvalidArgument,
                                 "--kv-lengths draws seq_len_kv, and the graph binds none (it needs padding_mask)"),
                          opts, source);
  if (opts.seq_lengths && !graph.operand(Role::SeqLenKv) && !graph.operand(Role::CuSeqlensKv))
    return report_failure(Status(StatusCode::InvalidArgument,
                                 "--seq-lengths draws each sequence's length (seq_len_q / seq_len_kv or cu_seqlens_q / "
                                 "cu_seqlens_kv), and the graph binds none (it needs padding_mask)"),
                          opts, source);
  if (opts.seq_lengths && opts.kv_lengths)
    return report_failure(Status(StatusCode::InvalidArgument,
                                 "--seq-lengths and --kv-lengths both draw seq_len_kv: give one of them"),
                          opts, source);
  if (opts.uniform_descales && !graph.operand(Role::DescaleQ) && !graph.operand(Role::DescaleK) &&
      !graph.operand(Role::DescaleV))
    return report_failure(Status(StatusCode::InvalidArgument,
                                 "--uniform-descales fills descale_q, descale_k and descale_v, and the graph binds "
                                 "none of them"),
                          opts, source);
  Result<DeviceChoice> dev = choose_device(opts);
  if (!dev.ok()) return report_failure(dev.status(), opts, source);
  const PlanOptions options = plan_options(dev.value(), !opts.no_tuned);
  Result<Plan> plan = Plan::build(graph, options);  // analyze inside: the run's one validation
  if (!plan.ok()) {
    if (opts.explain && !opts.json && plan.status().code() == StatusCode::NotSupported) {
      // The facts and every row's verdict say why (a valid graph: explain cannot fail here).
      if (Result<Explanation> e = explain(graph, options); e.ok()) fmt::print("{}", e->text);
    }
    return report_failure(plan.status(), opts, source);
  }
  const Explanation explanation = plan->explain();
  nlohmann::json j{{"source", source}, {"graph", graph.name()}, {"ok", true}};
  if (opts.explain) {
    if (opts.json) j["explain"] = nlohmann::json::parse(explanation.json);
    else fmt::print("{}", explanation.text);
  }
  j["kernels"] = nlohmann::json::array();
  for (const KernelInfo& k : plan->kernels()) {
    j["kernels"].push_back({{"role", k.role}, {"engine", k.engine}, {"name", k.name_expression},
                            {"digest", k.key.substr(0, 16)}, {"origin", k.origin}, {"compile_ms", k.compile_ms},
                            {"cubin_bytes", k.cubin_bytes}});
    if (!opts.json)
      fmt::print("kernel {:<11} {} [{}] digest {} ({}{})\n", k.role, k.engine, k.name_expression, k.key.substr(0, 16),
                 k.origin, k.origin == "compiled" ? fmt::format(", {:.0f} ms", k.compile_ms) : "");
  }
  const Config& c = plan->config();
  if (!opts.json)
    fmt::print("plan: row {}, tile {}x{}, split_kv {}, workspace {} bytes, for {}\n", c.decision.row_id,
               c.decision.tile.q, c.decision.tile.kv, c.decision.split_kv, c.derived.workspace_bytes,
               plan->facts().device.arch_name());
  if (!dev->has_gpu || !plan->prepared()) {
    const std::string why = !dev->has_gpu ? dev->no_gpu_why : "the plan is not for this GPU (see --arch)";
    j["executed"] = false;
    j["skipped_because"] = why;
    if (opts.json) fmt::print("{}\n", j.dump(2));
    else fmt::print("execution skipped: {}\n", why);
    return kExitOk;
  }
  std::optional<testing::LengthRange> kv_lengths;
  if (opts.kv_lengths) kv_lengths = testing::LengthRange{opts.kv_lengths->first, opts.kv_lengths->second};
  std::optional<testing::LengthRange> seq_lengths;
  if (opts.seq_lengths) seq_lengths = testing::LengthRange{opts.seq_lengths->first, opts.seq_lengths->second};
  testing::TrialInputs inputs = testing::make_inputs(graph, opts.seed, 2, kv_lengths, seq_lengths, opts.uniform_descales);
  std::vector<std::string> read;
  if (!opts.inputs_dir.empty()) {
    Status s = testing::read_npy_inputs(graph, opts.inputs_dir, inputs.tensors, read);
    if (!s.ok()) return report_failure(s, opts, source);
    j["inputs_read"] = read;
    if (!opts.json) fmt::print("inputs read from {}: {}\n", opts.inputs_dir, read.empty() ? "none" : fmt::format("{}", fmt::join(read, ", ")));
    // Lengths read without a page table: the generated table must address the lengths read, not the drawn ones.
    const auto was_read = [&](Role role) {
      const TensorDesc* t = graph.operand(role);
      return t && std::find(read.begin(), read.end(), t->name) != read.end();
    };
    if (was_read(Role::SeqLenKv) && graph.operand(Role::PageTable) && !was_read(Role::PageTable))
      testing::fill_page_table(graph, inputs, opts.seed);
  }
  testing::TrialOptions topt;
  topt.check = !opts.no_check;
  topt.check_indices = opts.check_indices;
  topt.timing_iterations = opts.bench ? opts.iterations : 0;
  Result<testing::TrialReport> rep = testing::run_trial(plan.value(), inputs, topt);
  if (!rep.ok()) return report_failure(rep.status(), opts, source);
  const testing::TrialReport& r = rep.value();
  if (!opts.save_dir.empty()) {
    reference::HostTensors all = inputs.tensors;
    for (const auto& [uid, bytes] : r.outputs) all[uid] = bytes;
    Status s = testing::write_npy_tensors(graph, opts.save_dir, all);
    if (!s.ok()) return report_failure(s, opts, source);
    j["saved_to"] = opts.save_dir;
    if (!opts.json) fmt::print("saved {} tensors to {} (tensors.json names their formats)\n", all.size(), opts.save_dir);
  }
  j["executed"] = true;
  j["check"] = {{"passed", r.passed}, {"rows_checked", r.rows_checked}, {"o_max_abs_err", r.o_max_abs_err},
                {"o_rel_l2", r.o_rel_l2}, {"elements_outside", r.elements_outside},
                {"lse_max_abs_err", r.lse_max_abs_err}, {"failures", r.failures}};
  if (plan->facts().o_block_scale) j["check"]["reference_quantization_rel_l2"] = r.quant_rel_l2;
  if (topt.timing_iterations > 0)
    j["bench"] = {{"median_ms", r.median_ms}, {"tflops", r.tflops}, {"gbps", r.gbps}};
  if (opts.json) {
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("executed on {}\n", dev->device.name);
    if (topt.check) {
      fmt::print("check: {} ({} rows vs the CPU reference; O max abs err {:.4g}, rel L2 {:.3g}, {} outside; LSE max "
                 "abs err {:.3g})\n",
                 r.passed ? "PASSED" : "FAILED", r.rows_checked, r.o_max_abs_err, r.o_rel_l2, r.elements_outside,
                 r.lse_max_abs_err);
      if (plan->facts().o_block_scale)
        fmt::print("  {} O: the rel L2 above includes the quantization; the reference's own is {:.3g}\n",
                   plan->facts().o_format(), r.quant_rel_l2);
      if (plan->facts().wants_amax_o) fmt::print("  Amax_O {:.5g} (reference {:.5g})\n", r.amax_o_gpu, r.amax_o_ref);
      if (plan->facts().wants_amax_s) fmt::print("  Amax_S {:.5g} (reference {:.5g})\n", r.amax_s_gpu, r.amax_s_ref);
      for (const std::string& f : r.failures) fmt::print("  {}\n", f);
    }
    if (topt.timing_iterations > 0)
      fmt::print("bench: median {:.4f} ms over {} runs: {:.1f} TFLOP/s, {:.1f} GB/s\n", r.median_ms,
                 topt.timing_iterations, r.tflops, r.gbps);
  }
  return r.passed ? kExitOk : kExitCheckFailed;
}

}  // namespace rime::cli
