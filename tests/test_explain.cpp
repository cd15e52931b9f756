// The explanation (`rime plan --explain`): rime::explain and Plan::explain print the CLI's text, facts included.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "catch.hpp"
#include "example_plans.hpp"
#include "rime/inspect/config.hpp"
#include "rime/inspect/facts.hpp"
#include "rime/json.hpp"
#include "rime/plan.hpp"
#include "test_paths.hpp"

using namespace rime;
using test::h200_plan;
using test::plan_on;

TEST_CASE("per-(batch, kv head) descales are a fact, explained, and served by the FP8 rows", "[plan][explain]") {
  PlanOptions h200;
  h200.device = DeviceDesc::h200();
  nlohmann::json doc = nlohmann::json::parse(test::read_text(test::example_path("fp8_prefill")));  // B 2, H_kv 8
  for (int i : {4, 5}) {  // descale_k, descale_v
    doc["tensors"][i]["dims"] = {2, 8, 1, 1};
    doc["tensors"][i]["strides"] = {8, 1, 1, 1};
  }
  Result<Graph> g = graph_from_json(doc.dump());
  REQUIRE(g.ok());
  Result<Explanation> e = explain(g.value(), h200);
  REQUIRE(e.ok());
  CHECK(e->served);
  CHECK(e->text.find("descales  per (batch, kv head): descale_k, descale_v\n") != std::string::npos);
  CHECK(nlohmann::json::parse(e->json)["facts"]["per_head_descales"] == true);
  // The per-tensor example says nothing of it.
  Result<Graph> plain = load_graph_file(test::example_path("fp8_prefill"));
  REQUIRE(plain.ok());
  Result<Explanation> pe = explain(plain.value(), h200);
  REQUIRE(pe.ok());
  CHECK(pe->text.find("descales") == std::string::npos);
  CHECK(nlohmann::json::parse(pe->json)["facts"]["per_head_descales"] == false);
}

TEST_CASE("rime::explain and Plan::explain give the text of `rime plan --explain`", "[plan][explain]") {
  PlanOptions h200;
  h200.device = DeviceDesc::h200();
  h200.device_source = "given by --arch/--sms";  // what the goldens' command line says
  for (const char* name : {"fp8_prefill", "fp8_decode_gqa", "bf16_causal_sink", "fp8_paged_decode", "mxfp8_inputs"}) {
    INFO(name);
    Result<Graph> g = load_graph_file(test::example_path(name));
    REQUIRE(g.ok());
    Result<Explanation> e = explain(g.value(), h200);
    REQUIRE(e.ok());
    CHECK(e->served);
    CHECK(e->text == test::read_text(test::source_dir() + "/tests/golden/" + name + ".explain.txt"));
    CHECK(nlohmann::json::parse(e->json)["decision"]["row"].is_string());
    Result<Plan> plan = Plan::build(g.value(), h200);
    REQUIRE(plan.ok());
    CHECK(plan->explain().text == e->text);
  }
  // A graph no row serves: the verdicts say why, and the decline is NotSupported's message.
  nlohmann::json doc = nlohmann::json::parse(test::read_text(test::example_path("fp8_prefill")));
  for (int i : {0, 1, 2, 9}) {
    doc["tensors"][i]["dims"][3] = 80;
    doc["tensors"][i].erase("strides");
  }
  Result<Graph> odd = graph_from_json(doc.dump());
  REQUIRE(odd.ok());
  Result<Explanation> declined = explain(odd.value(), h200);
  REQUIRE(declined.ok());
  CHECK_FALSE(declined->served);
  CHECK(declined->text.find("declined  row sdpa_sm90_fp8: D_qk 80 not in {64, 96, 128, 256, 192}") != std::string::npos);
  CHECK(declined->decline.find("no capability row serves") != std::string::npos);
  // An invalid graph is InvalidGraph, as validate() says.
  doc["tensors"][1]["dims"][3] = 64;
  Result<Graph> bad = parse_graph_json(doc.dump());
  REQUIRE(bad.ok());
  CHECK(explain(bad.value(), h200).status().code() == StatusCode::InvalidGraph);
}
