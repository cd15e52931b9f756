// rime::tune (include/rime/tune.hpp): every configuration the rows accept for a graph, timed on the GPU with the
// same inputs, and the fastest recorded in the plan cache (src/plan/tuned.hpp).
#include "rime/tune.hpp"

#include <cuda.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "plan/build_batch.hpp"
#include "plan/tuned.hpp"
#include "rime/inspect/config.hpp"
#include "rime/inspect/facts.hpp"
#include "rime/json.hpp"
#include "rime/plan.hpp"
#include "runtime/driver.hpp"
#include "status_macros.hpp"

namespace rime {
namespace {

// Device memory released on scope exit.
struct DeviceBuffer {
  CUdeviceptr ptr = 0;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr) driver::api()->cuMemFree(ptr);
  }
};

struct Events {
  std::vector<CUevent> events;
  ~Events() {
    for (CUevent e : events) driver::api()->cuEventDestroy(e);
  }
};

uint64_t next_random(uint64_t& s) {  // xorshift64*
  s ^= s >> 12;
  s ^= s << 25;
  s ^= s >> 27;
  return s * 0x2545F4914F6CDD1Dull;
}

// A host pattern of `bytes` bytes of values of `t` for timing: finite, of magnitudes around 1 (random signs and
// mantissas, so that the softmax's maxima move as with real data), scales and E8M0 block scales 1.
std::vector<uint8_t> pattern(DataType t, size_t bytes, uint64_t seed) {
  std::vector<uint8_t> out(bytes);
  uint64_t s = seed | 1;
  auto half_of = [](float x, bool bf16) -> uint16_t {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    if (bf16) return static_cast<uint16_t>(u >> 16);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const int exp = static_cast<int>((u >> 23) & 0xFF) - 127 + 15;
    if (exp <= 0) return static_cast<uint16_t>(sign);  // below FP16's normals: zero (never drawn below)
    return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exp) << 10) | ((u >> 13) & 0x3FFu));
  };
  switch (t) {
    case DataType::FP8_E4M3:  // exponents 2^-3 .. 2^1
      for (uint8_t& b : out) {
        const uint64_t r = next_random(s);
        b = static_cast<uint8_t>(((r >> 8) & 0x80u) | ((4 + r % 5) << 3) | ((r >> 16) & 7u));
      }
      break;
    case DataType::FP8_E5M2:  // exponents 2^-3 .. 2^1
      for (uint8_t& b : out) {
        const uint64_t r = next_random(s);
        b = static_cast<uint8_t>(((r >> 8) & 0x80u) | ((12 + r % 5) << 2) | ((r >> 16) & 3u));
      }
      break;
    case DataType::FP4_E2M1:  // every E2M1 code is finite
      for (uint8_t& b : out) b = static_cast<uint8_t>(next_random(s));
      break;
    case DataType::FP8_E8M0:
      std::fill(out.begin(), out.end(), uint8_t{127});  // 2^0
      break;
    case DataType::BF16:
    case DataType::FP16:
      for (size_t i = 0; i + 1 < bytes; i += 2) {
        const uint64_t r = next_random(s);
        float x = 0.125f + static_cast<float>(r % 1000000) / 1000000.0f;  // 0.125 .. 1.125
        if (r >> 63) x = -x;
        const uint16_t h = half_of(x, t == DataType::BF16);
        std::memcpy(&out[i], &h, 2);
      }
      break;
    default: {  // FP32 (scales, sinks) and wider: 1.0
      const float one = 1.0f;
      for (size_t i = 0; i + 3 < bytes; i += 4) std::memcpy(&out[i], &one, 4);
      break;
    }
  }
  return out;
}

// The INT32 contents of an index tensor: full lengths, evenly split ragged offsets, page tables that address
// distinct pages (sequence after sequence, wrapping over the pool).
std::vector<int32_t> indices(Role r, const Facts& f, int64_t elements) {
  std::vector<int32_t> out(static_cast<size_t>(elements), 0);
  auto offsets = [&](int64_t T, int64_t S) {
    const int64_t per = std::min(S, T / std::max<int64_t>(f.B, 1));
    for (int64_t b = 0; b < elements; ++b) out[static_cast<size_t>(b)] = static_cast<int32_t>(b * per);
  };
  switch (r) {
    case Role::SeqLenQ: std::fill(out.begin(), out.end(), static_cast<int32_t>(f.S_q)); break;
    case Role::SeqLenKv: std::fill(out.begin(), out.end(), static_cast<int32_t>(f.S_kv)); break;
    case Role::CuSeqlensQ: offsets(f.T_q, f.S_q); break;
    case Role::CuSeqlensKv: offsets(f.T_kv, f.S_kv); break;
    case Role::PageTable:
      for (int64_t i = 0; i < elements; ++i)
        out[static_cast<size_t>(i)] = static_cast<int32_t>(i % std::max<int64_t>(f.num_pages, 1));
      break;
    default: break;
  }
  return out;
}

