// rime tune: time every configuration the rows accept for each graph on the GPU and record the fastest
// (include/rime/tune.hpp).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "rime/json.hpp"
#include "rime/tune.hpp"

namespace rime::cli {

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
        cands.push_back({{"config", describe_decision(c.decision)}, {"ms", c.ms}, {"error", c.error}});
      out.push_back({{"file", file}, {"device", r->device}, {"winner", describe_decision(w.decision)},
                     {"winner_ms", w.ms}, {"heuristic", describe_decision(h.decision)}, {"heuristic_ms", h.ms},
                     {"recorded", r->recorded}, {"key", r->key}, {"candidates", cands}});
      return static_cast<int>(kExitOk);
    }
    fmt::print("{}: {} candidates on {}; fastest {} {:.4f} ms, the heuristics' {} {:.4f} ms ({:.3f}x){}\n", file,
               r->candidates.size(), r->device, describe_decision(w.decision), w.ms, describe_decision(h.decision), h.ms,
               w.ms > 0 ? h.ms / w.ms : 1.0,
               r->recorded ? fmt::format("; recorded as tuned/{}.json", r->key.substr(0, 16)) : "");
    return static_cast<int>(kExitOk);
  });
  if (opts.json) fmt::print("{}\n", out.dump(2));
  return rc;
}

}  // namespace rime::cli
