// rime tune: time every configuration the rows accept for each graph on the GPU and record the fastest
// (include/rime/tune.hpp).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "rime/json.hpp"
#include "rime/tune.hpp"

namespace rime::cli {
namespace {

std::string describe(const TuneCandidate& c) {
  const std::string consumers = c.consumer_warpgroups ? fmt::format(" x{}", c.consumer_warpgroups) : "";
  return fmt::format("{} {}x{}{} split {}", c.row, c.tile.q, c.tile.kv, consumers, c.split_kv);
}

}  // namespace

int cmd_tune(const Options& opts) {
  nlohmann::json out = nlohmann::json::array();
  const int rc = for_each_graph_file(opts, [&](const std::string& file, const Graph& g) {
    TuneOptions t;
    t.iterations = opts.iterations;
    t.record = !opts.no_record;
    t.progress = [&file](const std::string& line) { fmt::print(stderr, "{}: {}\n", file, line); };
    Result<TuneReport> r = tune(g, t);
    if (!r.ok()) return report_failure(r.status(), opts, file);
    const TuneCandidate& w = r->candidates[r->winner];
    const TuneCandidate& h = r->candidates[0];
    if (opts.json) {
      nlohmann::json cands = nlohmann::json::array();
      for (const TuneCandidate& c : r->candidates)
        cands.push_back({{"config", describe(c)}, {"ms", c.ms}, {"heuristic", c.heuristic}, {"error", c.error}});
      out.push_back({{"file", file}, {"device", r->device}, {"winner", describe(w)}, {"winner_ms", r->winner_ms},
                     {"heuristic", describe(h)}, {"heuristic_ms", r->heuristic_ms}, {"recorded", r->recorded},
                     {"key", r->key}, {"candidates", cands}});
      return static_cast<int>(kExitOk);
    }
    fmt::print("{}: {} candidates on {}; fastest {} {:.4f} ms, the heuristics' {} {:.4f} ms ({:.3f}x){}\n", file,
               r->candidates.size(), r->device, describe(w), r->winner_ms, describe(h), r->heuristic_ms,
               r->winner_ms > 0 ? r->heuristic_ms / r->winner_ms : 1.0,
               r->recorded ? fmt::format("; recorded as tuned/{}.json", r->key.substr(0, 16)) : "");
    return static_cast<int>(kExitOk);
  });
  if (opts.json) fmt::print("{}\n", out.dump(2));
  return rc;
}

}  // namespace rime::cli
