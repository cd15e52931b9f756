// rime cache: inspect and maintain the on-disk plan cache (docs/cache.md).
#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

#include "cache/disk_cache.hpp"
#include "cache/settings.hpp"
#include "cli/cli.hpp"
#include "plan/tuned.hpp"
#include "rime/cache.hpp"
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

// A name or key of the cache, printed safely (a foreign name may hold any byte).
std::string shown(const std::string& s) { return nlohmann::json(s).dump(2, ' ', false, nlohmann::json::error_handler_t::replace); }

int fail(const Options& opts, StatusCode code, const std::string& message) {
  return report_failure(Status(code, message), opts, "cache");
}

// One line of `cache ls` for a tuned choice.
std::string tuned_line(const cache::DiskCache::TunedFile& t) {
  const Result<tuned::Choice> c = tuned::from_json(t.text);
  if (!c.ok()) return fmt::format("tuned/{:<27} [not a tuned choice: {}]", t.name, c.status().to_string());
  return fmt::format("tuned/{:<27} {} on {} (driver {}): {} {:.4f} ms, the heuristics' {} {:.4f} ms", t.name,
                     shown(c->graph_name), c->device, c->driver_version, tuned::describe(c->decision), c->ms,
                     tuned::describe(c->heuristic), c->heuristic_ms);
}

int print_json(const nlohmann::json& j) {
  fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  return kExitOk;
}

// `--json`: the report rime/cache.hpp makes (the one rime.cache returns), indented.
int print_report(const Result<std::string>& report, const Options& opts, const std::string& source = "cache",
                 int exit_code = kExitOk) {
  if (!report.ok()) return report_failure(report.status(), opts, source);
  print_json(nlohmann::json::parse(report.value()));
  return exit_code;
}

int warm(const Options& opts) {
  // Ahead-of-time compile for a fleet: plan each graph for --arch/--sms (default sm_90a, 132 SMs: the documented
  // H200, never the local GPU) and compile its kernels into the cache, without a GPU.
  Options device_opts = opts;
  if (!device_opts.arch) device_opts.arch = "sm_90a";
  if (!device_opts.sms) device_opts.sms = 132;
  Result<DeviceChoice> dev = choose_device(device_opts);
  if (!dev.ok()) return report_failure(dev.status(), opts, "cache warm");
  nlohmann::json out = nlohmann::json::array();
  const int rc = for_each_graph_file(opts, [&](const std::string& file, const Graph& g) {
    const auto t0 = std::chrono::steady_clock::now();
    Result<Plan> plan = Plan::build(g, PlanOptions{dev->device});
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!plan.ok()) return report_failure(plan.status(), opts, file);
    for (const KernelInfo& k : plan->kernels()) {
      if (opts.json)
        out.push_back({{"file", file}, {"engine", k.engine}, {"kernel", k.name_expression}, {"digest", k.key.substr(0, 16)},
                       {"origin", k.origin}, {"compile_ms", k.compile_ms}, {"arch", k.arch}});
      else
        fmt::print("{}: {} {} digest {} {} ({:.0f} ms{})\n", file, k.arch, k.name_expression, k.key.substr(0, 16),
                   k.origin, k.origin == "compiled" ? k.compile_ms : ms, k.origin == "compiled" ? "" : " to plan");
    }
    return static_cast<int>(kExitOk);
  });
  if (opts.json) print_json(out);
  return rc;
}

}  // namespace

