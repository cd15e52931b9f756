// What the binding's areas share (module.cpp is the entry, one file per area below): the status carried to
// Python's exceptions and the device and option arguments (arguments.cpp), and the one path from a caller's buffers
// to an execute (buffers.cpp). Only rime's public headers are included (tests/test_layering.cpp checks it).
#pragma once

#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>  // every area passes strings; a missing caster is a std::bad_cast at run time

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rime/graph.hpp"
#include "rime/plan.hpp"
#include "rime/status.hpp"

namespace rime::python {

namespace nb = nanobind;

// A Status that is not ok, carried to the exception translator (module.cpp): the exception class of its code
// (python/rime/errors.py) with the message and the JSON pointer.
struct StatusError {
  Status status;
};

inline void check(const Status& s) {
  if (!s.ok()) throw StatusError{s};
}
template <class T>
T take(Result<T>&& r) {
  if (!r.ok()) throw StatusError{r.status()};
  return std::move(r).value();
}
[[noreturn]] void invalid_argument(const std::string& message);

// str(h), as Python spells it.
std::string text_of(nb::handle h);
// An interned attribute name, created once and never released (it outlives the interpreter's teardown of modules).
PyObject* interned(const char* s);
// A JSON document as Python objects.
nb::object json_loads(const std::string& text);

// A CUDA device: None (the current one), an ordinal, "cuda" / "cuda:N", or an object with `type` and `index`
// (torch.device).
std::optional<int> ordinal_of(nb::handle device);
// `device` names the GPU to plan for and load on (ordinal_of); arch/sms plan for a device described instead of
// queried.
PlanOptions options_for(nb::handle device, const std::optional<std::string>& arch, const std::optional<int>& sms);

// ---- buffers.cpp: from a caller's buffers to an execute ----------------------------------------------------------

using PointersByUid = std::unordered_map<int64_t, void*>;

// A Python int that must be a non-negative 64-bit value (a pointer): the argument `name` (a tensor's name, the
// stream, the workspace) or its `field`, named in the message (built on the error path only).
uintptr_t as_pointer(PyObject* o, const std::string& name, const char* field = "");
// run()'s buffers (by tensor name or uid: a device pointer, or a tensor checked against the graph's dtype, shape,
// strides and device) as pointers by uid; every object read and checked before the GIL is released. `what`: the
// caller's name, for the messages.
PointersByUid pointers_by_uid(const Graph& graph, const nb::dict& buffers, int device, const std::string& what);
// One device pointer per graph tensor, in declaration order (Plan.uids), as pointers by uid.
PointersByUid pointers_in_order(const Graph& graph, const std::vector<uintptr_t>& pointers, const std::string& what);
// A CUstream: an int, an object with `cuda_stream` (torch.cuda.Stream), or the CUDA stream protocol; None is the
// legacy default stream.
void* stream_of(nb::handle h);
// A workspace: None, a device pointer (an int) or a tensor with data_ptr() on the plan's device.
void* workspace_of(nb::handle h, int plan_device);

// The execute every run path ends in (Plan.run, Plan.run_pointers, RingPlan.run, the torch layer's binding): the
// GIL released around it, a failure raised.
template <class Executable>
void execute(const Executable& plan, const PointersByUid& by_uid, void* workspace, void* stream) {
  Status s;
  {
    nb::gil_scoped_release release;
    s = plan.execute(by_uid, workspace, stream);
  }
  check(s);
}

// The same with options (a plan's: a RingPlan takes none).
inline void execute(const Plan& plan, const PointersByUid& by_uid, void* workspace, void* stream,
                    const ExecuteOptions& options) {
  Status s;
  {
    nb::gil_scoped_release release;
    s = plan.execute(by_uid, workspace, stream, options);
  }
  check(s);
}

// ---- the areas -----------------------------------------------------------------------------------------------------

void bind_graph(nb::module_& m);  // Graph, validate
void bind_plan(nb::module_& m);   // Plan, plan, explain, tune
void bind_ring(nb::module_& m);   // RingPlan, ring_plan, the NCCL communicator calls
void bind_cache(nb::module_& m);  // set_cache_dir, cache_dir and the cache's reports
void bind_torch(nb::module_& m);  // the torch layer's per-call path (python/rime/torch/)

}  // namespace rime::python
