// The rime CLI: shared argument parsing, exit codes and output helpers for the subcommands.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "rime/facts.hpp"
#include "rime/graph.hpp"
#include "rime/status.hpp"

namespace rime {
// The embedded default graph (examples/fp8_prefill.json), generated at build time.
extern const char* const kDefaultGraphJson;
}  // namespace rime

namespace rime::cli {

// Documented in docs/cli.md. Scripts rely on these numbers: never renumber.
enum ExitCode : int {
  kExitOk = 0,
  kExitUsage = 1,
  kExitInvalidJson = 2,
  kExitInvalidGraph = 3,
  kExitNotSupported = 4,
  kExitCompileFailed = 5,
  kExitCacheCorrupt = 6,
  kExitCudaError = 7,
  kExitInternal = 8,
  kExitCheckFailed = 9,  // `rime run --check`: results outside the SPEC section 10 tolerances
};
int exit_code_for(StatusCode code);

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> options;  // --name value, or --flag -> ""
  bool flag(const std::string& name) const { return options.count(name) != 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const {
    auto it = options.find(name);
    return it == options.end() ? fallback : it->second;
  }
};

struct OptionSpec {
  std::string name;  // without the dashes
  bool takes_value;
  std::string help;
};

struct Command {
  std::string name;
  std::string synopsis;
  std::string description;
  std::vector<OptionSpec> options;
  int (*run)(const Args& args);
};

// Parses argv after the subcommand name against the command's options; false (with a message) on a bad flag.
bool parse_args(const Command& cmd, int argc, char** argv, Args& out, std::string& error);
void print_command_help(const Command& cmd);

// Loads FILE, or the embedded default graph when no file is given. On failure reports and returns nullopt.
struct LoadedGraph {
  Graph graph;
  std::string source;  // the path, or "<default graph>"
};
Result<LoadedGraph> load_graph_arg(const Args& args, bool validate_graph = true);

// Prints a failed status in the requested form and returns its exit code.
int report_failure(const Status& status, const Args& args, const std::string& source);

// The device to plan for: --arch/--sms when given, else the GPU when there is one, else the H200 defaults.
struct DeviceChoice {
  DeviceDesc device;
  std::string source;  // how it was chosen, for --explain
  bool has_gpu = false;
};
Result<DeviceChoice> device_from_args(const Args& args);

int cmd_validate(const Args& args);
int cmd_plan(const Args& args);
int cmd_run(const Args& args);
int cmd_cache(const Args& args);
int cmd_show(const Args& args);

}  // namespace rime::cli
