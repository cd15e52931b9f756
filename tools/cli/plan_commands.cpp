// rime plan: facts, every row's verdict, the heuristic's candidates and the chosen configuration.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "plan/explain.hpp"
#include "plan/tuned.hpp"
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

int cmd_plan(const Options& opts) {
  const std::string source = source_of(opts);
  Result<LoadedGraph> loaded = load_graph(opts);
  if (!loaded.ok()) return report_failure(loaded.status(), opts, source);
  Result<DeviceChoice> dev = choose_device(opts);
  if (!dev.ok()) return report_failure(dev.status(), opts, source);
  Result<Facts> facts = analyze(loaded->graph, dev->device);  // the command's one validation
  if (!facts.ok()) return report_failure(facts.status(), opts, source);
  const std::vector<RowVerdict> verdicts = match(facts.value());
  std::string tuned_line;
  Result<Config> config = tuned::choose(loaded->graph, facts.value(), verdicts, !opts.no_tuned,
                                        dev->has_gpu && !dev->overridden, tuned_line);
  const ExplanationParts e{loaded->graph, facts.value(), verdicts, config.ok() ? &config.value() : nullptr,
                           dev->source,   tuned_line};

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
  if (opts.explain) fmt::print("{}", explanation_text(e));
  if (!config.ok()) return report_failure(config.status(), opts, source);
  const Config& c = config.value();
  if (!opts.explain)
    fmt::print("{}: row {}, tile {}x{}, split_kv {}, workspace {} bytes{}\n", source, c.decision.row_id,
               c.decision.tile.q, c.decision.tile.kv, c.decision.split_kv, c.derived.workspace_bytes,
               c.decision.tuned.empty() ? "" : " (tuned)");
  return kExitOk;
}

}  // namespace rime::cli
