// rime: compile attention graphs into cached GPU plans. See docs/cli.md.
#include <fmt/format.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "rime/json.hpp"
#include "rime/version.hpp"

namespace rime::cli {
namespace {

const OptionSpec kJsonOption{"json", false, "print machine-readable JSON instead of text"};
const OptionSpec kExplainOption{"explain", false, "print facts, every row's verdict, the heuristic's scores"};
const OptionSpec kArchOption{"arch", true, "plan for this arch (sm_90a, sm_89, ...) instead of the GPU's"};
const OptionSpec kSmsOption{"sms", true, "SM count to plan for (default 132 with --arch)"};

const std::vector<Command>& commands() {
  static const std::vector<Command> kCommands = {
      {"validate", "rime validate [FILE] [--json]",
       "Parse and validate a graph file (the embedded default graph when FILE is omitted). Prints the graph "
       "hash, or the error with the JSON pointer of the offending field.",
       {kJsonOption}, cmd_validate},
      {"plan", "rime plan [FILE] [--explain] [--json] [--arch ARCH --sms N]",
       "Analyze the graph, match every capability row and choose a configuration. --explain prints the facts, "
       "every row's verdict, the split-KV candidates with their costs and the choice. The device is the GPU when "
       "there is one, else --arch/--sms, else an H200 (sm_90a, 132 SMs).",
       {kJsonOption, kExplainOption, kArchOption, kSmsOption}, cmd_plan},
      {"run", "rime run [FILE] [--split N] [--no-check] [--bench] [--explain] [--json] [--arch ARCH --sms N]",
       "Plan and compile the graph; on a GPU, execute it with fresh random inputs (poisoned outputs) and check every "
       "output against the CPU reference (SPEC section 10; large shapes are checked on a sample of rows). Without a "
       "GPU it plans, compiles and says that execution was skipped. --bench times the plan (median of CUDA events "
       "after warm-up).",
       {kJsonOption, kExplainOption, kArchOption, kSmsOption, {"split", true, "pin the split-KV count"},
        {"seed", true, "seed of the random inputs (default 1)"}, {"no-check", false, "skip the reference check"},
        {"bench", false, "time the plan"}, {"iterations", true, "timed runs with --bench (default 20)"}},
       cmd_run},
      {"cache", "rime cache ls|show KEY|stats|verify|prune [--max-bytes N]|clear|warm FILE... [--arch ARCH] [--json]",
       "Inspect and maintain the plan cache ($RIME_CACHE_DIR, else $XDG_CACHE_HOME/rime, else ~/.cache/rime). "
       "verify recomputes every checksum and moves bad entries to quarantine/ (exit 6 when any); prune evicts "
       "least-recently-used entries down to --max-bytes; warm compiles the plans of graph files ahead of time for "
       "--arch (default sm_90a), without a GPU.",
       {kJsonOption, kArchOption, kSmsOption, {"max-bytes", true, "size to prune down to"}}, cmd_cache},
      {"show", "rime show [FILE] [--json]",
       "Print a graph: its tensors, op, attributes and hash. --json prints the canonical JSON form.",
       {kJsonOption}, cmd_show},
  };
  return kCommands;
}

void print_usage() {
  fmt::print(
      "rime {}: compiles scaled-dot-product-attention graphs into cached GPU plans.\n\n"
      "usage: rime <command> [FILE] [options]      (FILE omitted: the embedded default graph)\n"
      "       rime <command> --help\n\ncommands:\n",
      kVersion);
  for (const Command& c : commands()) fmt::print("  {:<10} {}\n", c.name, c.synopsis);
  fmt::print("\nWith no command, rime runs its main job on the embedded default graph: validate, plan --explain,\ncompile through the plan cache, and on a GPU execute and check against the CPU reference.\n"
             "Exit codes: 0 ok, 1 usage, 2 InvalidJson, 3 InvalidGraph, 4 NotSupported, 5 CompileFailed,\n"
             "6 CacheCorrupt, 7 CudaError, 8 Internal, 9 check failed (docs/cli.md).\n");
}

}  // namespace

int exit_code_for(StatusCode code) {
  switch (code) {
    case StatusCode::Ok: return kExitOk;
    case StatusCode::InvalidJson: return kExitInvalidJson;
    case StatusCode::InvalidGraph: return kExitInvalidGraph;
    case StatusCode::NotSupported: return kExitNotSupported;
    case StatusCode::CompileFailed: return kExitCompileFailed;
    case StatusCode::CacheCorrupt: return kExitCacheCorrupt;
    case StatusCode::CudaError: return kExitCudaError;
    case StatusCode::Internal: return kExitInternal;
    case StatusCode::InvalidArgument: return kExitUsage;
  }
  return kExitInternal;
}

bool parse_args(const Command& cmd, int argc, char** argv, Args& out, std::string& error) {
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || a == "--") {
      out.positional.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    auto eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (name == "help") {
      out.options["help"] = "";
      continue;
    }
    const OptionSpec* spec = nullptr;
    for (const OptionSpec& o : cmd.options)
      if (o.name == name) spec = &o;
    if (!spec) {
      error = fmt::format("rime {}: unknown option --{}", cmd.name, name);
      return false;
    }
    if (spec->takes_value && eq == std::string::npos) {
      if (i + 1 >= argc) {
        error = fmt::format("rime {}: --{} needs a value", cmd.name, name);
        return false;
      }
      value = argv[++i];
    } else if (!spec->takes_value && eq != std::string::npos) {
      error = fmt::format("rime {}: --{} takes no value", cmd.name, name);
      return false;
    }
    out.options[name] = value;
  }
  return true;
}

