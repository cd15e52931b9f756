// Plans: plan(), explain(), tune() and the Plan object (docs/plan-json.md).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "binding.hpp"
#include "rime/inspect/config.hpp"
#include "rime/log.hpp"
#include "rime/tune.hpp"

namespace rime::python {
namespace {

nb::dict kernel_dict(const KernelInfo& k) {
  nb::dict d;
  d["role"] = k.role;
  d["engine"] = k.engine;
  d["name"] = k.name_expression;
  d["lowered_name"] = k.lowered_name;
  d["key"] = k.key;
  d["arch"] = k.arch;
  d["origin"] = k.origin;
  d["compile_ms"] = k.compile_ms;
  d["cubin_bytes"] = k.cubin_bytes;
  return d;
}

// plan()'s and explain()'s context_parallel=(comm, rank, world): the ncclComm_t as an address.
std::optional<ContextParallel> context_parallel_of(const std::optional<std::tuple<uintptr_t, int, int>>& t) {
  if (!t) return std::nullopt;
  return ContextParallel{reinterpret_cast<void*>(std::get<0>(*t)), std::get<1>(*t), std::get<2>(*t)};
}

}  // namespace

void bind_plan(nb::module_& m) {
  using namespace nb::literals;
  nb::class_<Plan>(m, "Plan", "A graph compiled for one device (docs/plan-json.md).")
      .def_static(
          "load",
          [](const std::string& artifact, nb::handle device) {
            const std::optional<int> ordinal = ordinal_of(device);
            nb::gil_scoped_release release;
            return take(rime::Plan::load(artifact, ordinal));
          },
          "artifact"_a, "device"_a = nb::none(),
          "Restores a plan from Plan.to_json() (kernels from the cache), loaded on `device` as plan() loads.")
      .def("to_json", &Plan::to_json)
      .def_prop_ro("graph", &Plan::graph, "the graph the plan was made from")
      .def_prop_ro("workspace_size", &Plan::workspace_size, "bytes of device memory run() needs")
      .def_prop_ro("row", [](const Plan& p) { return p.config().decision.row_id; })
      .def_prop_ro("split_kv", [](const Plan& p) { return p.config().decision.split_kv; })
      .def_prop_ro("consumer_warpgroups", [](const Plan& p) { return p.config().decision.consumer_warpgroups; })
      .def_prop_ro("tile", [](const Plan& p) {
        return std::vector<int>{p.config().decision.tile.q, p.config().decision.tile.kv};
      })
      .def_prop_ro("kernels",
                   [](const Plan& p) {
                     nb::list out;
                     for (const KernelInfo& k : p.kernels()) out.append(kernel_dict(k));
                     return out;
                   })
      .def_prop_ro("prepared", &Plan::prepared)
      .def_prop_ro("device", &Plan::device_ordinal, "the CUDA device the kernels are loaded on (-1: none)")
      .def_prop_ro(
          "uids",
          [](const Plan& p) {
            std::vector<int64_t> out;
            for (const TensorDesc& t : p.graph().tensors()) out.push_back(t.uid);
            return out;
          },
          "The graph's tensor uids in declaration order: the order run_pointers() takes its pointers in.")
      .def(
          "explain",
          [](const Plan& p, bool as_dict) -> nb::object {
            const Explanation e = p.explain();
            return as_dict ? json_loads(e.json) : nb::str(e.text.c_str());
          },
          "json"_a = false, "The text of `rime plan --explain` (json=True: the fields of `rime plan --json`, a dict).")
      .def(
          "run",
          [](const Plan& p, const nb::dict& buffers, nb::handle workspace, nb::handle stream) {
            const int device = p.device_ordinal();
            execute(p, pointers_by_uid(p.graph(), buffers, device, "run()"), workspace_of(workspace, device),
                    stream_of(stream));
          },
          "buffers"_a, "workspace"_a = nb::none(), "stream"_a = nb::none(),
          "Runs the plan on `stream` (an int CUstream, a stream object, or None: the legacy default stream). "
          "buffers: by tensor name or uid, a device pointer (int, unchecked) or a tensor (data_ptr() or "
          "__dlpack__) whose dtype, shape, strides and device must be the graph's. No allocation, copy, cast, "
          "synchronization or compile: capturable in a CUDA graph.")
      .def(
          "run_pointers",
          [](const Plan& p, const std::vector<uintptr_t>& pointers, uintptr_t workspace, uintptr_t stream) {
            execute(p, pointers_in_order(p.graph(), pointers, "run_pointers()"), reinterpret_cast<void*>(workspace),
                    reinterpret_cast<void*>(stream));
          },
          "pointers"_a, "workspace"_a = 0, "stream"_a = 0,
          "run() for callers that built the graph from their tensors: one device pointer per graph tensor, in the "
          "order of Plan.uids, taken unchecked (the library still checks null, alignment and overlap).");

  m.def(
      "plan",
      [](const Graph& g, nb::handle device, std::optional<std::string> arch, std::optional<int> sms,
         bool use_tuned, std::optional<std::tuple<uintptr_t, int, int>> context_parallel) {
        PlanOptions o = options_for(device, arch, sms);
        o.use_tuned = use_tuned;
        o.context_parallel = context_parallel_of(context_parallel);
        nb::gil_scoped_release release;
        return take(Plan::build(g, o));
      },
      "graph"_a, "device"_a = nb::none(), "arch"_a = nb::none(), "sms"_a = nb::none(), "use_tuned"_a = true,
      "context_parallel"_a = nb::none(),
      "Validates, matches the capability rows, chooses and compiles (through the plan cache), and loads the kernels "
      "on `device` (None: the current GPU; an int, 'cuda:N' or a torch.device). arch/sms: plan for that device "
      "instead of querying one (the other from the H200's); no GPU: the H200 defaults. use_tuned: the configuration "
      "rime.tune recorded for this shape class and GPU, where there is one and the rows accept it. "
      "context_parallel=(comm, rank, world): this graph is rank `rank`'s shard of K/V over `world` GPUs, and `comm` "
      "the address of the caller's ncclComm_t over them (an int, e.g. cupy's NcclCommunicator.ptr); each run "
      "all-gathers the ranks' partials with NCCL and every rank gets the whole O (docs/context-parallel.md).");
  m.def(
      "tune",
      [](const Graph& g, nb::handle device, int iterations, bool record) {
        TuneOptions o;
        o.device_ordinal = ordinal_of(device);
        o.iterations = iterations;
        o.record = record;
        // Progress through the library's log, which reaches Python's logging (logger `rime`) like compile lines.
        o.progress = [](const std::string& line) { write_log(LogLevel::Info, "tune: " + line); };
        Result<TuneReport> r = Status();
        {
          nb::gil_scoped_release release;
          r = rime::tune(g, o);
        }
        const TuneReport rep = take(std::move(r));
        nb::list candidates;
        for (size_t i = 0; i < rep.candidates.size(); ++i) {
          const TuneCandidate& c = rep.candidates[i];
          nb::dict d;
          d["row"] = c.decision.row_id;
          d["tile"] = nb::make_tuple(c.decision.tile.q, c.decision.tile.kv);
          d["consumer_warpgroups"] = c.decision.consumer_warpgroups;
          d["split_kv"] = c.decision.split_kv;
          d["ms"] = c.ms;
          d["heuristic"] = i == 0;
          d["error"] = c.error;
          candidates.append(d);
        }
        nb::dict out;
        out["device"] = rep.device;
        out["key"] = rep.key;
        out["recorded"] = rep.recorded;
        out["winner"] = candidates[rep.winner];
        out["winner_ms"] = rep.candidates[rep.winner].ms;
        out["heuristic_ms"] = rep.candidates[0].ms;
        out["candidates"] = candidates;
        return out;
      },
      "graph"_a, "device"_a = nb::none(), "iterations"_a = 20, "record"_a = true,
      "Times every configuration the rows accept for the graph on `device` (the heuristics' first), and records the "
      "fastest in the plan cache for this GPU, driver and rime version (record=False: report only). Returns device, "
      "key, recorded, winner, winner_ms, heuristic_ms and candidates (row, tile, consumer_warpgroups, split_kv, ms, "
      "heuristic, error). Progress goes to logging (logger `rime`).");
  m.def(
      "explain",
      [](const Graph& g, nb::handle device, std::optional<std::string> arch, std::optional<int> sms,
         bool as_dict, bool use_tuned, std::optional<std::tuple<uintptr_t, int, int>> context_parallel) -> nb::object {
        PlanOptions o = options_for(device, arch, sms);
        o.use_tuned = use_tuned;
        o.context_parallel = context_parallel_of(context_parallel);
        Explanation e;
        {
          nb::gil_scoped_release release;
          e = take(rime::explain(g, o));
        }
        return as_dict ? json_loads(e.json) : nb::str(e.text.c_str());
      },
      "graph"_a, "device"_a = nb::none(), "arch"_a = nb::none(), "sms"_a = nb::none(), "json"_a = false,
      "use_tuned"_a = true, "context_parallel"_a = nb::none(),
      "The text of `rime plan --explain` for any graph, also one no row serves (its rows' reasons); json=True: the "
      "fields of `rime plan --json`, a dict. context_parallel: as for plan().");

}

}  // namespace rime::python
