// Tuned choices (include/rime/tune.hpp, src/plan/tuned.hpp) without a GPU: a choice recorded for a described device
// is used by Plan::build and rime::explain for graphs of its shape class on that device, said in the explanation,
// listed by the cache and cleared; a choice the rows decline is not used and the explanation says why. Timing the
// candidates (rime::tune) needs a GPU: tests/gpu and the Python GPU tests run it.
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "cache/disk_cache.hpp"
#include "cache/settings.hpp"
#include "catch.hpp"
#include "plan/tuned.hpp"
#include "rime/json.hpp"
#include "rime/plan.hpp"
#include "rime/tune.hpp"
#include "test_paths.hpp"

using namespace rime;
using json = nlohmann::json;

namespace {

// examples/fp8_decode_gqa.json with 4096 keys instead of 8192 and the given name: a shape class no other test plans
// (the tests share one cache directory).
Graph decode_graph(const std::string& name, int64_t keys = 4096) {
  json doc = json::parse(test::read_text(test::example_path("fp8_decode_gqa")));
  doc["name"] = name;
  for (json& t : doc["tensors"])
    if (t["name"] == "K" || t["name"] == "V") {
      t["dims"][2] = keys;
      t.erase("strides");
    }
  Result<Graph> g = graph_from_json(doc.dump());
  REQUIRE(g.ok());
  return g.value();
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a tuned choice is used, explained, listed and cleared", "[tune]") {
  const DeviceDesc h200 = DeviceDesc::h200();
  PlanOptions options;
  options.device = h200;
  const Graph g = decode_graph("tuned_decode");
  REQUIRE(clear_tuned().ok());
  Result<Plan> heuristic = Plan::build(g, options);
  REQUIRE(heuristic.ok());
  const Decision chosen = heuristic->config().decision;
  CHECK(chosen.tuned.empty());

  // What `rime tune` records: another split of the same row and tile, faster than the heuristics' choice.
  tuned::Choice c;
  c.decision = chosen;
  c.decision.split_kv = chosen.split_kv == 8 ? 4 : 8;
  c.ms = 0.010;
  c.heuristic = chosen;
  c.heuristic_ms = 0.012;
  c.candidates = 12;
  c.iterations = 20;
  c.graph_name = g.name();
  c.shape_class = tuned::shape_class(g);
  c.device = h200.name;
  c.sm_count = h200.sm_count;
  c.arch = h200.arch_name();
  const std::string key = tuned::key(c.shape_class, h200, 0);  // a described device: driver 0
  c.key = key;
  REQUIRE(tuned::record(c).ok());

  Result<Plan> tuned_plan = Plan::build(g, options);
  REQUIRE(tuned_plan.ok());
  CHECK(tuned_plan->config().decision.split_kv == c.decision.split_kv);
  const std::string line = "tuned     tuned " + tuned::describe(c.decision) +
                           " on NVIDIA H200: 0.0100 ms against the heuristics' " + tuned::describe(chosen) +
                           " at 0.0120 ms, 12 candidates (1.20x the heuristics' speed";
  CHECK(has(tuned_plan->explain().text, line));
  Result<Explanation> explained = explain(g, options);
  REQUIRE(explained.ok());
  CHECK(has(explained->text, line));
  CHECK(json::parse(explained->json)["tuned"].get<std::string>().rfind("tuned ", 0) == 0);
  // The shape class leaves the name out: the same shapes under another name use it; other shapes do not.
  CHECK(Plan::build(decode_graph("renamed"), options)->config().decision.split_kv == c.decision.split_kv);
  CHECK(Plan::build(decode_graph("longer", 8192), options)->config().decision.tuned.empty());
  // Another device (SM count) or the option off: the heuristics.
  PlanOptions off = options;
  off.use_tuned = false;
  CHECK(Plan::build(g, off)->config().decision.split_kv == chosen.split_kv);
  PlanOptions other = options;
  other.device->sm_count = 114;
  CHECK(Plan::build(g, other)->config().decision.tuned.empty());
  // A graph that pins one knob keeps its pins: no tuned choice is looked up, so none is used or explained (the
  // shape class leaves the knobs out, so the record's key is the pinned graph's too).
  json pinned_doc = json::parse(graph_to_json(g, false));
  pinned_doc["op"]["knobs"] = {{"split_kv", chosen.split_kv}};
  Result<Graph> pinned = graph_from_json(pinned_doc.dump());
  REQUIRE(pinned.ok());
  REQUIRE(tuned::shape_class(pinned.value()) == c.shape_class);
  Result<Plan> pinned_plan = Plan::build(pinned.value(), options);
  REQUIRE(pinned_plan.ok());
  CHECK(pinned_plan->config().decision.split_kv == chosen.split_kv);
  CHECK(pinned_plan->config().decision.tuned.empty());
  CHECK_FALSE(has(pinned_plan->explain().text, "tuned     "));

  // Listed by the cache, by the name its key gives.
  const cache::DiskCache* disk = cache::settings().cache.get();
  REQUIRE(disk);
  bool listed = false;
  for (const auto& t : disk->list_tuned()) listed |= t.name == cache::DiskCache::tuned_name(key) && has(t.text, "\"ms\"");
  CHECK(listed);

  // A recorded choice the rows decline (a tile no row lists) is not used; the explanation says why.
  tuned::Choice bad = c;
  bad.decision.tile = {16, 16};
  REQUIRE(tuned::record(bad).ok());
  Result<Plan> declined = Plan::build(g, options);
  REQUIRE(declined.ok());
  CHECK(declined->config().decision.split_kv == chosen.split_kv);
  CHECK(has(declined->explain().text, "tuned     declined (row sdpa_sm90_fp8: tile 16x16"));

  // A bad document, or one recorded under another key, is a miss: the heuristics, and no line.
  const std::string path = disk->dir() + "/tuned/" + cache::DiskCache::tuned_name(key);
  auto plans_untuned = [&] {
    Result<Plan> p = Plan::build(g, options);
    REQUIRE(p.ok());
    return p->config().decision.split_kv == chosen.split_kv && !has(p->explain().text, "tuned ");
  };
  std::ofstream(path, std::ios::trunc) << "{\"rime_tuned\": 1, \"key\": ";
  CHECK(plans_untuned());
  tuned::Choice misfiled = c;
  misfiled.key = std::string(64, 'f');
  std::ofstream(path, std::ios::trunc) << tuned::to_json(misfiled).dump();
  CHECK(plans_untuned());

  // Cleared: the heuristics again, and no line.
  Result<int> cleared = clear_tuned();
  REQUIRE(cleared.ok());
  CHECK(cleared.value() >= 1);
  Result<Plan> after = Plan::build(g, options);
  REQUIRE(after.ok());
  CHECK(after->config().decision.split_kv == chosen.split_kv);
  CHECK(!has(after->explain().text, "tuned "));
}

TEST_CASE("a symlink or directory holding a tuned choice's name is never replaced, read through or removed",
          "[tune][cache]") {
  const cache::DiskCache* disk = cache::settings().cache.get();
  REQUIRE(disk);
  const Graph g = decode_graph("tuned_symlink", 2048);
  const DeviceDesc h200 = DeviceDesc::h200();
  PlanOptions options;
  options.device = h200;
  Result<Plan> heuristic = Plan::build(g, options);
  REQUIRE(heuristic.ok());
  tuned::Choice c;
  c.key = tuned::key(tuned::shape_class(g), h200, 0);
  c.decision = c.heuristic = heuristic->config().decision;
  c.decision.split_kv = c.decision.split_kv == 8 ? 4 : 8;
  c.ms = 0.01;
  c.heuristic_ms = 0.02;
  REQUIRE(tuned::record(c).ok());  // creates tuned/
  const std::string name = disk->dir() + "/tuned/" + cache::DiskCache::tuned_name(c.key);
  // A user's file outside, and a symlink to it under the choice's name.
  const std::string outside = disk->dir() + "/../rime_tune_outside.json";
  std::ofstream(outside, std::ios::trunc) << tuned::to_json(c).dump();
  REQUIRE(std::remove(name.c_str()) == 0);
  REQUIRE(::symlink(outside.c_str(), name.c_str()) == 0);
  CHECK(!tuned::record(c).ok());                                // not replaced
  CHECK(Plan::build(g, options)->config().decision.tuned.empty());  // not read through
  REQUIRE(clear_tuned().ok());
  struct stat st {};
  CHECK(::lstat(name.c_str(), &st) == 0);  // not removed
  CHECK(S_ISLNK(st.st_mode));
  CHECK(test::read_text(outside).find("\"ms\"") != std::string::npos);  // the file it points to is intact
  std::remove(name.c_str());
  std::remove(outside.c_str());
  // A directory under the name: the same.
  REQUIRE(::mkdir(name.c_str(), 0700) == 0);
  CHECK(!tuned::record(c).ok());
  REQUIRE(clear_tuned().ok());
  CHECK(::lstat(name.c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  ::rmdir(name.c_str());
}

TEST_CASE("tune refuses a graph that pins its knobs, and iterations below 1", "[tune]") {
  json doc = json::parse(test::read_text(test::example_path("fp8_decode_gqa")));
  doc["op"]["knobs"] = {{"split_kv", 2}};
  Result<Graph> g = graph_from_json(doc.dump());
  REQUIRE(g.ok());
  Result<TuneReport> r = tune(g.value());
  REQUIRE(!r.ok());
  CHECK(r.status().code() == StatusCode::InvalidArgument);
  CHECK(has(r.status().message(), "pins split_kv or tile"));
  TuneOptions zero;
  zero.iterations = 0;
  CHECK(tune(decode_graph("zero"), zero).status().code() == StatusCode::InvalidArgument);
}

TEST_CASE("the winner is the fastest candidate that ran, never a failed one", "[tune]") {
  auto ran = [](double ms) { TuneCandidate c; c.ms = ms; return c; };
  TuneCandidate failed;  // no time: ms 0, an error
  failed.error = "CudaError: launch failed";
  CHECK(tuned::fastest({ran(2.0), failed, ran(1.5), ran(1.7)}) == 2);
  CHECK(tuned::fastest({ran(2.0), failed, failed}) == 0);
  CHECK(tuned::fastest({ran(1.0), ran(1.0), ran(3.0)}) == 0);  // a tie keeps the heuristics' own
  CHECK(tuned::fastest({ran(1.0)}) == 0);
}
