// Plan artifacts (docs/plan-json.md): a plan round-trips without re-running the heuristics, and an edited artifact is
// refused, never trusted.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "catch.hpp"
#include "example_plans.hpp"
#include "rime/inspect/config.hpp"
#include "rime/json.hpp"
#include "rime/plan.hpp"
#include "test_paths.hpp"

using namespace rime;
using test::h200_plan;
using test::plan_on;

TEST_CASE("a plan round-trips through its artifact without re-running the heuristics", "[plan]") {
  Result<Plan> plan = h200_plan("fp8_decode_gqa");
  REQUIRE(plan.ok());
  REQUIRE(plan->config().decision.split_kv > 1);
  const std::string artifact = plan->to_json();
  nlohmann::json j = nlohmann::json::parse(artifact);
  CHECK(j["rime_plan"] == 3);
  CHECK(j["decision"]["row"] == "sdpa_sm90_fp8");
  CHECK(j["derived"]["stages"].size() == 2);
  CHECK(j["kernels"].size() == 2);
  // Its graph is the canonical graph document (docs/graph-json.md): a graph file that loads to the same graph.
  CHECK(j["graph"]["rime_graph"] == 1);
  Result<Graph> graph_file = graph_from_json(j["graph"].dump(2));
  REQUIRE(graph_file.ok());
  CHECK(graph_hash(graph_file.value()) == graph_hash(plan->graph()));

  Result<Plan> loaded = Plan::load(artifact);
  REQUIRE(loaded.ok());
  CHECK(loaded->config().decision.split_kv == plan->config().decision.split_kv);
  CHECK(loaded->workspace_size() == plan->workspace_size());
  CHECK(loaded->kernels()[0].key == plan->kernels()[0].key);
  CHECK(loaded->kernels()[0].origin != "compiled");  // memory or disk, not NVRTC
  CHECK(loaded->to_json() == artifact);

  // Another split in the row's domain, written with what it derives: load honours the recorded decision (it
  // does not re-choose) and its workspace is the one that split needs.
  const int other = plan->config().decision.split_kv == 2 ? 4 : 2;
  Decision d2 = plan->config().decision;
  d2.split_kv = other;
  Result<Derived> derived2 = derive(plan->facts(), d2);
  REQUIRE(derived2.ok());
  nlohmann::json j2 = j;
  j2["decision"]["split_kv"] = other;
  j2["derived"] = nlohmann::json::parse(artifact)["derived"];
  j2["derived"]["workspace_bytes"] = derived2->workspace_bytes;
  for (size_t r = 0; r < derived2->workspace.size(); ++r) {
    j2["derived"]["workspace"][r]["offset"] = derived2->workspace[r].offset;
    j2["derived"]["workspace"][r]["bytes"] = derived2->workspace[r].bytes;
  }
  for (size_t n = 0; n < derived2->stages.size(); ++n) {
    j2["derived"]["stages"][n]["grid"] = derived2->stages[n].grid;
    j2["derived"]["stages"][n]["name_expression"] = derived2->stages[n].spec.name_expression;
  }
  Result<Plan> split2 = Plan::load(j2.dump());
  INFO(split2.status().to_string());
  REQUIRE(split2.ok());
  CHECK(split2->config().decision.split_kv == other);
  CHECK(split2->workspace_size() == derived2->workspace_bytes);
}

TEST_CASE("a paged plan round-trips through its artifact", "[plan][paged]") {
  Result<Plan> plan = h200_plan("fp8_paged_decode");
  REQUIRE(plan.ok());
  CHECK(plan->facts().paged);
  const std::string artifact = plan->to_json();
  Result<Plan> loaded = Plan::load(artifact);
  INFO(loaded.status().to_string());
  REQUIRE(loaded.ok());
  CHECK(loaded->facts().paged);
  CHECK(loaded->graph().operand(Role::PageTable) != nullptr);
  CHECK(loaded->kernels()[0].key == plan->kernels()[0].key);
  CHECK(loaded->to_json() == artifact);
}

