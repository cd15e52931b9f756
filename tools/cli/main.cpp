// rime: compile attention graphs into cached GPU plans. See docs/cli.md. One CLI11 parser declares every
// command's options with their types and ranges: a bad value is a usage error (exit 1) before anything runs.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "rime/cache.hpp"
#include "rime/json.hpp"
#include "rime/version.hpp"

namespace rime::cli {
namespace {

const char* const kCommands[] = {"validate", "show", "plan", "run", "tune", "cache"};
const char* const kCacheActions[] = {"ls", "show", "stats", "verify", "prune", "clear", "warm"};

// A size in bytes: digits with an optional binary unit (512M, 1G); anything else is refused. The validator only
// checks: CLI11 discards what a check() validator writes back, so the option's value is parsed again where it is
// used (cache_report::parse_size, the one parser).
CLI::Validator bytes_validator() {
  return CLI::Validator(
      [](const std::string& s) -> std::string {
        const Result<int64_t> v = cache_report::parse_size(s);
        if (!v.ok() || v.value() < 1) return "'" + s + "' is not a size: digits, optionally followed by K, M, G or T (1G, 512M)";
        return {};
      },
      "SIZE", "bytes");
}

// A flag given a value (`--json=yes`): CLI11 would read the value as the flag's own, so that `--json=no` or a typo
// would silently mean something. Flags take no value; the name of the first one given one, or empty.
std::string flag_given_a_value(const CLI::App& app, int argc, char** argv) {
  std::vector<const CLI::App*> apps{&app};
  for (size_t i = 0; i < apps.size(); ++i)
    for (const CLI::App* sub : apps[i]->get_subcommands([](const CLI::App*) { return true; })) apps.push_back(sub);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos) continue;
    const std::string name = arg.substr(0, eq);
    for (const CLI::App* a : apps)
      for (const CLI::Option* opt : a->get_options())
        if (opt->get_expected_max() == 0 && opt->check_lname(name.substr(2))) return name;
  }
  return {};
}

// LO:HI, two non-negative integers of at most 10 digits (the validator and the option's callback share it).
std::optional<std::pair<int64_t, int64_t>> parse_length_range(const std::string& v) {
  const size_t colon = v.find(':');
  auto digits = [](const std::string& x) {
    return !x.empty() && x.size() <= 10 && x.find_first_not_of("0123456789") == std::string::npos;
  };
  if (colon == std::string::npos || !digits(v.substr(0, colon)) || !digits(v.substr(colon + 1))) return std::nullopt;
  return std::make_pair(std::stoll(v.substr(0, colon)), std::stoll(v.substr(colon + 1)));
}

std::string usage_text() {
  return fmt::format(
      "rime {}: compiles scaled-dot-product-attention graphs into cached GPU plans.\n\n"
      "usage: rime <command> [FILE] [options]      (FILE omitted: the embedded default graph)\n"
      "       rime <command> --help\n\n"
      "commands:\n"
      "  validate   parse and validate a graph; print its hash\n"
      "  show       print a graph (an invalid one too, with its error)\n"
      "  plan       facts, every row's verdict, the heuristics' scores and the choice\n"
      "  run        plan, compile, and on a GPU execute, check against the CPU reference, time\n"
      "  tune       FILE...: on a GPU, time every configuration the rows accept; record the fastest\n"
      "  cache      ls | show KEY | stats | verify | prune | clear [--tuned] | warm FILE...\n\n"
      "With no command, rime runs its main job on the embedded default graph: validate, plan --explain,\n"
      "compile through the plan cache, and on a GPU execute and check against the CPU reference.\n"
      "Exit codes: 0 ok, 1 usage or bad argument, 2 InvalidJson, 3 InvalidGraph, 4 NotSupported,\n"
      "5 CompileFailed, 6 CacheCorrupt, 7 CudaError, 8 Internal, 9 check failed (docs/cli.md).\n",
      kVersion);
}

