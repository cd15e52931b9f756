// rime cache: inspect and maintain the on-disk plan cache (docs/cache.md).
#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

#include "cache/disk_cache.hpp"
#include "cli/cli.hpp"
#include "rime/json.hpp"
#include "rime/plan.hpp"

namespace rime::cli {
namespace {

std::string when(int64_t unix_seconds) {
  if (unix_seconds <= 0) return "-";
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", std::gmtime(&t));
  return buf;
}

nlohmann::json entry_json(const cache::EntryInfo& e) {
  return {{"name", e.name},          {"key", e.key},        {"engine", e.engine},
          {"kernel", e.name_expression}, {"lowered_name", e.lowered_name}, {"arch", e.arch},
          {"bytes", e.bytes},        {"cubin_bytes", e.cubin_bytes}, {"compile_ms", e.compile_ms},
          {"created", e.created},    {"last_used", e.last_used}, {"valid", e.valid},
          {"problem", e.problem},    {"path", e.path}};
}

int fail(const Args& args, StatusCode code, const std::string& message) {
  return report_failure(Status(code, message), args, "cache");
}

}  // namespace

int cmd_cache(const Args& args) {
  if (args.positional.empty())
    return fail(args, StatusCode::InvalidJson, "rime cache needs an action: ls, show, stats, verify, prune, clear, warm");
  const std::string action = args.positional[0];
  const bool json_out = args.flag("json");
  const cache::Settings settings = cache::resolve_settings();
  if (!settings.cache && action != "warm")
    return fail(args, StatusCode::CacheCorrupt, "no usable cache directory: " + settings.disabled_why);
  const cache::DiskCache& disk = *settings.cache;

  if (action == "ls") {
    auto entries = disk.list();
    if (json_out) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& e : entries) j.push_back(entry_json(e));
      fmt::print("{}\n", j.dump(2));
      return kExitOk;
    }
    fmt::print("{:<32} {:<8} {:>10} {:<20} {}\n", "entry", "arch", "bytes", "last used (UTC)", "kernel");
    for (const auto& e : entries)
      fmt::print("{:<32} {:<8} {:>10} {:<20} {}{}\n", e.name, e.arch, e.bytes, when(e.last_used), e.name_expression,
                 e.problem.empty() ? "" : "  [" + e.problem + "]");
    fmt::print("{} entries in {}\n", entries.size(), settings.dir);
    return kExitOk;
  }
  if (action == "show") {
    if (args.positional.size() < 2) return fail(args, StatusCode::InvalidJson, "rime cache show KEY (an entry name or key prefix)");
    const std::string want = args.positional[1];
    for (const auto& e : disk.list()) {
      if (e.name != want && e.key.rfind(want, 0) != 0) continue;
      if (json_out) {
        fmt::print("{}\n", entry_json(e).dump(2));
      } else {
        fmt::print("entry       {}\npath        {}\nkey         {}\nengine      {}\nkernel      {}\nlowered     {}\n"
                   "arch        {}\ncubin       {} bytes\ncompile     {:.0f} ms\ncreated     {}\nlast used   {}\n"
                   "valid       {}{}\n",
                   e.name, e.path, e.key, e.engine, e.name_expression, e.lowered_name, e.arch, e.cubin_bytes,
                   e.compile_ms, when(e.created), when(e.last_used), e.valid ? "yes" : "no",
                   e.problem.empty() ? "" : " (" + e.problem + ")");
      }
      return kExitOk;
    }
    return fail(args, StatusCode::CacheCorrupt, fmt::format("no cache entry matches '{}'", want));
  }
  if (action == "stats") {
    auto entries = disk.list();
    int64_t bytes = 0, invalid = 0;
    double compile_ms = 0;
    for (const auto& e : entries) {
      bytes += e.bytes;
      invalid += !e.valid;
      compile_ms += e.compile_ms;
    }
    if (json_out) {
      fmt::print("{}\n", nlohmann::json{{"dir", settings.dir}, {"entries", entries.size()}, {"bytes", bytes},
                                        {"max_bytes", settings.max_bytes}, {"invalid", invalid},
                                        {"compile_ms_saved_per_cold_start", compile_ms}}
                             .dump(2));
    } else {
      fmt::print("dir         {}\nentries     {} ({} invalid)\nbytes       {} of {} allowed\ncompile     {:.1f} s of "
                 "NVRTC time held\n",
                 settings.dir, entries.size(), invalid, bytes, settings.max_bytes, compile_ms / 1000);
    }
    return kExitOk;
  }
  if (action == "verify") {
    const size_t total = disk.list().size();
    auto bad = disk.verify();
    if (json_out) {
      nlohmann::json j{{"checked", total}, {"quarantined", nlohmann::json::array()}};
      for (const auto& e : bad) j["quarantined"].push_back(entry_json(e));
      fmt::print("{}\n", j.dump(2));
    } else {
      for (const auto& e : bad) fmt::print("quarantined {}: {} -> {}\n", e.name, e.problem, e.path);
      fmt::print("verified {} entries: {} bad\n", total, bad.size());
    }
    return bad.empty() ? kExitOk : kExitCacheCorrupt;
  }
  if (action == "prune") {
    int64_t max_bytes = settings.max_bytes;
    if (args.flag("max-bytes")) {
      try {
        max_bytes = std::stoll(args.get("max-bytes"));
      } catch (const std::exception&) {
        return fail(args, StatusCode::InvalidJson, fmt::format("--max-bytes '{}' is not an integer", args.get("max-bytes")));
      }
    }
    auto evicted = disk.prune(max_bytes);
    if (json_out) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& e : evicted) j.push_back(entry_json(e));
      fmt::print("{}\n", nlohmann::json{{"evicted", j}}.dump(2));
    } else {
      for (const auto& e : evicted) fmt::print("evicted {} ({} bytes, last used {})\n", e.name, e.bytes, when(e.last_used));
      fmt::print("pruned to at most {} bytes: {} entries evicted\n", max_bytes, evicted.size());
    }
    return kExitOk;
  }
  if (action == "clear") {
    auto n = disk.clear();
    if (json_out) fmt::print("{}\n", nlohmann::json{{"removed", n.value()}}.dump());
    else fmt::print("removed {} entries from {}\n", n.value(), settings.dir);
    return kExitOk;
  }
  if (action == "warm") {
    // Ahead-of-time compile for a fleet: plan each graph for --arch/--sms (default sm_90a, 132 SMs) and compile
    // its kernels into the cache, without a GPU.
    if (args.positional.size() < 2) return fail(args, StatusCode::InvalidJson, "rime cache warm FILE... [--arch ARCH]");
    Args device_args = args;  // warm is for a fleet: the default is the documented H200, never the local GPU
    if (!device_args.flag("arch")) device_args.options["arch"] = "sm_90a";
    Result<DeviceChoice> dev = device_from_args(device_args);
    if (!dev.ok()) return report_failure(dev.status(), args, "cache warm");
    nlohmann::json out = nlohmann::json::array();
    int rc = kExitOk;
    for (size_t i = 1; i < args.positional.size(); ++i) {
      const std::string& file = args.positional[i];
      Result<Graph> g = load_graph_file(file);
      if (!g.ok()) {
        rc = report_failure(g.status(), args, file);
        continue;
      }
      const auto t0 = std::chrono::steady_clock::now();
      Result<Plan> plan = Plan::build(g.value(), PlanOptions{dev->device});
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (!plan.ok()) {
        rc = report_failure(plan.status(), args, file);
        continue;
      }
      for (const KernelInfo& k : plan->kernels()) {
        if (json_out)
          out.push_back({{"file", file}, {"engine", k.engine}, {"kernel", k.name_expression}, {"digest", k.key.substr(0, 16)},
                         {"origin", k.origin}, {"compile_ms", k.compile_ms}, {"arch", k.arch}});
        else
          fmt::print("{}: {} {} digest {} {} ({:.0f} ms{})\n", file, k.arch, k.name_expression, k.key.substr(0, 16),
                     k.origin, k.origin == "compiled" ? k.compile_ms : ms,
                     k.origin == "compiled" ? "" : " to plan");
      }
    }
    if (json_out) fmt::print("{}\n", out.dump(2));
    return rc;
  }
  return fail(args, StatusCode::InvalidJson, fmt::format("unknown cache action '{}'", action));
}

}  // namespace rime::cli
