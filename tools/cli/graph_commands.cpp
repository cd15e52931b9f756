// rime validate / rime show.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "rime/json.hpp"

namespace rime::cli {

int cmd_validate(const Options& opts) {
  const std::string source = source_of(opts);
  Result<LoadedGraph> loaded = load_graph(opts);
  if (!loaded.ok()) return report_failure(loaded.status(), opts, source);
  const Graph& g = loaded->graph;
  if (Status s = validate(g); !s.ok()) return report_failure(s, opts, source);
  const std::string hash = graph_hash(g);
  if (opts.json) {
    nlohmann::json j{{"ok", true}, {"source", source}, {"graph", g.name()}, {"hash", hash}};
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("{}: graph '{}' ({} op '{}', {} tensors) is valid; hash {}\n", source, g.name(),
               to_string(g.op()->kind), g.op()->name, g.tensors().size(), hash);
  }
  return kExitOk;
}

int cmd_show(const Options& opts) {
  // show also prints graphs that fail validation (their problem is reported after the listing).
  const std::string source = source_of(opts);
  Result<LoadedGraph> loaded = load_graph(opts);
  if (!loaded.ok()) return report_failure(loaded.status(), opts, source);
  const Graph& g = loaded->graph;
  const Status valid = validate(g);
  if (opts.json) {
    nlohmann::json j{{"ok", valid.ok()},
                     {"source", source},
                     {"graph", nlohmann::json::parse(graph_to_json(g, false))},
                     {"hash", graph_hash(g)}};
    if (!valid.ok())
      j["error"] = {{"code", to_string(valid.code())}, {"location", valid.location()}, {"message", valid.message()}};
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return valid.ok() ? kExitOk : exit_code_for(valid.code());
  }
  fmt::print("graph '{}'  hash {}\n", g.name(), graph_hash(g));
  if (const auto& op = g.op()) {
    fmt::print("op '{}': {}\n", op->name, to_string(op->kind));
    for (int i = 0; i < kRoleCount; ++i) {
      if (!op->operands[i]) continue;
      const TensorDesc* t = g.find_tensor(*op->operands[i]);
      fmt::print("  {:<7} {:<11}", is_output_role(static_cast<Role>(i)) ? "output" : "input",
                 to_string(static_cast<Role>(i)));
      if (!t) {
        fmt::print(" uid {} (missing)\n", *op->operands[i]);
        continue;
      }
      fmt::print(" {:<12} uid {:<3} {:<9} dims [{}] strides [{}]\n", nlohmann::json(t->name).dump(), t->uid,
                 to_string(t->dtype), fmt::join(t->dims, ","), fmt::join(t->strides, ","));
    }
    const SdpaAttributes& a = op->attributes;
    fmt::print("  attn_scale {}{}\n", effective_attn_scale(g), a.attn_scale ? "" : " (default 1/sqrt(D_qk))");
    std::string mask;
    if (a.causal) mask += " causal";
    if (a.window_left) mask += fmt::format(" window_left={}", *a.window_left);
    if (a.band_right) mask += fmt::format(" band_right={}", *a.band_right);
    if (a.causal || a.window_left || a.band_right)
      mask += a.alignment == DiagonalAlignment::BottomRight ? " (bottom-right)" : " (top-left)";
    if (a.padding_mask) mask += " padding";
    fmt::print("  mask{}\n", mask.empty() ? " none" : mask);
    if (a.generate_stats) fmt::print("  stats {}\n", a.stats_log2 ? "log2" : "natural log");
    if (a.split_kv) fmt::print("  pinned split_kv {}\n", *a.split_kv);
    if (a.tile) fmt::print("  pinned tile {}x{}\n", a.tile->q, a.tile->kv);
  } else {
    fmt::print("(no op)\n");
  }
  if (!valid.ok()) {
    fmt::print("invalid: {}\n", valid.to_string());
    return exit_code_for(valid.code());
  }
  return kExitOk;
}

}  // namespace rime::cli
