#include "plan/tuned.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <chrono>

#include "cache/disk_cache.hpp"
#include "digest/sha256.hpp"
#include "json/checked.hpp"
#include "rime/json.hpp"
#include "rime/tune.hpp"
#include "rime/version.hpp"
#include "runtime/driver.hpp"
#include "status_macros.hpp"

namespace rime::tuned {
namespace {

constexpr int kTunedFormat = 1;

nlohmann::json decision_json(const Decision& d) {
  return {{"row", d.row_id},
          {"tile", {d.tile.q, d.tile.kv}},
          {"consumer_warpgroups", d.consumer_warpgroups},
          {"split_kv", d.split_kv}};
}

Status read_decision(const nlohmann::json& j, const std::string& where, Decision& d) {
  namespace jc = json_checked;
  if (!j.is_object()) return Status(StatusCode::CacheCorrupt, "tuned entry: " + where + " is not an object");
  RIME_RETURN_IF_ERROR(jc::get_string(j, "row", d.row_id, where));
  int64_t consumers = 0, split = 0;
  RIME_RETURN_IF_ERROR(jc::get_int(j, "consumer_warpgroups", consumers, where));
  RIME_RETURN_IF_ERROR(jc::get_int(j, "split_kv", split, where));
  const auto tile = j.find("tile");
  if (tile == j.end() || !tile->is_array() || tile->size() != 2 || !(*tile)[0].is_number_integer() ||
      !(*tile)[1].is_number_integer())
    return Status(StatusCode::CacheCorrupt, "tuned entry: " + where + "/tile is not [q, kv]");
  d.tile = {(*tile)[0].get<int>(), (*tile)[1].get<int>()};
  d.consumer_warpgroups = static_cast<int>(consumers);
  d.split_kv = static_cast<int>(split);
  return Status::success();
}

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
    void* lib = driver::library();
    if (!lib) return 0;
    using Fn = CUresult (*)(int*);
    auto fn = reinterpret_cast<Fn>(dlsym(lib, "cuDriverGetVersion"));
    int v = 0;
    return fn && fn(&v) == CUDA_SUCCESS ? v : 0;
  }();
  return version;
}

std::string describe(const Decision& d) {
  const std::string consumers = d.consumer_warpgroups ? fmt::format(" x{}", d.consumer_warpgroups) : "";
  return fmt::format("{} {}x{}{} split {}", d.row_id, d.tile.q, d.tile.kv, consumers, d.split_kv);
}

nlohmann::json to_json(const Choice& c, const std::string& key) {
  return {{"rime_tuned", kTunedFormat},
          {"rime_version", kVersion},
          {"key", key},
          {"graph_name", c.graph_name},
          {"shape_class", c.shape_class},
          {"device", {{"name", c.device}, {"sm_count", c.sm_count}, {"arch", c.arch},
                      {"driver_version", c.driver_version}}},
          {"decision", decision_json(c.decision)},
          {"ms", c.ms},
          {"heuristic", decision_json(c.heuristic)},
          {"heuristic_ms", c.heuristic_ms},
          {"candidates", c.candidates},
          {"iterations", c.iterations},
          {"created", c.created}};
}

Result<Choice> from_json(const std::string& text) {
  namespace jc = json_checked;
  nlohmann::json j;
  if (Status s = jc::parse_object(text, j); !s.ok()) return Status(StatusCode::CacheCorrupt, "tuned entry " + s.message());
  int64_t format = 0;
  RIME_RETURN_IF_ERROR(jc::get_int(j, "rime_tuned", format, ""));
  if (format != kTunedFormat)
    return Status(StatusCode::CacheCorrupt, fmt::format("tuned entry format {} (this rime reads {})", format, kTunedFormat));
  Choice c;
  RIME_RETURN_IF_ERROR(jc::get_string(j, "graph_name", c.graph_name, ""));
  RIME_RETURN_IF_ERROR(jc::get_string(j, "shape_class", c.shape_class, ""));
  const nlohmann::json& dev = j.value("device", nlohmann::json::object());
  if (!dev.is_object()) return Status(StatusCode::CacheCorrupt, "tuned entry: /device is not an object");
  int64_t sms = 0, driver = 0, candidates = 0, iterations = 0, created = 0;
  RIME_RETURN_IF_ERROR(jc::get_string(dev, "name", c.device, "/device"));
  RIME_RETURN_IF_ERROR(jc::get_int(dev, "sm_count", sms, "/device"));
  RIME_RETURN_IF_ERROR(jc::get_string(dev, "arch", c.arch, "/device"));
  RIME_RETURN_IF_ERROR(jc::get_int(dev, "driver_version", driver, "/device"));
  RIME_RETURN_IF_ERROR(read_decision(j.value("decision", nlohmann::json()), "/decision", c.decision));
  RIME_RETURN_IF_ERROR(read_decision(j.value("heuristic", nlohmann::json()), "/heuristic", c.heuristic));
  if (!j.value("ms", nlohmann::json()).is_number() || !j.value("heuristic_ms", nlohmann::json()).is_number())
    return Status(StatusCode::CacheCorrupt, "tuned entry: /ms and /heuristic_ms must be numbers");
  c.ms = j["ms"].get<double>();
  c.heuristic_ms = j["heuristic_ms"].get<double>();
  RIME_RETURN_IF_ERROR(jc::get_int(j, "candidates", candidates, ""));
  RIME_RETURN_IF_ERROR(jc::get_int(j, "iterations", iterations, ""));
  RIME_RETURN_IF_ERROR(jc::get_int(j, "created", created, ""));
  c.sm_count = static_cast<int>(sms);
  c.driver_version = static_cast<int>(driver);
  c.candidates = static_cast<int>(candidates);
  c.iterations = static_cast<int>(iterations);
  c.created = created;
  return c;
}

Status record(const std::string& k, const Choice& choice) {
  const cache::DiskCache* d = disk();
  if (!d)
    return Status(StatusCode::InvalidArgument,
                  "the plan cache on disk is not in use (" + cache::settings().disabled_why +
                      "): a tuned choice is kept there");
  return d->store_tuned(k, to_json(choice, k).dump(2) + "\n");
}

std::optional<Choice> find(const std::string& k) {
  const cache::DiskCache* d = disk();
  if (!d) return std::nullopt;
  const std::optional<std::string> text = d->load_tuned(k);
  if (!text) return std::nullopt;
  Result<Choice> c = from_json(*text);
  if (!c.ok()) return std::nullopt;
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

Result<int> clear() {
  const cache::DiskCache* d = disk();
  if (!d) return 0;
  return d->clear_tuned();
}

}  // namespace rime::tuned

namespace rime {
Result<int> clear_tuned() { return tuned::clear(); }
}  // namespace rime
