// rime plan: facts, every row's verdict, the heuristic's candidates and the chosen configuration.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "rime/gpu.hpp"
#include "rime/plan.hpp"

namespace rime::cli {

Result<DeviceChoice> choose_device(const Options& opts) {
  DeviceChoice out;
  Result<DeviceDesc> gpu = query_device();
  if (gpu.ok()) {
    out.device = gpu.value();
    out.source = "queried from the GPU";
    out.has_gpu = true;
  } else {
    out.device = DeviceDesc::h200();
    out.no_gpu_why = gpu.status().message();
    out.source = "no GPU (" + out.no_gpu_why + "): H200 defaults";
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

PlanOptions plan_options(const DeviceChoice& dev, bool use_tuned) {
  PlanOptions o;
  // The GPU's own description is queried again by the library, so that its tuned choices (keyed by its driver) apply.
  if (!dev.has_gpu || dev.overridden) {
    o.device = dev.device;
    o.device_source = dev.source;
  }
  o.use_tuned = use_tuned;
  return o;
}

int cmd_plan(const Options& opts) {
  const std::string source = source_of(opts);
  Result<LoadedGraph> loaded = load_graph(opts);
  if (!loaded.ok()) return report_failure(loaded.status(), opts, source);
  Result<DeviceChoice> dev = choose_device(opts);
  if (!dev.ok()) return report_failure(dev.status(), opts, source);
  // The library's explanation: the facts, every row's verdict and the choice, printed as the API gives it.
  Result<Explanation> e = explain(loaded->graph, plan_options(dev.value(), !opts.no_tuned));
  if (!e.ok()) return report_failure(e.status(), opts, source);
  const Status declined(StatusCode::NotSupported, e->decline);
  if (opts.json) {
    nlohmann::json j = nlohmann::json::parse(e->json);
    j["source"] = source;
    j["ok"] = e->served;
    if (!e->served) {
      j["code"] = to_string(declined.code());
      j["message"] = declined.message();
    }
    fmt::print("{}\n", j.dump(2));
    return e->served ? kExitOk : exit_code_for(declined.code());
  }
  if (opts.explain) fmt::print("{}", e->text);
  if (!e->served) return report_failure(declined, opts, source);
  if (!opts.explain) {
    const nlohmann::json j = nlohmann::json::parse(e->json);
    const nlohmann::json& d = j["decision"];
    fmt::print("{}: row {}, tile {}x{}, split_kv {}, workspace {} bytes{}\n", source, d["row"].get<std::string>(),
               d["tile"]["q"].get<int64_t>(), d["tile"]["kv"].get<int64_t>(), d["split_kv"].get<int>(),
               j["derived"]["workspace_bytes"].get<int64_t>(), e->tuned ? " (tuned)" : "");
  }
  return kExitOk;
}

}  // namespace rime::cli