// Device buffers for every tensor of the graph, filled for timing.
struct Inputs {
  std::vector<std::unique_ptr<DeviceBuffer>> owned;
  std::unordered_map<int64_t, void*> by_uid;
};

Status make_inputs(const Facts& f, Inputs& in) {
  const driver::Api* api = driver::api();
  for (int r = 0; r < kRoleCount; ++r) {
    const TensorFacts& tf = f.tensors[static_cast<size_t>(r)];
    if (!tf.bound) continue;
    auto buf = std::make_unique<DeviceBuffer>();
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(tf.storage_bytes, 16));
    RIME_RETURN_IF_ERROR(driver::check(api->cuMemAlloc(&buf->ptr, bytes), "cuMemAlloc (tune inputs)"));
    const Role role = static_cast<Role>(r);
    if (!is_output_role(role)) {
      std::vector<uint8_t> host;
      if (tf.dtype == DataType::INT32) {
        const std::vector<int32_t> v = indices(role, f, static_cast<int64_t>(bytes / 4));
        host.resize(v.size() * 4);
        std::memcpy(host.data(), v.data(), host.size());
      } else {
        host = pattern(tf.dtype, std::min<size_t>(bytes, size_t{4} << 20), 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(r));
      }
      for (size_t off = 0; off < bytes; off += host.size())
        RIME_RETURN_IF_ERROR(driver::check(
            api->cuMemcpyHtoD(buf->ptr + off, host.data(), std::min(host.size(), bytes - off)), "cuMemcpyHtoD (tune inputs)"));
    }
    in.by_uid[tf.uid] = reinterpret_cast<void*>(buf->ptr);
    in.owned.push_back(std::move(buf));
  }
  return Status::success();
}

// The median time of one execute, after two warm-up executes.
Result<double> time_plan(const Plan& p, const Inputs& in, void* workspace, int iterations) {
  const driver::Api& t = *driver::api();
  for (int i = 0; i < 2; ++i) RIME_RETURN_IF_ERROR(p.execute(in.by_uid, workspace, nullptr));
  Events ev;
  ev.events.resize(static_cast<size_t>(2 * iterations), nullptr);
  for (CUevent& e : ev.events) RIME_RETURN_IF_ERROR(driver::check(t.cuEventCreate(&e, 0), "cuEventCreate"));
  for (int i = 0; i < iterations; ++i) {
    RIME_RETURN_IF_ERROR(driver::check(t.cuEventRecord(ev.events[2 * static_cast<size_t>(i)], nullptr), "cuEventRecord"));
    RIME_RETURN_IF_ERROR(p.execute(in.by_uid, workspace, nullptr));
    RIME_RETURN_IF_ERROR(
        driver::check(t.cuEventRecord(ev.events[2 * static_cast<size_t>(i) + 1], nullptr), "cuEventRecord"));
  }
  RIME_RETURN_IF_ERROR(driver::check(t.cuEventSynchronize(ev.events.back()), "cuEventSynchronize"));
  std::vector<double> ms(static_cast<size_t>(iterations));
  for (int i = 0; i < iterations; ++i) {
    float v = 0;
    RIME_RETURN_IF_ERROR(driver::check(
        t.cuEventElapsedTime(&v, ev.events[2 * static_cast<size_t>(i)], ev.events[2 * static_cast<size_t>(i) + 1]),
        "cuEventElapsedTime"));
    ms[static_cast<size_t>(i)] = v;
  }
  std::nth_element(ms.begin(), ms.begin() + iterations / 2, ms.end());
  return ms[static_cast<size_t>(iterations / 2)];
}

// The graph with (tile, split) pinned as knobs, as a user would write them.
Result<Graph> pinned(const Graph& g, const Decision& d) {
  nlohmann::json j = nlohmann::json::parse(graph_to_json(g, false));
  j["op"]["knobs"] = {{"split_kv", d.split_kv}, {"tile", {{"q", d.tile.q}, {"kv", d.tile.kv}}}};
  return graph_from_json(j.dump());
}

bool same(const Decision& a, const Decision& b) {
  return a.row_id == b.row_id && a.tile == b.tile && a.consumer_warpgroups == b.consumer_warpgroups &&
         a.split_kv == b.split_kv;
}

}  // namespace

