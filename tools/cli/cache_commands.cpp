// rime cache: inspect and maintain the on-disk plan cache (docs/cache.md).
#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "rime/cache.hpp"
#include "rime/json.hpp"
#include "rime/plan.hpp"
#include "rime/tune.hpp"

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

// One line of `cache ls` for a tuned choice (an item of the list report: kind "tuned").
std::string tuned_line(const nlohmann::json& t) {
  const std::string name = t["name"].get<std::string>();
  if (!t.contains("tuned")) return fmt::format("{:<33} [{}]", name, t.value("problem", "not a tuned choice"));
  const Result<std::string> line = describe_tuned_choice(t["tuned"].dump());
  if (!line.ok()) return fmt::format("{:<33} [not a tuned choice: {}]", name, line.status().to_string());
  return fmt::format("{:<33} {}", name, line.value());
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
  // Every action is one of the reports of rime/cache.hpp (the ones rime.cache returns): --json prints it, the text
  // form prints its lines.
  const bool tuned_clear = action == "clear" && opts.tuned;
  const std::string what = tuned_clear ? "cache clear --tuned" : action == "clear" ? "cache clear" : "cache";
  Result<std::string> report = Status(StatusCode::InvalidArgument, fmt::format("unknown cache action {}", shown(action)));
  bool clean = false;
  if (action == "ls") report = cache_report::list();
  else if (action == "show") report = cache_report::show(opts.key);
  else if (action == "stats") report = cache_report::stats();
  else if (action == "verify") report = cache_report::verify(&clean);
  else if (action == "prune") report = cache_report::prune(opts.max_bytes);
  else if (action == "clear") report = cache_report::clear(opts.tuned);
  const int exit_code = action != "verify" || clean ? kExitOk : kExitCacheCorrupt;
  if (opts.json || !report.ok()) return print_report(report, opts, what, exit_code);
  const nlohmann::json j = nlohmann::json::parse(report.value());
  const std::string dir = cache_dir();

  if (action == "ls") {
    fmt::print("{:<32} {:<8} {:>10} {:<20} {}\n", "entry", "arch", "bytes", "last used (UTC)", "kernel");
    int entries = 0, foreign = 0, tuned = 0;
    for (const auto& e : j) {
      const std::string kind = e["kind"].get<std::string>();
      if (kind == "foreign" || kind == "tuned") continue;
      ++entries;
      const std::string problem = e["problem"].get<std::string>();
      fmt::print("{:<32} {:<8} {:>10} {:<20} {}{}\n", e["name"].get<std::string>(), e["arch"].get<std::string>(),
                 e["bytes"].get<int64_t>(), when(e["last_used"].get<int64_t>()), e["kernel"].get<std::string>(),
                 problem.empty() ? "" : "  [" + problem + "]");
    }
    for (const auto& e : j)
      if (e["kind"] == "foreign") {
        ++foreign;
        fmt::print("foreign {} ({}): left alone\n", shown(e["name"].get<std::string>()), e["problem"].get<std::string>());
      }
    for (const auto& e : j)
      if (e["kind"] == "tuned") {
        ++tuned;
        fmt::print("{}\n", tuned_line(e));
      }
    fmt::print("{} entries, {} foreign names, {} tuned choices in {}\n", entries, foreign, tuned, dir);
    return kExitOk;
  }
  if (action == "show") {
    if (j["kind"] == "tuned") {
      fmt::print("{}\npath        {}\n{}\n", tuned_line(j), j["path"].get<std::string>(),
                 j.contains("tuned") ? j["tuned"].dump(2) : "");
      return kExitOk;
    }
    const std::string problem = j["problem"].get<std::string>();
    fmt::print("entry       {}\npath        {}\nkey         {}\nengine      {}\nkernel      {}\nlowered     {}\n"
               "arch        {}\ncubin       {} bytes\ncompile     {:.0f} ms\ncreated     {}\nlast used   {}\n"
               "valid       {}{}\n",
               j["name"].get<std::string>(), j["path"].get<std::string>(), j["key"].get<std::string>(),
               j["engine"].get<std::string>(), j["kernel"].get<std::string>(), j["lowered_name"].get<std::string>(),
               j["arch"].get<std::string>(), j["cubin_bytes"].get<int64_t>(), j["compile_ms"].get<double>(),
               when(j["created"].get<int64_t>()), when(j["last_used"].get<int64_t>()),
               j["valid"].get<bool>() ? "yes" : "no", problem.empty() ? "" : " (" + problem + ")");
    return kExitOk;
  }
  if (action == "stats") {
    fmt::print("dir         {}\nentries     {} ({} invalid), {} foreign names\nbytes       {} of {} allowed\n"
               "compile     {:.1f} s of NVRTC time held\n",
               j["dir"].get<std::string>(), j["entries"].get<int64_t>(), j["invalid"].get<int64_t>(),
               j["foreign"].get<int64_t>(), j["bytes"].get<int64_t>(), j["max_bytes"].get<int64_t>(),
               j["compile_ms_saved_per_cold_start"].get<double>() / 1000);
    return kExitOk;
  }
  if (action == "verify") {
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
    for (const auto& e : j["evicted"])
      fmt::print("evicted {} ({} bytes, last used {})\n", e["name"].get<std::string>(), e["bytes"].get<int64_t>(),
                 when(e["last_used"].get<int64_t>()));
    fmt::print("pruned to at most {} bytes: {} entries evicted\n", j["max_bytes"].get<int64_t>(), j["evicted"].size());
    return kExitOk;
  }
  if (tuned_clear) {
    fmt::print("removed {} tuned choices from {}/tuned (kernels stay)\n", j["removed_tuned"].get<int64_t>(), dir);
    return kExitOk;
  }
  fmt::print("removed {} entries from {} (foreign names and live writers' temp directories stay)\n",
             j["removed"].get<int64_t>(), dir);
  return kExitOk;
}

}  // namespace rime::cli
