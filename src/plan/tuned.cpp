#include "plan/tuned.hpp"

#include <fmt/format.h>

#include <chrono>

#include "cache/disk_cache.hpp"
#include "cache/settings.hpp"
#include "digest/sha256.hpp"
#include "json/checked.hpp"
#include "log/log.hpp"
#include "plan/facts_json.hpp"
#include "rime/json.hpp"
#include "rime/tune.hpp"
#include "rime/version.hpp"
#include "runtime/driver.hpp"
#include "status_macros.hpp"

namespace rime::tuned {
namespace {

constexpr int kTunedFormat = 1;

const cache::DiskCache* disk() {
  const cache::Settings& s = cache::settings();
  return s.cache.get();
}

}  // namespace

std::string shape_class(const Graph& graph) {
  nlohmann::json j = nlohmann::json::parse(graph_to_json(graph, false));
  j.erase("name");
  if (j.contains("op") && j["op"].is_object()) {
    j["op"].erase("name");
    j["op"].erase("knobs");
  }
  return sha256_hex(j.dump());
}

std::string key(const std::string& shape_class, const DeviceDesc& device, int driver_version) {
  return sha256_hex(fmt::format("rime tuned {}|rime {}|{}|{} SMs|{}|driver {}|{}", kTunedFormat, kVersion, device.name,
                                device.sm_count, device.arch_name(), driver_version, shape_class));
}

int driver_version() {
  // Asked once per process: every plan with use_tuned keys its lookup by it.
  static const int version = [] {
    const driver::Api* api = driver::api();
    int v = 0;
    return api && api->cuDriverGetVersion(&v) == CUDA_SUCCESS ? v : 0;
  }();
  return version;
}

std::string describe(const Decision& d) {
  const std::string consumers = d.consumer_warpgroups ? fmt::format(" x{}", d.consumer_warpgroups) : "";
  return fmt::format("{} {}x{}{} split {}", d.row_id, d.tile.q, d.tile.kv, consumers, d.split_kv);
}

size_t fastest(const std::vector<TuneCandidate>& candidates) {
  size_t winner = 0;
  for (size_t i = 1; i < candidates.size(); ++i)
    if (candidates[i].error.empty() && candidates[i].ms < candidates[winner].ms) winner = i;
  return winner;
}

nlohmann::json to_json(const Choice& c) {
  return {{"rime_tuned", kTunedFormat},
          {"rime_version", kVersion},
          {"key", c.key},
          {"graph_name", c.graph_name},
          {"shape_class", c.shape_class},
          {"device", {{"name", c.device}, {"sm_count", c.sm_count}, {"arch", c.arch},
                      {"driver_version", c.driver_version}}},
          {"decision", decision_to_json(c.decision)},
          {"ms", c.ms},
          {"heuristic", decision_to_json(c.heuristic)},
          {"heuristic_ms", c.heuristic_ms},
          {"candidates", c.candidates},
          {"iterations", c.iterations},
          {"created", c.created}};
}

Result<Choice> from_json(const std::string& text) {
  namespace jc = json_checked;
  nlohmann::json j;
  RIME_RETURN_IF_ERROR(jc::parse_object(text, j, StatusCode::CacheCorrupt));
  int64_t format = 0;
  RIME_RETURN_IF_ERROR(jc::get_int(j, "rime_tuned", format, ""));
  if (format != kTunedFormat)
    return Status(StatusCode::CacheCorrupt, fmt::format("tuned choice format {} (this rime reads {})", format,
                                                        kTunedFormat));
  Choice c;
  RIME_RETURN_IF_ERROR(jc::get_string(j, "key", c.key, ""));
  RIME_RETURN_IF_ERROR(jc::get_string(j, "graph_name", c.graph_name, ""));
  RIME_RETURN_IF_ERROR(jc::get_string(j, "shape_class", c.shape_class, ""));
  const nlohmann::json* dev = nullptr;
  RIME_RETURN_IF_ERROR(jc::get_object(j, "device", dev, ""));
  RIME_RETURN_IF_ERROR(jc::get_string(*dev, "name", c.device, "/device"));
  RIME_RETURN_IF_ERROR(jc::get_int32(*dev, "sm_count", c.sm_count, "/device"));
  RIME_RETURN_IF_ERROR(jc::get_string(*dev, "arch", c.arch, "/device"));
  RIME_RETURN_IF_ERROR(jc::get_int32(*dev, "driver_version", c.driver_version, "/device"));
  const nlohmann::json* decision = nullptr;
  const nlohmann::json* heuristic = nullptr;
  RIME_RETURN_IF_ERROR(jc::get_object(j, "decision", decision, ""));
  RIME_RETURN_IF_ERROR(jc::get_object(j, "heuristic", heuristic, ""));
  Result<Decision> d = decision_from_json(*decision, "/decision");
  if (!d.ok()) return d.status();
  Result<Decision> h = decision_from_json(*heuristic, "/heuristic");
  if (!h.ok()) return h.status();
  c.decision = d.value();
  c.heuristic = h.value();
  RIME_RETURN_IF_ERROR(jc::get_number(j, "ms", c.ms, ""));
  RIME_RETURN_IF_ERROR(jc::get_number(j, "heuristic_ms", c.heuristic_ms, ""));
  RIME_RETURN_IF_ERROR(jc::get_int32(j, "candidates", c.candidates, ""));
  RIME_RETURN_IF_ERROR(jc::get_int32(j, "iterations", c.iterations, ""));
  RIME_RETURN_IF_ERROR(jc::get_int(j, "created", c.created, ""));
  return c;
}

Status record(const Choice& choice) {
  const cache::DiskCache* d = disk();
  if (!d)
    return Status(StatusCode::InvalidArgument,
                  "the plan cache on disk is not in use (" + cache::settings().disabled_why +
                      "): a tuned choice is kept there");
  return d->store_tuned(choice.key, to_json(choice).dump(2) + "\n");
}

std::optional<Choice> find(const std::string& k) {
  const cache::DiskCache* d = disk();
  if (!d) return std::nullopt;
  const std::optional<std::string> text = d->load_tuned(k);
  if (!text) return std::nullopt;
  // A bad document, or one recorded under another key (its file copied or renamed), is a miss, as a bad kernel
  // entry is; logged, never removed (clear_tuned does that).
  Result<Choice> c = from_json(*text);
  if (!c.ok() || c->key != k) {
    log::warn("tuned choice {}/tuned/{} is not used: {}", d->dir(), cache::DiskCache::tuned_name(k),
              c.ok() ? "it was recorded under another key" : c.status().to_string());
    return std::nullopt;
  }
  return c.value();
}

Lookup lookup(const Graph& graph, const Facts& facts, bool device_queried) {
  Lookup out;
  if (facts.pinned_split || facts.pinned_tile) return out;
  const std::string k = key(shape_class(graph), facts.device, device_queried ? driver_version() : 0);
  const std::optional<Choice> c = find(k);
  if (!c) return out;
  const std::string timed = fmt::format("tuned {} on {}: {:.4f} ms against the heuristics' {} at {:.4f} ms, {} "
                                        "candidates",
                                        describe(c->decision), c->device, c->ms, describe(c->heuristic),
                                        c->heuristic_ms, c->candidates);
  Decision d = c->decision;
  Result<Derived> derived = derive(facts, d);
  if (!derived.ok()) {
    out.line = fmt::format("declined ({}): {}; the heuristics choose", derived.status().message(), timed);
    return out;
  }
  const double speedup = c->ms > 0 ? c->heuristic_ms / c->ms : 1.0;
  d.tile_reason = "tuned by rime tune";
  d.split_reason = "tuned by rime tune";
  d.tuned = fmt::format("{} ({:.2f}x the heuristics' speed; `rime cache clear --tuned` forgets it)", timed, speedup);
  out.config = Config{d, derived.value()};
  out.line = d.tuned;
  return out;
}

Result<Config> choose(const Graph& graph, const Facts& facts, const std::vector<RowVerdict>& verdicts, bool use_tuned,
                      bool device_queried, std::string& tuned_line) {
  if (use_tuned) {
    Lookup t = lookup(graph, facts, device_queried);
    tuned_line = t.line;
    if (t.config) return *t.config;
  }
  return rime::choose(facts, verdicts);
}

Result<int> clear() {
  const cache::DiskCache* d = disk();
  if (!d) return 0;
  return d->clear_tuned();
}

}  // namespace rime::tuned

namespace rime {
Result<int> clear_tuned() { return tuned::clear(); }

std::string describe_decision(const Decision& decision) { return tuned::describe(decision); }

Result<std::string> describe_tuned_choice(const std::string& json) {
  const Result<tuned::Choice> c = tuned::from_json(json);
  if (!c.ok()) return c.status();
  // The graph's name as a JSON string: a name may hold any byte.
  const std::string graph = nlohmann::json(c->graph_name).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return fmt::format("{} on {} (driver {}): {} {:.4f} ms, the heuristics' {} {:.4f} ms", graph, c->device,
                     c->driver_version, tuned::describe(c->decision), c->ms, tuned::describe(c->heuristic),
                     c->heuristic_ms);
}
}  // namespace rime
