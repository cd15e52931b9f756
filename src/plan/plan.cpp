// Plan: build (analyze -> match -> choose -> compile), load from an artifact (re-derived, never trusted), and
// execute through the chosen row's engine.
#include "rime/plan.hpp"

#include "plan/explain.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cache/disk_cache.hpp"
#include "cache/settings.hpp"
#include "cache/get_kernel.hpp"
#include "engine.hpp"
#include "json/checked.hpp"
#include "log/log.hpp"
#include "plan/bindings.hpp"
#include "plan/context_parallel.hpp"
#include "plan/facts_json.hpp"
#include "plan/index_check.hpp"
#include "plan/plan_state.hpp"
#include "plan/tuned.hpp"
#include "rime/json.hpp"
#include "rime/version.hpp"
#include "runtime/driver.hpp"
#include "runtime/module.hpp"
#include "status_macros.hpp"

namespace rime {

namespace {
// Version 3: the artifact records the decision, its consumer warpgroups included, and re-derives the rest (sizes,
// grids, stages); another version is refused (docs/plan-json.md).
constexpr int kPlanFormatVersion = 3;
}  // namespace

namespace {

// Compiles (or fetches from the caches) the kernel of every stage of the configuration.
Status compile_all(Plan::State& s) {
  s.compiled.clear();
  s.infos.clear();
  s.launch_failure.clear();
  for (const KernelStage& stage : s.config.derived.stages) {
    auto k = get_kernel(stage.spec);
    if (!k.ok()) return k.status();
    const CompiledKernel& ck = *k->kernel;
    s.compiled.push_back(k->kernel);
    s.infos.push_back(KernelInfo{stage.role, ck.spec.engine, ck.spec.name_expression, ck.lowered_name, ck.key,
                                 ck.spec.arch, k->origin, ck.compile_ms, static_cast<int64_t>(ck.cubin.size())});
    s.launch_failure.push_back(fmt::format("launch of the {} kernel", stage.role));
  }
  return Status::success();
}

Status find_engine(Plan::State& s) {
  s.engine = engines::find_engine(s.config.derived.engine);
  if (!s.engine)
    return Status(StatusCode::Internal, fmt::format("engine {} is not registered", s.config.derived.engine));
  return Status::success();
}

// Prepares on the GPU the options name (an error when it cannot be), else on the current GPU when its arch is the
// plan's: planning for another device is fine without one.
Status prepare_if_local(Plan& plan, std::optional<int> device_ordinal) {
  if (device_ordinal) return plan.prepare(*device_ordinal);
  Result<int> ordinal = driver::current_ordinal();
  if (!ordinal.ok()) return Status::success();
  Result<DeviceDesc> gpu = driver::query_device(ordinal.value());
  if (gpu.ok() && gpu->arch == plan.facts().device.arch) {
    Status s = plan.prepare(ordinal.value());
    if (!s.ok()) log::warn("plan built but not loaded: {}", s.message());
  }
  return Status::success();
}

// The first place where two JSON values differ, as "<pointer>: recorded A, derived B".
std::string first_difference(const nlohmann::json& recorded, const nlohmann::json& derived, const std::string& base) {
  const nlohmann::json patch = nlohmann::json::diff(recorded, derived);
  if (patch.empty()) return {};
  const std::string path = patch[0].value("path", "");
  const nlohmann::json::json_pointer ptr(path);
  auto show = [&](const nlohmann::json& j) { return j.contains(ptr) ? j.at(ptr).dump() : std::string("(absent)"); };
  return fmt::format("{}{}: the artifact records {}, its decision derives {}", base, path, show(recorded), show(derived));
}

}  // namespace

Result<DeviceResolution> resolve_device(const PlanOptions& options) {
  if (options.device)
    return DeviceResolution{*options.device, options.device_source.empty() ? "given by the caller" : options.device_source};
  if (options.device_ordinal) {
    Result<DeviceDesc> gpu = driver::query_device(*options.device_ordinal);
    if (!gpu.ok()) return gpu.status();
    return DeviceResolution{gpu.value(), fmt::format("queried from GPU {}", *options.device_ordinal), true};
  }
  Result<DeviceDesc> gpu = driver::query_device();
  if (gpu.ok()) return DeviceResolution{gpu.value(), "queried from the GPU", true};
  return DeviceResolution{DeviceDesc::h200(), "no GPU (" + gpu.status().message() + "): H200 defaults"};
}

namespace {

// Plan::build, and with `slot` (slot, slots) PlanInternals::build_slot_plan: the facts record the slot in place of a
// rank, no communicator is kept, and the mask check of context_parallel::apply does not run.
Result<Plan> build_plan(Plan plan, Plan::State& s, const Graph& graph, const PlanOptions& options,
                        std::optional<std::pair<int, int>> slot) {
  const Result<DeviceResolution> resolved = resolve_device(options);
  if (!resolved.ok()) return resolved.status();
  const DeviceDesc& device = resolved->device;
  s.device_source = resolved->source;
  s.graph = graph;
  Result<Facts> facts = analyze(graph, device);  // validates the graph: the build's one validation
  if (!facts.ok()) return facts.status();
  s.facts = facts.value();
  if (slot) {
    s.facts.context_parallel = {slot->first, slot->second};
  } else {
    RIME_RETURN_IF_ERROR(context_parallel::apply(s.facts, options.context_parallel));
    s.context_parallel = options.context_parallel;
  }
  // `rime tune` times single-GPU plans: a context-parallel plan takes the heuristics' choice for its shard.
  const bool use_tuned = options.use_tuned && !options.context_parallel && !slot;
  Result<Config> config = tuned::choose(graph, s.facts, match(s.facts), use_tuned, resolved->queried, s.tuned_line);
  if (!config.ok()) return config.status();
  s.config = config.value();
  RIME_RETURN_IF_ERROR(find_engine(s));
  RIME_RETURN_IF_ERROR(compile_all(s));
  RIME_RETURN_IF_ERROR(prepare_if_local(plan, options.device_ordinal));
  return plan;
}

}  // namespace

Result<Plan> Plan::build(const Graph& graph, const PlanOptions& options) {
  Plan plan;
  plan.state_ = std::make_shared<State>();
  return build_plan(plan, *plan.state_, graph, options, std::nullopt);
}

Result<Plan> PlanInternals::build_slot_plan(const Graph& graph, const PlanOptions& options, int slot, int slots) {
  if (slots < 1 || slot < 0 || slot >= slots)
    return Status(StatusCode::Internal, fmt::format("partials slot {} of {}", slot, slots));
  Plan plan;
  plan.state_ = std::make_shared<Plan::State>();
  return build_plan(plan, *plan.state_, graph, options, std::make_pair(slot, slots));
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
  j["decision"] = decision_to_json(s.config.decision);
  j["derived"] = derived_to_json(s.config.derived);
  j["kernels"] = nlohmann::json::array();
  for (size_t i = 0; i < s.compiled.size(); ++i) {
    const CompiledKernel& k = *s.compiled[i];
    j["kernels"].push_back({{"role", s.infos[i].role},
                            {"key", k.key},
                            {"lowered_name", k.lowered_name},
                            {"cubin_bytes", static_cast<int64_t>(k.cubin.size())}});
  }
  return j.dump(2) + "\n";
}

Result<Plan> Plan::load(const std::string& artifact, std::optional<int> device_ordinal) {
  namespace jc = json_checked;
  nlohmann::json j;
  {
    Status parsed = jc::parse_object(artifact, j);
    if (!parsed.ok()) return Status(StatusCode::InvalidJson, "plan artifact " + parsed.message(), parsed.location());
  }
  int64_t format = 0;
  RIME_RETURN_IF_ERROR(jc::get_int(j, "rime_plan", format, ""));
  if (format != kPlanFormatVersion)
    return Status(StatusCode::InvalidJson,
                  fmt::format("plan artifact version {} is not supported (this rime reads {}); rebuild the plan",
                              format, kPlanFormatVersion),
                  "/rime_plan");
  std::string version;
  RIME_RETURN_IF_ERROR(jc::get_string(j, "rime_version", version, ""));
  if (version != kVersion)
    return Status(StatusCode::InvalidJson,
                  fmt::format("plan artifact written by rime {}, this is rime {}; rebuild the plan", version, kVersion),
                  "/rime_version");

  Plan plan;
  plan.state_ = std::make_shared<State>();
  State& s = *plan.state_;
  const nlohmann::json* graph_json = nullptr;
  RIME_RETURN_IF_ERROR(jc::get_object(j, "graph", graph_json, ""));
  Result<Graph> g = parse_graph_json(graph_json->dump());  // analyze() below validates it
  if (!g.ok()) return Status(g.status().code(), "plan artifact's graph: " + g.status().message(), "/graph" + g.status().location());
  s.graph = g.value();
  std::string recorded_hash;
  RIME_RETURN_IF_ERROR(jc::get_string(j, "graph_hash", recorded_hash, ""));
  if (recorded_hash != graph_hash(s.graph))
    return Status(StatusCode::CacheCorrupt, "plan artifact: graph_hash does not match its graph", "/graph_hash");

  const nlohmann::json* dev = nullptr;
  RIME_RETURN_IF_ERROR(jc::get_object(j, "device", dev, ""));
  std::string arch;
  int sm_count = 0, smem_per_block = 0, smem_per_sm = 0;
  RIME_RETURN_IF_ERROR(jc::get_string(*dev, "arch", arch, "/device"));
  RIME_RETURN_IF_ERROR(jc::get_int32(*dev, "sm_count", sm_count, "/device"));
  RIME_RETURN_IF_ERROR(jc::get_int32(*dev, "smem_per_block", smem_per_block, "/device"));
  RIME_RETURN_IF_ERROR(jc::get_int32(*dev, "smem_per_sm", smem_per_sm, "/device"));
  Result<DeviceDesc> device = DeviceDesc::from_arch(arch, sm_count);
  if (!device.ok()) return Status(StatusCode::InvalidJson, "plan artifact: " + device.status().message(), "/device");
  for (const auto& [name, value] : {std::pair<const char*, int>{"smem_per_block", smem_per_block}, {"smem_per_sm", smem_per_sm}})
    if (value < 1 || value > (1 << 24))
      return Status(StatusCode::InvalidJson, fmt::format("plan artifact: {} {} is outside 1..{}", name, value, 1 << 24),
                    std::string("/device/") + name);
  device->smem_per_block = smem_per_block;
  device->smem_per_sm = smem_per_sm;
  Result<Facts> facts = analyze(s.graph, device.value());
  if (!facts.ok()) return Status(facts.status().code(), "plan artifact's graph: " + facts.status().message(), facts.status().location());
  s.facts = facts.value();
  if (const nlohmann::json* f = nullptr; jc::get_object(j, "facts", f, "").ok() && f->contains("context_parallel"))
    return Status(StatusCode::NotSupported,
                  "plan artifact of a context-parallel plan: build it with its communicator (Plan::build with "
                  "PlanOptions::context_parallel) instead of loading it",
                  "/facts/context_parallel");

  const nlohmann::json* decision_json = nullptr;
  RIME_RETURN_IF_ERROR(jc::get_object(j, "decision", decision_json, ""));
  Result<Decision> decision = decision_from_json(*decision_json, "/decision");
  if (!decision.ok()) return decision.status();
  // The recorded row must still accept the graph and the knobs its domain; everything else is derived again.
  Result<Derived> derived = derive(s.facts, decision.value());
  if (!derived.ok())
    return Status(derived.status().code(), "plan artifact's decision: " + derived.status().message(), "/decision");
  s.config = Config{decision.value(), derived.value()};

  const nlohmann::json* recorded = nullptr;
  RIME_RETURN_IF_ERROR(jc::get_object(j, "derived", recorded, ""));
  const std::string diff = first_difference(*recorded, derived_to_json(s.config.derived), "/derived");
  if (!diff.empty()) return Status(StatusCode::CacheCorrupt, "plan artifact: " + diff, "/derived");

  // Each kernel's key: a key that differs means other sources than this build's (or an edit).
  const nlohmann::json* kernels = nullptr;
  RIME_RETURN_IF_ERROR(jc::get_array(j, "kernels", kernels, ""));
  const auto& stages = s.config.derived.stages;
  if (kernels->size() != stages.size())
    return Status(StatusCode::CacheCorrupt,
                  fmt::format("plan artifact lists {} kernels, its decision derives {} stages", kernels->size(),
                              stages.size()),
                  "/kernels");
  for (size_t i = 0; i < stages.size(); ++i) {
    const std::string at = fmt::format("/kernels/{}", i);
    std::string role, key;
    RIME_RETURN_IF_ERROR(jc::get_string((*kernels)[i], "role", role, at));
    RIME_RETURN_IF_ERROR(jc::get_string((*kernels)[i], "key", key, at));
    Result<std::string> expected = cache_key(stages[i].spec);
    if (!expected.ok()) return expected.status();
    if (role != stages[i].role || key != expected.value())
      return Status(StatusCode::CacheCorrupt,
                    fmt::format("plan artifact: kernel {} is {} with key {}, this build derives {} with key {} (other "
                                "sources, or an edit); rebuild the plan",
                                i, role, key.substr(0, 16), stages[i].role, expected->substr(0, 16)),
                    at);
  }
  RIME_RETURN_IF_ERROR(find_engine(s));
  RIME_RETURN_IF_ERROR(compile_all(s));
  RIME_RETURN_IF_ERROR(prepare_if_local(plan, device_ordinal));
  return plan;
}

const Graph& Plan::graph() const { return state_->graph; }
const Facts& Plan::facts() const { return state_->facts; }
const Config& Plan::config() const { return state_->config; }
const std::vector<KernelInfo>& Plan::kernels() const { return state_->infos; }

Status set_cache_dir(const std::string& dir) { return cache::set_directory(dir); }
std::string cache_dir() { return cache::settings().dir; }

Explanation Plan::explain() const {
  const State& s = *state_;
  const std::vector<RowVerdict> verdicts = match(s.facts);
  return explanation_of(ExplanationParts{s.graph, s.facts, verdicts, &s.config, s.device_source, s.tuned_line});
}
int64_t Plan::workspace_size() const { return state_->config.derived.workspace_bytes; }
bool Plan::prepared() const { return state_->prepared; }

Status Plan::prepare() {
  Result<int> ordinal = driver::current_ordinal();
  if (!ordinal.ok()) return ordinal.status();
  return prepare(ordinal.value());
}

int Plan::device_ordinal() const { return state_->device_ordinal; }

Status Plan::prepare(int device_ordinal) {
  State& s = *state_;
  if (s.prepared) {
    if (s.device_ordinal == device_ordinal) return Status::success();
    return Status(StatusCode::InvalidArgument,
                  fmt::format("plan is loaded on GPU {}, not GPU {}: build a plan per GPU", s.device_ordinal,
                              device_ordinal));
  }
  Result<DeviceDesc> gpu = driver::query_device(device_ordinal);
  if (!gpu.ok()) return gpu.status();
  if (gpu->arch != s.facts.device.arch)
    return Status(StatusCode::CudaError, fmt::format("plan is for {}, GPU {} is {} ({})", s.facts.device.arch_name(),
                                                     device_ordinal, gpu->arch_name(), gpu->name));
  Result<CUcontext> ctx = driver::primary_context(device_ordinal);
  if (!ctx.ok()) return ctx.status();
  const driver::ScopedContext in_ctx(ctx.value());  // the occupancy query below reads the current context
  RIME_RETURN_IF_ERROR(in_ctx.status());
  std::vector<CUfunction> functions;
  std::vector<unsigned> grid_x;
  for (size_t i = 0; i < s.compiled.size(); ++i) {
    const KernelStage& stage = s.config.derived.stages[i];
    auto fn = runtime::load_function(*s.compiled[i], static_cast<int>(stage.smem_bytes), ctx.value());
    if (!fn.ok()) return fn.status();
    functions.push_back(fn.value());
    grid_x.push_back(static_cast<unsigned>(stage.grid[0]));
    if (stage.persistent) {
      // As many CTAs as this GPU holds at once: the kernel spreads its work evenly over gridDim.x CTAs, so one
      // more than fits would run as a second wave alone, and one fewer leaves a slot idle throughout.
      int per_sm = 0;
      RIME_RETURN_IF_ERROR(driver::check(driver::api()->cuOccupancyMaxActiveBlocksPerMultiprocessor(
                                             &per_sm, fn.value(), static_cast<int>(stage.block),
                                             static_cast<size_t>(stage.smem_bytes)),
                                         "cuOccupancyMaxActiveBlocksPerMultiprocessor"));
      if (per_sm < 1)
        return Status(StatusCode::CudaError, fmt::format("the {} kernel fits no CTA on an SM ({} threads, {} bytes of "
                                                         "shared memory)",
                                                         stage.role, stage.block, stage.smem_bytes));
      grid_x.back() = static_cast<unsigned>(per_sm * gpu->sm_count);
    }
  }
  s.functions = std::move(functions);
  s.grid_x = std::move(grid_x);
  if (const WorkspaceRegion* counter = s.config.derived.region("row_tile_counter")) s.row_tile_counter = counter->offset;
  int after_collective = -1;
  if (s.context_parallel) {
    RIME_RETURN_IF_ERROR(context_parallel::check_communicator(*s.context_parallel, device_ordinal));
    const auto& stages = s.config.derived.stages;
    for (size_t i = 0; i < stages.size(); ++i)
      if (stages[i].role == "combine") after_collective = static_cast<int>(i);
    if (after_collective < 0)
      return Status(StatusCode::Internal, "a context-parallel plan without a combine stage to gather its partials for");
  }
  s.after_collective = after_collective;
  s.context = ctx.value();
  s.device_ordinal = device_ordinal;
  s.prepared = true;
  return Status::success();
}

namespace {

// Launches stages [first, end) of a prepared plan (execute, PlanInternals::launch_stages). allow_programmatic: a
// stage after `first` may launch as a programmatic dependent of the one before.
Status launch(const Plan::State& s, const engines::RoleBuffers& buffers, void* workspace, CUstream cu_stream, int first,
              int end, bool allow_programmatic, const KvExtent* kv = nullptr) {
  const driver::Api* api = driver::api();
  engines::StageParams params;  // storage on the stack: the launch copies each block at the call
  RIME_RETURN_IF_ERROR(s.engine->fill_params(s.facts, s.config, engines::Bindings{buffers, workspace, kv}, params));
  // Programmatic dependent launch (sm_90+): a stage after the first may launch while its predecessor's CTAs
  // still run (they allow it with griddepcontrol.launch_dependents) and waits in the kernel
  // (griddepcontrol.wait) before it reads what the predecessor wrote, so its launch and prologue hide behind
  // the predecessor's tail. The first stage launches plainly: it must follow everything before it.
  const bool programmatic = allow_programmatic && s.facts.device.arch >= 90 && api->cuLaunchKernelEx != nullptr;
  // A persistent grid's row tile counter starts at zero in every execute (a 4-byte memset on the stream).
  if (first == 0 && s.row_tile_counter >= 0)
    RIME_RETURN_IF_ERROR(driver::check(
        api->cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(workspace) + static_cast<CUdeviceptr>(s.row_tile_counter),
                              0, 1, cu_stream),
        "cuMemsetD32Async(row tile counter)"));
  const auto& stages = s.config.derived.stages;
  for (size_t n = static_cast<size_t>(first); n < static_cast<size_t>(end); ++n) {
    const KernelStage& stage = stages[n];
    // Context parallel: every rank's partials reach every rank's workspace before the combine reads them. The
    // combine then launches plainly, after the collective.
    const bool after_collective = static_cast<int>(n) == s.after_collective;
    if (after_collective)
      RIME_RETURN_IF_ERROR(context_parallel::all_gather(s.facts, s.config, workspace, s.context_parallel->comm, cu_stream));
    void* args[] = {params[n].bytes};
    const unsigned gx = s.grid_x[n], gy = static_cast<unsigned>(stage.grid[1]),
                   gz = static_cast<unsigned>(stage.grid[2]);
    const unsigned block = static_cast<unsigned>(stage.block), smem = static_cast<unsigned>(stage.smem_bytes);
    if (n > static_cast<size_t>(first) && programmatic && !after_collective) {
      CUlaunchAttribute attr{};
      attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attr.value.programmaticStreamSerializationAllowed = 1;
      CUlaunchConfig config{};
      config.gridDimX = gx;
      config.gridDimY = gy;
      config.gridDimZ = gz;
      config.blockDimX = block;
      config.blockDimY = config.blockDimZ = 1;
      config.sharedMemBytes = smem;
      config.hStream = cu_stream;
      config.attrs = &attr;
      config.numAttrs = 1;
      RIME_RETURN_IF_ERROR(
          driver::check(api->cuLaunchKernelEx(&config, s.functions[n], args, nullptr), s.launch_failure[n].c_str()));
    } else {
      RIME_RETURN_IF_ERROR(driver::check(
          api->cuLaunchKernel(s.functions[n], gx, gy, gz, block, 1, 1, smem, cu_stream, args, nullptr),
          s.launch_failure[n].c_str()));
    }
  }
  return Status::success();
}

}  // namespace

