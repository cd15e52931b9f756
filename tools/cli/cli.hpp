// The rime CLI: one CLI11 parser for every command (main.cpp), exit codes, and the helpers the commands share.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rime/inspect/config.hpp"
#include "rime/device.hpp"
#include "rime/graph.hpp"
#include "rime/plan.hpp"
#include "rime/status.hpp"

namespace rime {
// The embedded default graph (examples/fp8_prefill.json), generated at build time.
extern const char* const kDefaultGraphJson;
}  // namespace rime

namespace rime::cli {

// Documented in docs/cli.md. Scripts rely on these numbers: never renumber.
enum ExitCode : int {
  kExitOk = 0,
  kExitUsage = 1,  // bad command line, and InvalidArgument (a value the library refused)
  kExitInvalidJson = 2,
  kExitInvalidGraph = 3,
  kExitNotSupported = 4,
  kExitCompileFailed = 5,
  kExitCacheCorrupt = 6,
  kExitCudaError = 7,
  kExitInternal = 8,
  kExitCheckFailed = 9,  // `rime run`: results outside the SPEC section 10 tolerances
};
int exit_code_for(StatusCode code);

// run --ranks N: the rank a launched process is, with the NCCL unique id its parent made (256 hex digits).
struct LaunchedRank {
  int rank = 0, world = 1;
  std::string id_hex;
};

// Options every command may have; each command's parser fills what it declares.
struct Options {
  std::vector<std::string> argv;  // the command line, for run --ranks to start its ranks with
  std::string file;  // empty: the embedded default graph
  bool json = false;
  bool explain = false;
  std::optional<std::string> arch;
  std::optional<int> sms;
  // run
  std::optional<int> split;
  uint64_t seed = 1;
  bool no_check = false;
  bool check_indices = false;  // run --check-indices
  bool bench = false;
  int iterations = 20;
  std::string inputs_dir, save_dir;
  std::optional<std::pair<int64_t, int64_t>> kv_lengths;  // --kv-lengths LO:HI
  std::optional<std::pair<int64_t, int64_t>> seq_lengths;  // --seq-lengths LO:HI
  bool uniform_descales = false;                           // run --uniform-descales
  bool no_tuned = false;  // plan / run --no-tuned: the heuristics' choice even where `rime tune` recorded one
  int ranks = 0;                        // run --ranks N: one process per GPU (ranks_command.cpp)
  std::optional<LaunchedRank> launched;  // run --launched-rank R:N:ID: one of those processes
  // tune
  bool no_record = false;
  // cache
  bool tuned = false;              // cache clear --tuned
  std::string key;                 // cache show
  std::optional<int64_t> max_bytes;  // cache prune
  std::vector<std::string> files;  // cache warm
};

// The graph named by opts.file, or the embedded default graph. Parsed only: analyze() (or validate()) is the
// one validation of a command.
struct LoadedGraph {
  Graph graph;
  std::string source;  // the path, or "<default graph>"
};
Result<LoadedGraph> load_graph(const Options& opts);
std::string source_of(const Options& opts);
// Each of opts.files parsed and handed to fn(file, graph), which returns an exit code; a file that does not parse is
// reported and the others still run. The last failure's exit code, or kExitOk (`rime tune`, `rime cache warm`).
int for_each_graph_file(const Options& opts, const std::function<int(const std::string&, const Graph&)>& fn);

// Prints a failed status in the requested form and returns its exit code.
int report_failure(const Status& status, const Options& opts, const std::string& source);

// The device to plan for: the GPU when there is one, else an H200 (sm_90a, 132 SMs); --arch and --sms
// override its arch and SM count (planning for another device than the one present).
struct DeviceChoice {
  DeviceDesc device;
  std::string source;  // how it was chosen, for --explain
  bool has_gpu = false;
  bool overridden = false;  // --arch or --sms given
  std::string no_gpu_why;   // without a GPU: the driver's reason
};
Result<DeviceChoice> choose_device(const Options& opts);
// The PlanOptions of a device choice: the described device where there is no GPU or --arch / --sms describe
// another, else none (the library queries the GPU, whose tuned choices then apply).
PlanOptions plan_options(const DeviceChoice& dev, bool use_tuned);


int cmd_validate(const Options& opts);
int cmd_show(const Options& opts);
int cmd_plan(const Options& opts);
int cmd_run(const Options& opts);
// run --ranks N (or one launched rank) on `graph`, the file's graph with --split applied.
int cmd_run_ranks(const Options& opts, const Graph& graph);
int cmd_cache(const std::string& action, const Options& opts);
int cmd_tune(const Options& opts);

}  // namespace rime::cli
