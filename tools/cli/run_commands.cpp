// rime run: plan, compile, and on a GPU execute with fresh random inputs and check against the CPU reference.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "rime/plan.hpp"
#include "runtime/driver.hpp"
#include "testing/trial.hpp"

namespace rime::cli {

namespace {
Result<int> int_option(const Args& args, const std::string& name, int fallback) {
  if (!args.flag(name)) return fallback;
  try {
    size_t used = 0;
    int v = std::stoi(args.get(name), &used);
    if (used == args.get(name).size()) return v;
  } catch (const std::exception&) {
  }
  return Status(StatusCode::InvalidGraph, fmt::format("--{} '{}' is not an integer", name, args.get(name)));
}
}  // namespace

int cmd_run(const Args& args) {
  const std::string source = args.positional.empty() ? "<default graph>" : args.positional[0];
  Result<LoadedGraph> loaded = load_graph_arg(args);
  if (!loaded.ok()) return report_failure(loaded.status(), args, source);
  Graph graph = loaded->graph;
  Result<int> split = int_option(args, "split", 0);
  Result<int> seed = int_option(args, "seed", 1);
  Result<int> iters = int_option(args, "iterations", 20);
  for (const auto* r : {&split, &seed, &iters})
    if (!r->ok()) return report_failure(r->status(), args, source);
  if (split.value() > 0) {
    // --split pins the knob on a copy of the graph: honoured or declined, like a pin in the file.
    SdpaOp op = *graph.op();
    op.attributes.split_kv = split.value();
    Graph pinned(graph.name());
    for (const TensorDesc& t : graph.tensors()) pinned.add_tensor(t);
    (void)pinned.set_op(op);
    graph = pinned;
  }
  Result<DeviceChoice> dev = device_from_args(args);
  if (!dev.ok()) return report_failure(dev.status(), args, source);
  if (args.flag("explain")) {
    Args plan_args = args;
    plan_args.options.erase("json");
    if (int rc = cmd_plan(plan_args); rc != kExitOk) return rc;
  }
  PlanOptions options;
  options.device = dev->device;
  Result<Plan> plan = Plan::build(graph, options);
  if (!plan.ok()) return report_failure(plan.status(), args, source);
  const bool json_out = args.flag("json");
  nlohmann::json j{{"source", source}, {"graph", graph.name()}, {"ok", true}};
  j["kernels"] = nlohmann::json::array();
  for (const KernelInfo& k : plan->kernels()) {
    j["kernels"].push_back({{"role", k.role}, {"engine", k.engine}, {"name", k.name_expression},
                            {"digest", k.key.substr(0, 16)}, {"origin", k.origin}, {"compile_ms", k.compile_ms},
                            {"cubin_bytes", k.cubin_bytes}});
    if (!json_out)
      fmt::print("kernel {:<9} {} [{}] digest {} ({}{})\n", k.role, k.engine, k.name_expression, k.key.substr(0, 16),
                 k.origin, k.origin == "compiled" ? fmt::format(", {:.0f} ms", k.compile_ms) : "");
  }
  const Config& c = plan->config();
  if (!json_out)
    fmt::print("plan: row {}, tile {}x{}, split_kv {}, workspace {} bytes, for {}\n", c.decision.row_id,
               c.decision.tile.q, c.decision.tile.kv, c.decision.split_kv, c.derived.workspace_bytes,
               plan->facts().device.arch_name());
  if (!dev->has_gpu || !plan->prepared()) {
    const std::string why = !dev->has_gpu ? driver::load_status().message()
                                          : "the plan is not for this GPU (see --arch)";
    j["executed"] = false;
    j["skipped_because"] = why;
    if (json_out) fmt::print("{}\n", j.dump(2));
    else fmt::print("execution skipped: {}\n", why);
    return kExitOk;
  }
  testing::TrialInputs inputs = testing::make_inputs(graph, static_cast<uint64_t>(seed.value()));
  testing::TrialOptions topt;
  topt.check = !args.flag("no-check");
  topt.timing_iterations = args.flag("bench") ? iters.value() : 0;
  Result<testing::TrialReport> rep = testing::run_trial(plan.value(), inputs, topt);
  if (!rep.ok()) return report_failure(rep.status(), args, source);
  const testing::TrialReport& r = rep.value();
  j["executed"] = true;
  j["check"] = {{"passed", r.passed}, {"rows_checked", r.rows_checked}, {"o_max_abs_err", r.o_max_abs_err},
                {"o_rel_l2", r.o_rel_l2}, {"elements_outside", r.elements_outside},
                {"lse_max_abs_err", r.lse_max_abs_err}, {"failures", r.failures}};
  if (plan->facts().o_block_scale) j["check"]["reference_quantization_rel_l2"] = r.quant_rel_l2;
  if (topt.timing_iterations > 0)
    j["bench"] = {{"median_ms", r.median_ms}, {"tflops", r.tflops}, {"gbps", r.gbps}};
  if (json_out) {
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