TEST_CASE("an edited plan artifact is refused, never trusted", "[plan]") {
  // On an sm_89 GPU: the mma.sync engine's decode plan (row sdpa_mma_fp8), whose tiles and splits the edits
  // below step outside of.
  Result<Plan> plan = plan_on("fp8_decode_gqa", DeviceDesc::from_arch("sm_89", 128).value());
  REQUIRE(plan.ok());
  const nlohmann::json j = nlohmann::json::parse(plan->to_json());
  auto load_edited = [&](auto&& edit) {
    nlohmann::json e = j;
    edit(e);
    return Plan::load(e.dump()).status();
  };
  auto has = [](const Status& s, const std::string& sub) { return s.message().find(sub) != std::string::npos; };

  // The case: split 128 recorded over the derived values of split 16. Re-derived, split 128 needs 8x
  // the workspace the artifact records: refused, never a plan with the smaller workspace.
  Status split = load_edited([](nlohmann::json& e) { e["decision"]["split_kv"] = 128; });
  CHECK(split.code() == StatusCode::CacheCorrupt);
  CHECK(has(split, "/derived/"));
  // A smaller recorded workspace, alone.
  Status ws = load_edited([](nlohmann::json& e) { e["derived"]["workspace_bytes"] = 4096; });
  CHECK(ws.code() == StatusCode::CacheCorrupt);
  CHECK(has(ws, "/derived/workspace_bytes: the artifact records 4096, its decision derives"));
  // A tile outside the row's domain, and one inside it that the derived values do not match.
  Status tile = load_edited([](nlohmann::json& e) { e["decision"]["tile"] = {{"q", 32}, {"kv", 64}}; });
  CHECK(tile.code() == StatusCode::NotSupported);
  CHECK(has(tile, "tile 32x64 not in {16x32, 16x64, 32x32, 64x64, 128x64}"));
  CHECK(load_edited([](nlohmann::json& e) { e["decision"]["tile"] = {{"q", 64}, {"kv", 64}}; }).code() ==
        StatusCode::CacheCorrupt);
  // A row that declines the graph.
  Status row = load_edited([](nlohmann::json& e) { e["decision"]["row"] = "sdpa_sm90_fp8"; });
  CHECK(row.code() == StatusCode::NotSupported);
  CHECK(has(row, "row sdpa_sm90_fp8: arch sm_89 not in [sm_90, sm_90]"));
  // Another kernel recorded for a stage, and another key.
  CHECK(load_edited([](nlohmann::json& e) {
          e["derived"]["stages"][0]["name_expression"] = "rime_dev::sdpa_mma_fwd<2, 2, 128, 128, 16, 32, 0>";
        }).code() == StatusCode::CacheCorrupt);
  Status key = load_edited([](nlohmann::json& e) { e["kernels"][1]["key"] = std::string(64, 'a'); });
  CHECK(key.code() == StatusCode::CacheCorrupt);
  CHECK(has(key, "kernel 1 is combine with key aaaaaaaaaaaaaaaa"));
  CHECK(load_edited([](nlohmann::json& e) { e["kernels"].erase(1); }).code() == StatusCode::CacheCorrupt);
  // Another arch: the row still accepts sm_90a, but every derived kernel is another one; on sm_80 it declines.
  CHECK(load_edited([](nlohmann::json& e) { e["device"]["arch"] = "sm_90a"; }).code() == StatusCode::CacheCorrupt);
  CHECK(load_edited([](nlohmann::json& e) { e["device"]["arch"] = "sm_80"; }).code() == StatusCode::NotSupported);
  // Versions.
  Status version = load_edited([](nlohmann::json& e) { e["rime_version"] = "0.0.9"; });
  CHECK(version.code() == StatusCode::InvalidJson);
  CHECK(has(version, "written by rime 0.0.9"));
  Status format = load_edited([](nlohmann::json& e) { e["rime_plan"] = 7; });
  CHECK(format.code() == StatusCode::InvalidJson);
  CHECK(has(format, "version 7"));
  // Mistyped fields are InvalidJson with their pointer, never an exception.
  Status typed = load_edited([](nlohmann::json& e) { e["decision"]["split_kv"] = "16"; });
  CHECK(typed.code() == StatusCode::InvalidJson);
  CHECK(typed.location() == "/decision/split_kv");
  CHECK(load_edited([](nlohmann::json& e) { e["device"]["sm_count"] = 1.5; }).code() == StatusCode::InvalidJson);
  CHECK(load_edited([](nlohmann::json& e) { e["device"] = 3; }).code() == StatusCode::InvalidJson);
  CHECK(load_edited([](nlohmann::json& e) { e["graph_hash"] = std::string(64, '0'); }).code() ==
        StatusCode::CacheCorrupt);
  CHECK(Plan::load("{\"rime_plan\": 3}").status().code() == StatusCode::InvalidJson);
  CHECK(Plan::load("{\"rime_plan\": 2}").status().message().find("version 2 is not supported") != std::string::npos);
  CHECK(Plan::load("{\"rime_plan\": 3, \"rime_plan\": 3}").status().message().find("appears twice") !=
        std::string::npos);
  CHECK(Plan::load("[]").status().code() == StatusCode::InvalidJson);
}

TEST_CASE("a warp-specialized plan round-trips: one stage, a grid-constant parameter block", "[plan]") {
  Result<Plan> plan = h200_plan("fp8_prefill");
  REQUIRE(plan.ok());
  REQUIRE(plan->kernels().size() == 1);
  CHECK(plan->kernels()[0].engine == "sdpa_sm90");
  CHECK(plan->config().derived.stages[0].spec.params_type == "__grid_constant__ SdpaSm90Params");
  CHECK(plan->workspace_size() == 0);
  Result<Plan> loaded = Plan::load(plan->to_json());
  REQUIRE(loaded.ok());
  CHECK(loaded->to_json() == plan->to_json());
}