void print_command_help(const Command& cmd) {
  fmt::print("usage: {}\n\n{}\n\noptions:\n", cmd.synopsis, cmd.description);
  for (const OptionSpec& o : cmd.options)
    fmt::print("  --{:<18} {}\n", o.name + (o.takes_value ? " VALUE" : ""), o.help);
  fmt::print("  --{:<18} {}\n", "help", "show this help");
}

Result<LoadedGraph> load_graph_arg(const Args& args, bool validate_graph) {
  if (args.positional.size() > 1)
    return Status(StatusCode::InvalidJson, fmt::format("expected one graph file, got {}", args.positional.size()));
  LoadedGraph out;
  Result<Graph> g = Status(StatusCode::Internal, "unset");
  if (args.positional.empty()) {
    out.source = "<default graph>";
    g = validate_graph ? graph_from_json(kDefaultGraphJson) : parse_graph_json(kDefaultGraphJson);
  } else {
    out.source = args.positional[0];
    g = load_graph_file(out.source, validate_graph);
  }
  if (!g.ok()) return g.status();
  out.graph = std::move(g).value();
  return out;
}

int report_failure(const Status& status, const Args& args, const std::string& source) {
  if (args.flag("json")) {
    nlohmann::json j{{"ok", false},
                     {"source", source},
                     {"code", to_string(status.code())},
                     {"location", status.location()},
                     {"message", status.message()}};
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print(stderr, "rime: {}: {}\n", source, status.to_string());
  }
  return exit_code_for(status.code());
}

}  // namespace rime::cli

int main(int argc, char** argv) {
  using namespace rime::cli;
  try {
    if (argc < 2) {
      // The main job on the embedded default graph: validate, explain the plan, compile (through the cache), and
      // on a GPU execute and check against the reference.
      Args args;
      int rc = cmd_validate(args);
      if (rc != kExitOk) return rc;
      args.options["explain"] = "";
      return cmd_run(args);
    }
    std::string name = argv[1];
    if (name == "--help" || name == "-h" || name == "help") {
      print_usage();
      return kExitOk;
    }
    if (name == "--version") {
      fmt::print("rime {}\n", rime::kVersion);
      return kExitOk;
    }
    for (const Command& cmd : commands()) {
      if (cmd.name != name) continue;
      Args args;
      std::string error;
      if (!parse_args(cmd, argc - 2, argv + 2, args, error)) {
        fmt::print(stderr, "{}\n(see rime {} --help)\n", error, cmd.name);
        return kExitUsage;
      }
      if (args.flag("help")) {
        print_command_help(cmd);
        return kExitOk;
      }
      return cmd.run(args);
    }
    fmt::print(stderr, "rime: unknown command '{}'\n\n", name);
    print_usage();
    return kExitUsage;
  } catch (const std::exception& e) {
    // The library never throws; this guards the CLI's own code (formatting, allocation).
    fmt::print(stderr, "rime: internal error: {}\n", e.what());
    return kExitInternal;
  }
}
