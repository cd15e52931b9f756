// Internal: the explanation of a plan (`rime plan --explain`, Plan::explain, rime::explain), from one place.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "rime/device.hpp"
#include "rime/graph.hpp"
#include "rime/inspect/config.hpp"
#include "rime/inspect/facts.hpp"
#include "rime/inspect/rows.hpp"
#include "rime/plan.hpp"

namespace rime {

// What an explanation is made of: the graph, its facts, every row's verdict and the configuration when a row
// serves it (nullptr when none does), and where the device came from.
struct ExplanationParts {
  const Graph& graph;
  const Facts& facts;
  const std::vector<RowVerdict>& verdicts;
  const Config* config;
  std::string device_source;
  std::string tuned;  // the tuned choice's line (src/plan/tuned.hpp, Lookup::line), empty when none is recorded
};
// The text `rime plan --explain` prints.
std::string explanation_text(const ExplanationParts& parts);
// The same as JSON fields (`rime plan --json`): graph, device_source, facts, rows, decision, derived.
nlohmann::json explanation_json(const ExplanationParts& parts);
// Both, as the public Explanation (served when parts.config is set; `decline` is the caller's to fill).
Explanation explanation_of(const ExplanationParts& parts);

// The device a plan is made for, and where it came from: PlanOptions::device, else the GPU
// PlanOptions::device_ordinal names, else the current GPU, else the H200 defaults (src/plan/plan.cpp; Plan::build
// and rime::explain agree through it). An error only for a device_ordinal that names no GPU.
struct DeviceResolution {
  DeviceDesc device;
  std::string source;
  bool queried = false;  // a GPU's (its driver's version keys tuned choices), not described or defaulted
};
Result<DeviceResolution> resolve_device(const PlanOptions& options);

}  // namespace rime
