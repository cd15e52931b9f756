// Plan: build (analyze -> match -> choose -> compile), load from an artifact, and execute.
#include "rime/plan.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "heuristics/tile.hpp"
#include "jit/kernel_spec.hpp"
#include "log/log.hpp"
#include "plan/bindings.hpp"
#include "plan/facts_json.hpp"
#include "rime/json.hpp"
#include "rime/version.hpp"
#include "runtime/driver.hpp"
#include "runtime/module.hpp"
#include "sdpa_mma/launch.hpp"
#include "sdpa_wgmma/launch.hpp"
#include "status_macros.hpp"

namespace rime {

namespace {

constexpr int kPlanFormatVersion = 1;

// The kernels a plan launches, in order: the V^T pre-pass (wgmma engine), the attention kernel, the combine
// (split plans).
enum class StageRole { VtPrepass, Attention, Combine };

// Per role, in StageRole order: its name in plans and the text of a failed launch (no formatting in execute;
// the launch is cuLaunchKernel or, programmatic, cuLaunchKernelEx).
struct StageNames {
  const char* role;
  const char* launch;
};
constexpr StageNames kStageNames[] = {{"v_transpose", "launch of the v_transpose kernel"},
                                      {"attention", "launch of the attention kernel"},
                                      {"combine", "launch of the combine kernel"}};
const char* role_name(StageRole r) { return kStageNames[static_cast<int>(r)].role; }
const char* launch_what(StageRole r) { return kStageNames[static_cast<int>(r)].launch; }

struct Stage {
  StageRole role;
  engines::Launch launch{};
  CUfunction fn = nullptr;
};

}  // namespace

struct Plan::State {
  Graph graph;
  Facts facts;
  Config config;
  std::vector<std::shared_ptr<const CompiledKernel>> compiled;  // one per stage
  std::vector<KernelInfo> infos;
  std::vector<Stage> stages;
  bool prepared = false;
};

namespace {

bool is_wgmma(const Config& c) { return c.engine == heuristics::kWgmmaEngine; }

std::vector<std::pair<StageRole, KernelSpec>> kernel_stages(const Facts& f, const Config& c) {
  const std::string arch = f.device.arch_name();
  std::vector<std::pair<StageRole, KernelSpec>> stages;
  if (is_wgmma(c)) {
    stages.emplace_back(StageRole::VtPrepass, engines::vt_prepass_spec(f, arch));
    stages.emplace_back(StageRole::Attention, engines::sdpa_wgmma_spec(f, c, arch));
  } else {
    stages.emplace_back(StageRole::Attention, engines::sdpa_mma_spec(f, c, arch));
  }
  if (c.split_kv > 1) stages.emplace_back(StageRole::Combine, engines::combine_spec(f, arch));
  return stages;
}

std::vector<KernelSpec> kernel_specs(const Facts& f, const Config& c) {
  std::vector<KernelSpec> specs;
  for (auto& [role, spec] : kernel_stages(f, c)) specs.push_back(spec);
  return specs;
}

engines::Launch stage_launch(StageRole role, const Facts& f, const Config& c) {
  switch (role) {
    case StageRole::VtPrepass: return engines::vt_prepass_launch(f);
    case StageRole::Attention: return is_wgmma(c) ? engines::sdpa_wgmma_launch(f, c) : engines::sdpa_mma_launch(f, c);
    case StageRole::Combine: return engines::combine_launch(f);
  }
  return {};
}

// Compiles (or fetches from the caches) the kernel of every stage the plan's configuration implies.
Status compile_all(Plan::State& s) {
  s.compiled.clear();
  s.infos.clear();
  s.stages.clear();
  for (const auto& [role, spec] : kernel_stages(s.facts, s.config)) {
    auto k = get_kernel(spec);
    if (!k.ok()) return k.status();
    const CompiledKernel& ck = *k->kernel;
    s.compiled.push_back(k->kernel);
    s.infos.push_back(KernelInfo{role_name(role), ck.spec.engine, ck.spec.name_expression, ck.lowered_name, ck.key,
                                 ck.spec.arch, k->origin, ck.compile_ms, static_cast<int64_t>(ck.cubin.size())});
    s.stages.push_back(Stage{role, stage_launch(role, s.facts, s.config), nullptr});
  }
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
  RIME_RETURN_IF_ERROR(compile_all(s));
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
    RIME_RETURN_IF_ERROR(compile_all(s));
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
  for (size_t i = 0; i < s.stages.size(); ++i) {
    auto fn = runtime::load_function(*s.compiled[i], static_cast<int>(s.stages[i].launch.smem));
    if (!fn.ok()) return fn.status();
    s.stages[i].fn = fn.value();
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
  SdpaParams params = is_wgmma(s.config) ? engines::sdpa_wgmma_params(s.graph, s.facts, s.config, buffers, workspace)
                                         : engines::sdpa_mma_params(s.graph, s.facts, s.config, buffers, workspace);
  CombineParams combine{};
  if (s.config.split_kv > 1) combine = engines::combine_params(s.graph, s.facts, s.config, buffers, workspace);
  // Programmatic dependent launch (sm_90+): a stage after the first may launch while its predecessor's CTAs
  // still run (they allow it with griddepcontrol.launch_dependents) and waits in the kernel
  // (griddepcontrol.wait) before it reads what the predecessor wrote, so its launch and prologue hide behind
  // the predecessor's tail. The first stage launches plainly: it must follow everything before it.
  const bool programmatic = s.facts.device.arch >= 90 && api->cuLaunchKernelEx != nullptr;
  for (size_t n = 0; n < s.stages.size(); ++n) {
    const Stage& stage = s.stages[n];
    // The launch copies the parameter block at the call, so the locals may go after it.
    void* args[] = {stage.role == StageRole::Combine ? static_cast<void*>(&combine) : static_cast<void*>(&params)};
    const engines::Launch& l = stage.launch;
    if (n > 0 && programmatic) {
      CUlaunchAttribute attr{};
      attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attr.value.programmaticStreamSerializationAllowed = 1;
      CUlaunchConfig config{};
      config.gridDimX = l.grid[0];
      config.gridDimY = l.grid[1];
      config.gridDimZ = l.grid[2];
      config.blockDimX = l.block;
      config.blockDimY = config.blockDimZ = 1;
      config.sharedMemBytes = l.smem;
      config.hStream = cu_stream;
      config.attrs = &attr;
      config.numAttrs = 1;
      RIME_RETURN_IF_ERROR(
          driver::check(api->cuLaunchKernelEx(&config, stage.fn, args, nullptr), launch_what(stage.role)));
    } else {
      RIME_RETURN_IF_ERROR(driver::check(api->cuLaunchKernel(stage.fn, l.grid[0], l.grid[1], l.grid[2], l.block, 1,
                                                             1, l.smem, cu_stream, args, nullptr),
                                         launch_what(stage.role)));
    }
  }
  return Status::success();
}

}  // namespace rime