Status Plan::execute(const std::unordered_map<int64_t, void*>& buffers, void* workspace, void* stream) const {
  return execute(buffers, workspace, stream, ExecuteOptions{});
}

Status Plan::execute(const std::unordered_map<int64_t, void*>& buffers, void* workspace, void* stream,
                     const ExecuteOptions& options) const {
  const State& s = *state_;
  if (!s.prepared)
    return Status(StatusCode::CudaError, "plan is not loaded on a GPU (Plan::prepare() failed or was not run)");
  const KvExtent* kv = options.kv_extent ? &*options.kv_extent : nullptr;
  if (kv) RIME_RETURN_IF_ERROR(check_kv_extent(s.facts, *kv));
  const engines::RoleBuffers by_role = engines::role_buffers(s.facts, buffers);
  RIME_RETURN_IF_ERROR(check_bindings(s.facts, by_role, workspace, s.config.derived.workspace_bytes, kv));
  const driver::Api* api = driver::api();
  const driver::ScopedContext in_ctx(s.context);
  RIME_RETURN_IF_ERROR(in_ctx.status());
  CUstream cu_stream = static_cast<CUstream>(stream);
  if (options.check_indices)
    RIME_RETURN_IF_ERROR(check_indices(s.checker, s.facts, by_role, cu_stream, s.context, kv ? kv->length : s.facts.S_kv));
  for (Role r : {Role::AmaxO, Role::AmaxS}) {
    if (void* amax = by_role[static_cast<size_t>(r)])
      RIME_RETURN_IF_ERROR(driver::check(api->cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(amax), 0, 1, cu_stream),
                                         "cuMemsetD32Async(Amax)"));
  }
  return launch(s, by_role, workspace, cu_stream, 0, static_cast<int>(s.config.derived.stages.size()), true, kv);
}

Status PlanInternals::launch_stages(const Plan& plan, const engines::RoleBuffers& buffers, void* workspace,
                                    CUstream stream, int first, int end) {
  const Plan::State& s = *plan.state_;
  if (!s.prepared)
    return Status(StatusCode::CudaError, "plan is not loaded on a GPU (Plan::prepare() failed or was not run)");
  if (first < 0 || end > static_cast<int>(s.config.derived.stages.size()) || first > end)
    return Status(StatusCode::Internal, fmt::format("stages [{}, {}) of a plan of {}", first, end,
                                                    s.config.derived.stages.size()));
  RIME_RETURN_IF_ERROR(check_bindings(s.facts, buffers, workspace, s.config.derived.workspace_bytes));
  const driver::ScopedContext in_ctx(s.context);
  RIME_RETURN_IF_ERROR(in_ctx.status());
  return launch(s, buffers, workspace, stream, first, end, false);
}

}  // namespace rime