int cmd_cache(const std::string& action, const Options& opts) {
  if (action == "warm") return warm(opts);
  const cache::Settings settings = cache::resolve_settings();
  if (!settings.cache) return fail(opts, StatusCode::CacheCorrupt, "no usable cache directory: " + settings.disabled_why);
  const cache::DiskCache& disk = *settings.cache;

  if (action == "ls") {
    if (opts.json) return print_report(cache_report::list(), opts);
    const auto entries = disk.list();
    const auto tuned = disk.list_tuned();
    fmt::print("{:<32} {:<8} {:>10} {:<20} {}\n", "entry", "arch", "bytes", "last used (UTC)", "kernel");
    int foreign = 0;
    for (const auto& e : entries) {
      if (e.kind == cache::EntryKind::Foreign) {
        ++foreign;
        continue;
      }
      fmt::print("{:<32} {:<8} {:>10} {:<20} {}{}\n", e.name, e.arch, e.bytes, when(e.last_used), e.name_expression,
                 e.problem.empty() ? "" : "  [" + e.problem + "]");
    }
    for (const auto& e : entries)
      if (e.kind == cache::EntryKind::Foreign) fmt::print("foreign {} ({}): left alone\n", shown(e.name), e.problem);
    for (const auto& t : tuned) fmt::print("{}\n", tuned_line(t));
    fmt::print("{} entries, {} foreign names, {} tuned choices in {}\n", entries.size() - foreign, foreign, tuned.size(),
               settings.dir);
    return kExitOk;
  }
  if (action == "show") {
    if (opts.json) return print_report(cache_report::show(opts.key), opts);
    for (const auto& t : disk.list_tuned()) {
      if (t.name != opts.key && "tuned/" + t.name != opts.key) continue;
      fmt::print("{}\npath        {}\n{}", tuned_line(t), t.path, t.text);
      return kExitOk;
    }
    Result<cache::EntryInfo> found = disk.find(opts.key);
    if (!found.ok()) return report_failure(found.status(), opts, "cache");
    const cache::EntryInfo& e = found.value();
    fmt::print("entry       {}\npath        {}\nkey         {}\nengine      {}\nkernel      {}\nlowered     {}\n"
               "arch        {}\ncubin       {} bytes\ncompile     {:.0f} ms\ncreated     {}\nlast used   {}\n"
               "valid       {}{}\n",
               e.name, e.path, e.key, e.engine, e.name_expression, e.lowered_name, e.arch, e.cubin_bytes, e.compile_ms,
               when(e.created), when(e.last_used), e.valid ? "yes" : "no", e.problem.empty() ? "" : " (" + e.problem + ")");
    return kExitOk;
  }
  if (action == "stats") {
    if (opts.json) return print_report(cache_report::stats(), opts);
    const cache::DiskCache::Stats st = disk.stats();
    fmt::print("dir         {}\nentries     {} ({} invalid), {} foreign names\nbytes       {} of {} allowed\n"
               "compile     {:.1f} s of NVRTC time held\n",
               settings.dir, st.entries, st.invalid, st.foreign, st.bytes, settings.max_bytes, st.compile_ms / 1000);
    return kExitOk;
  }
  if (action == "verify") {
    // One verification, the report's (rime/cache.hpp), printed as JSON or as lines.
    bool clean = false;
    const Result<std::string> report = cache_report::verify(&clean);
    const int exit_code = clean ? kExitOk : kExitCacheCorrupt;
    if (opts.json || !report.ok()) return print_report(report, opts, "cache", exit_code);
    const nlohmann::json j = nlohmann::json::parse(report.value());
    size_t blocking = 0;
    for (const auto& e : j["quarantined"])
      fmt::print("quarantined {}: {} -> {}\n", e["name"].get<std::string>(), e["problem"].get<std::string>(),
                 e["path"].get<std::string>());
    for (const auto& e : j["foreign"]) {
      const std::string name = shown(e["name"].get<std::string>()), problem = e["problem"].get<std::string>();
      if (e["blocks_entry"].get<bool>()) {
        ++blocking;
        fmt::print("foreign {} ({}) holds an entry's name: that kernel is never cached on disk and every process "
                   "compiles it again. rime removes only what it wrote; to remove it: {}\n",
                   name, problem, e["remove_with"].get<std::string>());
      } else {
        fmt::print("foreign {} ({}): not rime's, left alone\n", name, problem);
      }
    }
    fmt::print("verified {} entries: {} bad; {} foreign names, {} holding an entry's name\n", j["checked"].get<int64_t>(),
               j["quarantined"].size(), j["foreign"].size(), blocking);
    return exit_code;
  }
  if (action == "prune") {
    if (opts.json) return print_report(cache_report::prune(opts.max_bytes), opts);
    const int64_t max_bytes = opts.max_bytes.value_or(settings.max_bytes);
    const auto evicted = disk.prune(max_bytes);
    for (const auto& e : evicted) fmt::print("evicted {} ({} bytes, last used {})\n", e.name, e.bytes, when(e.last_used));
    fmt::print("pruned to at most {} bytes: {} entries evicted\n", max_bytes, evicted.size());
    return kExitOk;
  }
  if (opts.json && action == "clear") return print_report(cache_report::clear(opts.tuned), opts, opts.tuned ? "cache clear --tuned" : "cache clear");
  if (action == "clear" && opts.tuned) {
    auto n = disk.clear_tuned();
    if (!n.ok()) return report_failure(n.status(), opts, "cache clear --tuned");
    fmt::print("removed {} tuned choices from {}/tuned (kernels stay)\n", n.value(), settings.dir);
    return kExitOk;
  }
  if (action == "clear") {
    auto n = disk.clear();
    if (!n.ok()) return report_failure(n.status(), opts, "cache clear");
    fmt::print("removed {} entries from {} (foreign names and live writers' temp directories stay)\n", n.value(),
               settings.dir);
    return kExitOk;
  }
  return fail(opts, StatusCode::InvalidArgument, fmt::format("unknown cache action {}", shown(action)));
}

}  // namespace rime::cli
