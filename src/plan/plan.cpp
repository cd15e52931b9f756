// Plan: build (analyze -> match -> choose -> compile), load from an artifact, and execute.
#include "rime/plan.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "jit/kernel_spec.hpp"
#include "log/log.hpp"
#include "plan/bindings.hpp"
#include "plan/facts_json.hpp"
#include "rime/json.hpp"
#include "rime/version.hpp"
#include "runtime/driver.hpp"
#include "runtime/module.hpp"
#include "sdpa_mma/launch.hpp"
#include "status_macros.hpp"

namespace rime {

namespace {
constexpr int kPlanFormatVersion = 1;
}

struct Plan::State {
  Graph graph;
  Facts facts;
  Config config;
  std::vector<std::shared_ptr<const CompiledKernel>> compiled;  // [attention, combine?]
  std::vector<KernelInfo> infos;
  engines::Launch attention_launch{}, combine_launch{};
  CUfunction attention_fn = nullptr, combine_fn = nullptr;
  bool prepared = false;
};

namespace {

std::vector<KernelSpec> kernel_specs(const Facts& f, const Config& c) {
  const std::string arch = f.device.arch_name();
  std::vector<KernelSpec> specs{engines::sdpa_mma_spec(f, c, arch)};
  if (c.split_kv > 1) specs.push_back(engines::combine_spec(f, arch));
  return specs;
}

Status compile_all(Plan::State& s, const std::vector<KernelSpec>& specs) {
  s.compiled.clear();
  s.infos.clear();
  for (size_t i = 0; i < specs.size(); ++i) {
    auto k = get_kernel(specs[i]);
    if (!k.ok()) return k.status();
    const CompiledKernel& ck = *k->kernel;
    s.compiled.push_back(k->kernel);
    s.infos.push_back(KernelInfo{i == 0 ? "attention" : "combine", ck.spec.engine, ck.spec.name_expression,
                                 ck.lowered_name, ck.key, ck.spec.arch, k->origin, ck.compile_ms,
                                 static_cast<int64_t>(ck.cubin.size())});
  }
  s.attention_launch = engines::sdpa_mma_launch(s.facts, s.config);
  if (s.config.split_kv > 1) s.combine_launch = engines::combine_launch(s.facts);
  return Status::success();
}

// Prepare when the plan's device is the GPU we run on; planning for another device is fine without one.
void prepare_if_local(Plan& plan) {
  Result<DeviceDesc> gpu = driver::query_device();
  if (gpu.ok() && gpu->arch == plan.facts().device.arch) {
    Status s = plan.prepare();
    if (!s.ok()) log::warn("plan built but not loaded: {}", s.message());
  }
}

}  // namespace

Result<Plan> Plan::build(const Graph& graph, const PlanOptions& options) {
  DeviceDesc device = DeviceDesc::h200();
  if (options.device) {
    device = *options.device;
  } else if (Result<DeviceDesc> gpu = driver::query_device(); gpu.ok()) {
    device = gpu.value();
  }
  Plan plan;
  plan.state_ = std::make_shared<State>();
  State& s = *plan.state_;
  s.graph = graph;
  Result<Facts> facts = analyze(graph, device);
  if (!facts.ok()) return facts.status();
  s.facts = facts.value();
  Result<Config> config = choose(s.facts, match(s.facts));
  if (!config.ok()) return config.status();
  s.config = config.value();
  RIME_RETURN_IF_ERROR(compile_all(s, kernel_specs(s.facts, s.config)));
  prepare_if_local(plan);
  return plan;
}

std::string Plan::to_json() const {
  const State& s = *state_;
  nlohmann::json j;
  j["rime_plan"] = kPlanFormatVersion;
  j["rime_version"] = kVersion;
  j["graph"] = nlohmann::json::parse(graph_to_json(s.graph, false));
  j["graph_hash"] = graph_hash(s.graph);
  j["device"] = {{"arch", s.facts.device.arch_name()},
                 {"sm_count", s.facts.device.sm_count},
                 {"smem_per_block", s.facts.device.smem_per_block},
                 {"smem_per_sm", s.facts.device.smem_per_sm}};
  j["facts"] = facts_to_json(s.facts);
  j["config"] = config_to_json(s.config);
  j["kernels"] = nlohmann::json::array();
  for (size_t i = 0; i < s.compiled.size(); ++i) {
    const CompiledKernel& k = *s.compiled[i];
    j["kernels"].push_back({{"role", s.infos[i].role},
                            {"engine", k.spec.engine},
                            {"header", k.spec.header},
                            {"params_type", k.spec.params_type},
                            {"name_expression", k.spec.name_expression},
                            {"arch", k.spec.arch},
                            {"lowered_name", k.lowered_name},
                            {"key", k.key},
                            {"cubin_bytes", static_cast<int64_t>(k.cubin.size())}});
  }
  j["workspace_bytes"] = s.config.workspace_bytes;
  return j.dump(2) + "\n";
}

Result<Plan> Plan::load(const std::string& artifact) {
  nlohmann::json j = nlohmann::json::parse(artifact, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status(StatusCode::InvalidJson, "plan artifact is not a JSON object");
  if (j.value("rime_plan", 0) != kPlanFormatVersion)
    return Status(StatusCode::InvalidJson, fmt::format("plan artifact version {} is not supported (this rime reads {})",
                                                       j.value("rime_plan", 0), kPlanFormatVersion),
                  "/rime_plan");
  Plan plan;
  plan.state_ = std::make_shared<State>();
  State& s = *plan.state_;
  try {
    Result<Graph> g = graph_from_json(j.at("graph").dump());
    if (!g.ok()) return g.status();
    s.graph = g.value();
    Result<DeviceDesc> dev = DeviceDesc::from_arch(j.at("device").at("arch").get<std::string>(),
                                                   j.at("device").at("sm_count").get<int>());
    if (!dev.ok()) return dev.status();
    DeviceDesc device = dev.value();
    device.smem_per_block = j.at("device").at("smem_per_block").get<int>();
    device.smem_per_sm = j.at("device").at("smem_per_sm").get<int>();
    Result<Facts> facts = analyze(s.graph, device);
    if (!facts.ok()) return facts.status();
    s.facts = facts.value();
    s.config = config_from_json(j.at("config"));
    std::vector<KernelSpec> specs;
    for (const auto& k : j.at("kernels")) {
      KernelSpec spec{k.at("engine").get<std::string>(), k.at("header").get<std::string>(),
                      k.at("name_expression").get<std::string>(), k.at("params_type").get<std::string>(),
                      k.at("arch").get<std::string>()};
      auto key = cache_key(spec);
      if (key.ok() && key.value() != k.at("key").get<std::string>())
        log::info("plan kernel {}: sources changed since the artifact was written; recompiling", spec.engine);
      specs.push_back(spec);
    }
    if (specs != kernel_specs(s.facts, s.config))
      return Status(StatusCode::CacheCorrupt, "plan artifact's kernels do not match its configuration");
    RIME_RETURN_IF_ERROR(compile_all(s, specs));
  } catch (const std::exception& e) {
    return Status(StatusCode::InvalidJson, fmt::format("plan artifact: {}", e.what()));
  }
  prepare_if_local(plan);
  return plan;
}

const Graph& Plan::graph() const { return state_->graph; }
const Facts& Plan::facts() const { return state_->facts; }
const Config& Plan::config() const { return state_->config; }
const std::vector<KernelInfo>& Plan::kernels() const { return state_->infos; }
int64_t Plan::workspace_size() const { return state_->config.workspace_bytes; }
bool Plan::prepared() const { return state_->prepared; }

Status Plan::prepare() {
  State& s = *state_;
  if (s.prepared) return Status::success();
  Result<DeviceDesc> gpu = driver::query_device();
  if (!gpu.ok()) return gpu.status();
  if (gpu->arch != s.facts.device.arch)
    return Status(StatusCode::CudaError, fmt::format("plan is for {}, the GPU is {} ({})", s.facts.device.arch_name(),
                                                     gpu->arch_name(), gpu->name));
  auto fn = runtime::load_function(*s.compiled[0], static_cast<int>(s.attention_launch.smem));
  if (!fn.ok()) return fn.status();
  s.attention_fn = fn.value();
  if (s.compiled.size() > 1) {
    auto cfn = runtime::load_function(*s.compiled[1], 0);
    if (!cfn.ok()) return cfn.status();
    s.combine_fn = cfn.value();
  }
  s.prepared = true;
  return Status::success();
}

Status Plan::execute(const std::unordered_map<int64_t, void*>& buffers, void* workspace, void* stream) const {
  const State& s = *state_;
  if (!s.prepared)
    return Status(StatusCode::CudaError, "plan is not loaded on a GPU (Plan::prepare() failed or was not run)");
  const SdpaOp& op = *s.graph.op();
  RIME_RETURN_IF_ERROR(check_bindings(s.graph, buffers, workspace, s.config.workspace_bytes));
  const driver::Api* api = driver::api();
  CUstream cu_stream = static_cast<CUstream>(stream);
  for (Role r : {Role::AmaxO, Role::AmaxS}) {
    if (auto uid = op.operand(r)) {
      RIME_RETURN_IF_ERROR(driver::check(
          api->cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(buffers.find(*uid)->second), 0, 1, cu_stream),
          "cuMemsetD32Async(Amax)"));
    }
  }
  SdpaParams params = engines::sdpa_mma_params(s.graph, s.facts, s.config, buffers, workspace);
  void* args[] = {&params};
  const engines::Launch& l = s.attention_launch;
  RIME_RETURN_IF_ERROR(driver::check(api->cuLaunchKernel(s.attention_fn, l.grid[0], l.grid[1], l.grid[2], l.block, 1, 1,
                                                         l.smem, cu_stream, args, nullptr),
                                     "cuLaunchKernel(attention)"));
  if (s.config.split_kv > 1) {
    CombineParams cp = engines::combine_params(s.graph, s.facts, s.config, buffers, workspace);
    void* cargs[] = {&cp};
    const engines::Launch& c = s.combine_launch;
    RIME_RETURN_IF_ERROR(driver::check(api->cuLaunchKernel(s.combine_fn, c.grid[0], c.grid[1], c.grid[2], c.block, 1,
                                                           1, c.smem, cu_stream, cargs, nullptr),
                                       "cuLaunchKernel(combine)"));
  }
  return Status::success();
}

}  // namespace rime
