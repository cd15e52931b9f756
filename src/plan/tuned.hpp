// Internal: tuned choices in the plan cache (include/rime/tune.hpp). A choice is recorded under a key of the graph's
// shape class (its canonical JSON without its name, the op's name and the knobs), the device (name, SMs, arch), the
// driver version and the rime version, so that another GPU, driver or rime never reads it. Plan::build and
// rime::explain look it up (PlanOptions::use_tuned) and use it only where derive() accepts it, as any decision.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "rime/device.hpp"
#include "rime/graph.hpp"
#include "rime/inspect/config.hpp"
#include "rime/inspect/facts.hpp"
#include "rime/inspect/rows.hpp"
#include "rime/status.hpp"
#include "rime/tune.hpp"

namespace rime::tuned {

struct Choice {
  std::string key;              // what it is recorded under (key() below)
  Decision decision;            // row, tile, consumer warpgroups, split
  double ms = 0;                // its median time when tuned
  Decision heuristic;           // the heuristics' choice then, and its time
  double heuristic_ms = 0;
  int candidates = 0, iterations = 0;
  std::string graph_name, shape_class, device;
  int sm_count = 0, driver_version = 0;
  std::string arch;
  int64_t created = 0;  // unix seconds
};

// sha256 hex of the graph's canonical JSON without its name, the op's name and the op's knobs.
std::string shape_class(const Graph& graph);
// The key a choice is recorded under; driver_version 0 for a device described rather than queried.
std::string key(const std::string& shape_class, const DeviceDesc& device, int driver_version);
// The CUDA driver's version (cuDriverGetVersion), 0 without a driver.
int driver_version();

// The document of a tuned choice (decisions as plan artifacts write them, src/plan/facts_json.hpp), and back; an
// error naming the pointer for a document that is not one.
nlohmann::json to_json(const Choice& c);
Result<Choice> from_json(const std::string& text);
// "sdpa_sm90_fp8 64x128 x1 split 16" (consumers left out for engines without them).
std::string describe(const Decision& d);
// The index of the fastest candidate that ran (a failed one has no time: ms 0 and an error); 0, the heuristics'
// own, on ties and when no other ran.
size_t fastest(const std::vector<TuneCandidate>& candidates);

// Records (replacing) the choice under choice.key in the plan cache; InvalidArgument when the disk cache is disabled,
// CacheCorrupt when it cannot be written.
Status record(const Choice& choice);
// The choice recorded under `key`; a missing, bad or misfiled document is a miss.
std::optional<Choice> find(const std::string& key);

// The configuration a tuned choice gives the facts, with the explanation's line about it: a config when one is
// recorded for (graph, device) and the rows accept it; no config, and a line saying why, when one is recorded and
// declined; neither when none is recorded (or the graph pins a knob).
struct Lookup {
  std::optional<Config> config;
  std::string line;
};
Lookup lookup(const Graph& graph, const Facts& facts, bool device_queried);

// The configuration for the facts: the tuned choice where one is recorded, the rows accept it and `use_tuned`, else
// choose()'s. `tuned_line` gets the explanation's line about a recorded choice (used or declined). Plan::build,
// rime::explain and `rime plan` choose through it.
Result<Config> choose(const Graph& graph, const Facts& facts, const std::vector<RowVerdict>& verdicts, bool use_tuned,
                      bool device_queried, std::string& tuned_line);

// Removes every tuned choice; 0 when the disk cache is not in use.
Result<int> clear();

}  // namespace rime::tuned
