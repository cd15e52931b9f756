// Tuning (`rime tune`): time every configuration the capability rows accept for a graph on this GPU and record the
// fastest in the plan cache, keyed by the graph's shape class, the GPU, its driver and this rime version, so that
// later plans of the same shape class on the same setup use it (PlanOptions::use_tuned).
//
//   rime::Result<rime::TuneReport> r = rime::tune(graph);        // times the candidates, records the winner
//   rime::Result<rime::Plan> plan = rime::Plan::build(graph);    // uses it; plan->explain() says so
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "rime/graph.hpp"
#include "rime/inspect/config.hpp"
#include "rime/status.hpp"

namespace rime {

struct TuneOptions {
  // The GPU to tune on (a CUDA ordinal); absent: the current context's GPU, else GPU 0. Tuning needs a GPU.
  std::optional<int> device_ordinal;
  // Timed executes per candidate after two warm-up ones; the median is the candidate's time.
  int iterations = 20;
  // Record the fastest candidate in the plan cache (false: only time and report).
  bool record = true;
  // Called before each candidate is timed with a line ("[3/12] sdpa_sm90_fp8 64x128 x1 split 16"), and after with
  // its time; for progress output.
  std::function<void(const std::string&)> progress;
};

struct TuneCandidate {
  Decision decision;  // row, tile, consumer warpgroups, split (the heuristics' own with its reasons)
  double ms = 0;      // median time of one execute; 0 when it failed
  std::string error;  // why it could not be built or run (it is then not a winner)
};

struct TuneReport {
  std::vector<TuneCandidate> candidates;  // in the order timed; candidates[0] is the heuristics' choice
  size_t winner = 0;                      // index of the fastest
  std::string device;                     // the GPU's name
  std::string key;                        // the tuning key (sha256 hex) the choice is recorded under
  bool recorded = false;
};

// The inputs are made for timing only, in device memory tune() allocates and frees: Q, K and V of magnitudes
// 1/8 .. 4 with random signs and mantissas, scales 1, every per-sequence length the graph's maximum (so a paged or
// ragged graph is tuned for full sequences), page tables addressing distinct pages. InvalidArgument for a graph
// that pins split_kv or tile (nothing to tune), CudaError without a GPU.
Result<TuneReport> tune(const Graph& graph, const TuneOptions& options = {});

// Removes every tuned choice from the plan cache; returns how many.
Result<int> clear_tuned();

// A decision in one line, as `rime tune` and `rime cache ls` print it: "sdpa_sm90_fp8 64x128 x1 split 16" (the
// consumer warpgroups left out for engines without them).
std::string describe_decision(const Decision& decision);

// A recorded choice's document (a tuned/<key16>.json file of the plan cache, whose text rime::cache_report's list
// and show hold under "tuned") in one line: the graph, the GPU and driver it was timed on, the winner and its time,
// the heuristics' choice and its time. InvalidJson (or CacheCorrupt for another format) when it is not one.
Result<std::string> describe_tuned_choice(const std::string& json);

}  // namespace rime