// The options shared by the planning commands.
void add_device_options(CLI::App* cmd, std::string& arch, int& sms) {
  cmd->add_option("--arch", arch, "plan for this arch (sm_90a, sm_89, ...) instead of the GPU's");
  cmd->add_option("--sms", sms, "SM count to plan for")->check(CLI::Range(1, 1024));
}

int run_command_line(int argc, char** argv) {
  if (argc < 2) {
    // The main job on the embedded default graph: validate, explain the plan, compile (through the cache), and
    // on a GPU execute and check against the reference.
    Options opts;
    int rc = cmd_validate(opts);
    if (rc != kExitOk) return rc;
    opts.explain = true;
    return cmd_run(opts);
  }
  const std::string first = argv[1];
  if (first == "--help" || first == "-h" || first == "help") {
    fmt::print("{}", usage_text());
    return kExitOk;
  }
  if (first[0] != '-' && std::find_if(std::begin(kCommands), std::end(kCommands),
                                      [&](const char* c) { return first == c; }) == std::end(kCommands)) {
    fmt::print(stderr, "rime: unknown command {}\n\n{}", nlohmann::json(first).dump(), usage_text());
    return kExitUsage;
  }

  CLI::App app{"compiles scaled-dot-product-attention graphs into cached GPU plans", "rime"};
  app.set_version_flag("--version", std::string("rime ") + kVersion);
  app.require_subcommand(1, 1);
  Options o;
  o.argv.assign(argv, argv + argc);
  std::string arch, max_bytes;
  int sms = 0, split = 0;

  CLI::App* validate = app.add_subcommand("validate", "Parse and validate a graph file (the embedded default "
                                                      "graph when FILE is omitted); print the graph hash, or the "
                                                      "error with the JSON pointer of the offending field.");
  CLI::App* show = app.add_subcommand("show", "Print a graph: its tensors, op, attributes and hash (an invalid "
                                              "one too, followed by its error). --json: {ok, graph, hash, error}.");
  CLI::App* plan = app.add_subcommand("plan", "Analyze the graph, match every capability row and choose a "
                                              "configuration. --explain prints the facts, every row's verdict, "
                                              "the split-KV candidates with their costs, the choice and its stages.");
  CLI::App* run = app.add_subcommand(
      "run", "Plan and compile the graph; on a GPU, execute it with fresh random inputs (or --inputs), poisoned "
             "outputs, and check every output against the CPU reference (SPEC section 10). --bench times it.");
  CLI::App* tune = app.add_subcommand(
      "tune", "On the GPU, time every configuration the rows accept for each graph (tile, consumer warpgroups, "
              "split-KV) and record the fastest in the plan cache for this GPU, driver and rime version; later plans "
              "of the same shape class use it (--no-tuned: not). Progress on stderr.");
  tune->add_option("FILES", o.files, "graph files")->required();
  tune->add_option("--iterations", o.iterations, "timed runs per candidate (default 20)")->check(CLI::Range(1, 100000));
  tune->add_flag("--no-record", o.no_record, "time and report only");
  tune->add_flag("--json", o.json, "print machine-readable JSON");
  CLI::App* cache = app.add_subcommand("cache", "Inspect and maintain the plan cache (docs/cache.md).");
  for (CLI::App* cmd : {validate, show, plan, run}) {
    cmd->add_option("FILE", o.file, "graph file (default: the embedded default graph)");
    cmd->add_flag("--json", o.json, "print machine-readable JSON");
  }
  for (CLI::App* cmd : {plan, run}) {
    cmd->add_flag("--explain", o.explain, "print facts, every row's verdict, the heuristics' scores and the stages");
    cmd->add_flag("--no-tuned", o.no_tuned, "the heuristics' choice even where `rime tune` recorded one");
    add_device_options(cmd, arch, sms);
  }
  CLI::Option* split_opt =
      run->add_option("--split", split, "pin the split-KV count (1..1024; honoured or declined)")->check(CLI::Range(1, 1024));
  int64_t seed = 1;  // signed, so that -1 is refused rather than wrapped around
  run->add_option("--seed", seed, "seed of the random inputs, 0..2^63-1 (default 1)")
      ->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()));
  run->add_flag("--no-check", o.no_check, "skip the reference check");
  run->add_flag("--check-indices", o.check_indices,
                "verify seq_len_q / seq_len_kv, ragged offsets and the page ids on the device before the kernels run, "
                "and report the first bad entry instead of reading out of bounds (ExecuteOptions::check_indices)");
  run->add_flag("--bench", o.bench, "time the plan (median of CUDA events after warm-up)");
  run->add_option("--iterations", o.iterations, "timed runs with --bench (default 20)")->check(CLI::Range(1, 100000));
  run->add_option("--inputs", o.inputs_dir, "read input tensors from DIR/<name>.npy (the rest are generated)");
  run->add_option("--save", o.save_dir, "write every input and output to DIR/<name>.npy and DIR/tensors.json");
  run->add_option("--ranks", o.ranks,
                  "context parallelism: one process per GPU, K/V split by sequence into N slices, each rank's O and "
                  "Stats checked against the whole graph (docs/context-parallel.md)")
      ->check(CLI::Range(1, 64));
  // What --ranks starts each rank with: RANK:WORLD:ID (the parent's NCCL unique id). Not for users.
  run->add_option_function<std::string>(
         "--launched-rank",
         [&o](const std::string& v) {
           const size_t a = v.find(':'), b = a == std::string::npos ? a : v.find(':', a + 1);
           LaunchedRank r;
           auto whole = [](const char* from, const char* to, int& out) {  // all of [from, to) is a number
             const std::from_chars_result got = std::from_chars(from, to, out);
             return got.ec == std::errc() && got.ptr == to && from != to;
           };
           if (b == std::string::npos || !whole(v.data(), v.data() + a, r.rank) ||
               !whole(v.data() + a + 1, v.data() + b, r.world))
             throw CLI::ValidationError("--launched-rank", "expected RANK:WORLD:ID, got '" + v + "'");
           r.id_hex = v.substr(b + 1);
           if (r.world < 1 || r.rank < 0 || r.rank >= r.world)
             throw CLI::ValidationError("--launched-rank", "rank outside [0, world)");
           o.launched = r;
         },
         "")
      ->group("");
  const CLI::Validator length_range(
      [](std::string& v) -> std::string {
        const auto range = parse_length_range(v);
        if (!range) return "'" + v + "' is not LO:HI (two non-negative integers)";
        if (range->first > range->second) return "'" + v + "': LO is above HI";
        return {};
      },
      "LO:HI", "lengths");
  run->add_option_function<std::string>(
         "--kv-lengths", [&o](const std::string& v) { o.kv_lengths = parse_length_range(v); },
         "draw every sequence's seq_len_kv uniformly in LO:HI (clamped to S_kv), e.g. 1024:32768")
      ->check(length_range);
  run->add_option_function<std::string>(
         "--seq-lengths", [&o](const std::string& v) { o.seq_lengths = parse_length_range(v); },
         "draw every sequence's length uniformly in LO:HI, the same for Q and K/V (seq_len_q = seq_len_kv, or "
         "ragged offsets; clamped to S, trimmed to T), e.g. 128:8192")
      ->check(length_range);
  run->add_flag("--uniform-descales", o.uniform_descales,
                "one drawn value in every entry of descale_q, descale_k and descale_v: a graph with per-(batch, kv "
                "head) descales computes what its per-tensor twin does from the same seed");

  cache->require_subcommand(1, 1);
  CLI::App* c_ls = cache->add_subcommand("ls", "entries: name, arch, bytes, last used, kernel; then foreign names, then "
                                               "the choices `rime tune` recorded");
  CLI::App* c_show = cache->add_subcommand("show", "one entry, by its name or an unambiguous key prefix, or a tuned "
                                                   "choice by its name (tuned/<key16>.json)");
  c_show->add_option("KEY", o.key, "entry name, key prefix (at least 4 hex digits) or tuned/<key16>.json")->required();
  CLI::App* c_stats = cache->add_subcommand("stats", "count, bytes, NVRTC time held");
  CLI::App* c_verify = cache->add_subcommand("verify", "recompute every checksum; bad entries move to quarantine/ (exit 6)");
  CLI::App* c_prune = cache->add_subcommand("prune", "evict least-recently-used entries down to --max-bytes");
  CLI::Option* max_opt =
      c_prune->add_option("--max-bytes", max_bytes, "size to prune down to (1G, 512M, or bytes); default the cap")
          ->check(bytes_validator());
  CLI::App* c_clear = cache->add_subcommand("clear", "remove every entry (foreign files stay); --tuned: every tuned "
                                                     "choice instead");
  c_clear->add_flag("--tuned", o.tuned, "remove the choices `rime tune` recorded (and only those)");
  CLI::App* c_warm = cache->add_subcommand("warm", "compile the plans of graph files ahead of time, without a GPU");
  c_warm->add_option("FILES", o.files, "graph files")->required();
  add_device_options(c_warm, arch, sms);
  for (CLI::App* cmd : {c_ls, c_show, c_stats, c_verify, c_prune, c_clear, c_warm})
    cmd->add_flag("--json", o.json, "print machine-readable JSON");

  if (const std::string flag = flag_given_a_value(app, argc, argv); !flag.empty()) {
    fmt::print(stderr, "rime: {} is a flag and takes no value ('{}=...' given)\n(see rime {} --help)\n", flag, flag,
               first);
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  } catch (const CLI::ParseError& e) {
    std::string where = "rime";
    for (CLI::App* sub : app.get_subcommands()) {
      where += " " + sub->get_name();
      for (CLI::App* s2 : sub->get_subcommands()) where += " " + s2->get_name();
    }
    fmt::print(stderr, "{}: {}\n(see {} --help)\n", where, e.what(), where);
    return kExitUsage;
  }
  if (!arch.empty()) o.arch = arch;
  if (sms > 0) o.sms = sms;
  if (split_opt->count() > 0) o.split = split;
  o.seed = static_cast<uint64_t>(seed);
  if (max_opt->count() > 0) o.max_bytes = cache_report::parse_size(max_bytes).value();  // bytes_validator accepted it

  if (validate->parsed()) return cmd_validate(o);
  if (show->parsed()) return cmd_show(o);
  if (plan->parsed()) return cmd_plan(o);
  if (run->parsed()) return cmd_run(o);
  if (tune->parsed()) return cmd_tune(o);
  for (const char* action : kCacheActions)
    if (cache->get_subcommand(action)->parsed()) return cmd_cache(action, o);
  fmt::print(stderr, "{}", usage_text());
  return kExitUsage;
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

std::string source_of(const Options& opts) { return opts.file.empty() ? "<default graph>" : opts.file; }

Result<LoadedGraph> load_graph(const Options& opts) {
  LoadedGraph out;
  out.source = source_of(opts);
  Result<Graph> g = opts.file.empty() ? parse_graph_json(kDefaultGraphJson) : load_graph_file(opts.file, false);
  if (!g.ok()) return g.status();
  out.graph = std::move(g).value();
  return out;
}

int for_each_graph_file(const Options& opts, const std::function<int(const std::string&, const Graph&)>& fn) {
  int rc = kExitOk;
  for (const std::string& file : opts.files) {
    Result<Graph> g = load_graph_file(file, false);
    const int code = g.ok() ? fn(file, g.value()) : report_failure(g.status(), opts, file);
    if (code != kExitOk) rc = code;
  }
  return rc;
}

int report_failure(const Status& status, const Options& opts, const std::string& source) {
  if (opts.json) {
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
  try {
    return rime::cli::run_command_line(argc, argv);
  } catch (const std::exception& e) {
    // The library never throws; this guards the CLI's own code (formatting, allocation).
    fmt::print(stderr, "rime: internal error: {}\n", e.what());
    return rime::cli::kExitInternal;
  }
}