Result<TuneReport> tune(const Graph& graph, const TuneOptions& options) {
  if (options.iterations < 1)
    return Status(StatusCode::InvalidArgument, fmt::format("tune: iterations {} (at least 1)", options.iterations));
  PlanOptions base;
  base.device_ordinal = options.device_ordinal;
  base.use_tuned = false;
  Result<Plan> heuristic = Plan::build(graph, base);
  if (!heuristic.ok()) return heuristic.status();
  if (heuristic->facts().pinned_split || heuristic->facts().pinned_tile)
    return Status(StatusCode::InvalidArgument,
                  "tune: the graph pins split_kv or tile (/op/knobs): there is nothing to tune; remove the knobs");
  if (!heuristic->prepared())
    return Status(StatusCode::CudaError, "tune: the plan is not loaded on a GPU; tuning times candidates on one");
  const Facts& f = heuristic->facts();
  const Decision& chosen = heuristic->config().decision;
  base.device_ordinal = heuristic->device_ordinal();

  // The candidates' plans, built on every core (NVRTC compiles one kernel per thread).
  std::vector<Decision> todo;
  for (const Config& c : tuning_candidates(f))
    if (!same(c.decision, chosen)) todo.push_back(c.decision);
  const std::vector<Result<Plan>> plans = build_plans_in_batches(todo.size(), [&](size_t j) -> Result<Plan> {
    Result<Graph> g = pinned(graph, todo[j]);
    if (!g.ok()) return g.status();
    return Plan::build(g.value(), base);
  });

  Result<CUcontext> ctx = driver::primary_context(heuristic->device_ordinal());
  if (!ctx.ok()) return ctx.status();
  const driver::ScopedContext in_ctx(ctx.value());
  RIME_RETURN_IF_ERROR(in_ctx.status());
  Inputs inputs;
  RIME_RETURN_IF_ERROR(make_inputs(f, inputs));
  int64_t workspace_bytes = heuristic->workspace_size();
  for (const Result<Plan>& p : plans)
    if (p.ok()) workspace_bytes = std::max(workspace_bytes, p->workspace_size());
  DeviceBuffer workspace;
  if (workspace_bytes > 0)
    RIME_RETURN_IF_ERROR(driver::check(driver::api()->cuMemAlloc(&workspace.ptr, static_cast<size_t>(workspace_bytes)),
                                       "cuMemAlloc (tune workspace)"));
  void* ws = reinterpret_cast<void*>(workspace.ptr);

  TuneReport report;
  report.device = f.device.name;
  const size_t total = todo.size() + 1;
  auto run = [&](const Plan* p, const Status& built, const Decision& d) {
    TuneCandidate c;
    c.decision = d;
    if (options.progress)
      options.progress(fmt::format("[{}/{}] {}{}", report.candidates.size() + 1, total, tuned::describe(d),
                                   report.candidates.empty() ? " (the heuristics' choice)" : ""));
    Result<double> ms = p ? time_plan(*p, inputs, ws, options.iterations) : Result<double>(built);
    if (ms.ok()) {
      c.ms = ms.value();
      if (options.progress) options.progress(fmt::format("      {:.4f} ms", c.ms));
    } else {
      c.error = ms.status().to_string();
      if (options.progress) options.progress("      failed: " + c.error);
    }
    report.candidates.push_back(c);
  };
  run(&heuristic.value(), Status::success(), chosen);
  if (!report.candidates[0].error.empty())
    return Status(StatusCode::CudaError, "tune: the heuristics' own plan failed: " + report.candidates[0].error);
  for (size_t k = 0; k < todo.size(); ++k) {
    const Result<Plan>& p = plans[k];
    // A pinned plan whose decision is not the candidate's (it cannot happen through the rows) is not timed as it.
    if (p.ok() && !same(p->config().decision, todo[k])) {
      run(nullptr, Status(StatusCode::Internal, "the pinned plan chose " + tuned::describe(p->config().decision)),
          todo[k]);
      continue;
    }
    run(p.ok() ? &p.value() : nullptr, p.ok() ? Status::success() : p.status(), todo[k]);
  }
  report.winner = tuned::fastest(report.candidates);

  const int driver_version = tuned::driver_version();
  tuned::Choice choice;
  choice.decision = report.candidates[report.winner].decision;
  choice.ms = report.candidates[report.winner].ms;
  choice.heuristic = chosen;
  choice.heuristic_ms = report.candidates[0].ms;
  choice.candidates = static_cast<int>(report.candidates.size());
  choice.iterations = options.iterations;
  choice.graph_name = graph.name();
  choice.shape_class = tuned::shape_class(graph);
  choice.device = f.device.name;
  choice.sm_count = f.device.sm_count;
  choice.arch = f.device.arch_name();
  choice.driver_version = driver_version;
  choice.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  choice.key = report.key = tuned::key(choice.shape_class, f.device, driver_version);
  if (options.record) {
    RIME_RETURN_IF_ERROR(tuned::record(choice));
    report.recorded = true;
  }
  return report;
}

}  // namespace rime
