// The rime extension module (nanobind): the C++ API one to one, no torch. A failed call raises the exception class
// of its StatusCode (python/rime/errors.py) with the message, the JSON pointer and, for NotSupported, every row's
// reason. Planning, compiling, loading and running release the GIL.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unordered_map.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/disk_cache.hpp"
#include "rime/inspect/config.hpp"
#include "rime/json.hpp"
#include "rime/plan.hpp"
#include "rime/version.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

// A Status that is not ok, carried to the translator below.
struct StatusError {
  rime::Status status;
};

void check(const rime::Status& s) {
  if (!s.ok()) throw StatusError{s};
}
template <class T>
T take(rime::Result<T>&& r) {
  if (!r.ok()) throw StatusError{r.status()};
  return std::move(r).value();
}

rime::PlanOptions options_for(const std::optional<std::string>& arch, const std::optional<int>& sms) {
  rime::PlanOptions o;
  if (arch || sms) {
    rime::Result<rime::DeviceDesc> h200 = rime::DeviceDesc::from_arch(arch.value_or("sm_90a"), sms.value_or(132));
    o.device = take(std::move(h200));
    o.device_source = "given by --arch/--sms";  // the CLI's words, so that explain() reads as `rime plan --explain`
  }
  return o;
}

// A device pointer: an int, or an object with data_ptr() (a torch tensor) -- never a copy or a conversion.
void* pointer_of(const nb::handle& h, const std::string& what) {
  if (nb::isinstance<nb::int_>(h)) return reinterpret_cast<void*>(nb::cast<uintptr_t>(h));
  if (nb::hasattr(h, "data_ptr")) return reinterpret_cast<void*>(nb::cast<uintptr_t>(h.attr("data_ptr")()));
  throw StatusError{rime::Status(rime::StatusCode::InvalidArgument,
                                 what + ": expected a device pointer (an int) or an object with data_ptr()")};
}

nb::dict kernel_dict(const rime::KernelInfo& k) {
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

}  // namespace

NB_MODULE(_rime, m) {
  m.doc() = "rime: attention graphs compiled into cached GPU plans (docs/python.md)";
  m.attr("__version__") = rime::kVersion;

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      nb::object errors = nb::module_::import_("rime.errors");
      nb::object exc = errors.attr("from_status")(rime::to_string(e.status.code()), e.status.message(),
                                                  e.status.location());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    }
  });

  nb::class_<rime::Graph>(m, "Graph", "A validated attention graph (docs/graph-json.md).")
      .def_static(
          "from_json", [](const std::string& text) { return take(rime::graph_from_json(text)); }, "text"_a,
          "Parses and validates a graph document; InvalidJsonError / InvalidGraphError name the field.")
      .def_prop_ro("name", [](const rime::Graph& g) { return g.name(); })
      .def_prop_ro("hash", [](const rime::Graph& g) { return rime::graph_hash(g); }, "sha256 of the canonical form")
      .def("to_json", [](const rime::Graph& g, bool pretty) { return rime::graph_to_json(g, pretty); },
           "pretty"_a = true);

  m.def(
      "validate", [](const rime::Graph& g) { check(rime::validate(g)); }, "graph"_a,
      "Raises InvalidGraphError (with .location) when the graph breaks a rule.");

  nb::class_<rime::Plan>(m, "Plan", "A graph compiled for one device (docs/plan-json.md).")
      .def_static(
          "load", [](const std::string& artifact) { return take(rime::Plan::load(artifact)); }, "artifact"_a,
          nb::call_guard<nb::gil_scoped_release>(), "Restores a plan from Plan.to_json() (kernels from the cache).")
      .def("to_json", &rime::Plan::to_json)
      .def_prop_ro("workspace_size", &rime::Plan::workspace_size, "bytes of device memory run() needs")
      .def_prop_ro("row", [](const rime::Plan& p) { return p.config().decision.row_id; })
      .def_prop_ro("split_kv", [](const rime::Plan& p) { return p.config().decision.split_kv; })
      .def_prop_ro("consumer_warpgroups", [](const rime::Plan& p) { return p.config().decision.consumer_warpgroups; })
      .def_prop_ro("tile", [](const rime::Plan& p) {
        return std::vector<int>{p.config().decision.tile.q, p.config().decision.tile.kv};
      })
      .def_prop_ro("kernels",
                   [](const rime::Plan& p) {
                     nb::list out;
                     for (const rime::KernelInfo& k : p.kernels()) out.append(kernel_dict(k));
                     return out;
                   })
      .def_prop_ro("prepared", &rime::Plan::prepared)
      .def(
          "explain", [](const rime::Plan& p, bool as_json) { return as_json ? p.explain().json : p.explain().text; },
          "json"_a = false, "The text of `rime plan --explain` (json=True: its JSON document).")
      .def(
          "run",
          [](const rime::Plan& p, const nb::dict& buffers, const nb::handle& workspace, uintptr_t stream) {
            // By tensor name or uid; converted before the GIL is released.
            std::unordered_map<int64_t, void*> by_uid;
            for (auto [key, value] : buffers) {
              int64_t uid = -1;
              if (nb::isinstance<nb::int_>(key)) {
                uid = nb::cast<int64_t>(key);
              } else {
                const std::string name = nb::cast<std::string>(key);
                for (const rime::TensorDesc& t : p.graph().tensors())
                  if (t.name == name) uid = t.uid;
                if (uid < 0)
                  throw StatusError{rime::Status(rime::StatusCode::InvalidArgument,
                                                 "run(): the graph has no tensor named '" + name + "'")};
              }
              by_uid[uid] = pointer_of(value, "buffer " + nb::cast<std::string>(nb::str(key)));
            }
            void* ws = workspace.is_none() ? nullptr : pointer_of(workspace, "workspace");
            rime::Status s;
            {
              nb::gil_scoped_release release;
              s = p.execute(by_uid, ws, reinterpret_cast<void*>(stream));
            }
            check(s);
          },
          "buffers"_a, "workspace"_a = nb::none(), "stream"_a = 0,
          "Runs the plan on `stream` (a CUstream as an int; 0 the legacy default stream): no allocation, copy, "
          "synchronization or compile.");

  m.def(
      "plan",
      [](const rime::Graph& g, std::optional<std::string> arch, std::optional<int> sms) {
        rime::PlanOptions o = options_for(arch, sms);
        nb::gil_scoped_release release;
        return take(rime::Plan::build(g, o));
      },
      "graph"_a, "arch"_a = nb::none(), "sms"_a = nb::none(),
      "Validates, matches the capability rows, chooses and compiles (through the plan cache). Without arch/sms: "
      "the current GPU, else the H200 defaults.");
  m.def(
      "explain",
      [](const rime::Graph& g, std::optional<std::string> arch, std::optional<int> sms, bool as_json) {
        rime::PlanOptions o = options_for(arch, sms);
        rime::Explanation e;
        {
          nb::gil_scoped_release release;
          e = take(rime::explain(g, o));
        }
        return as_json ? e.json : e.text;
      },
      "graph"_a, "arch"_a = nb::none(), "sms"_a = nb::none(), "json"_a = false,
      "The text of `rime plan --explain` for any graph, also one no row serves (its rows' reasons).");
  m.def(
      "set_cache_dir", [](const std::string& dir) { check(rime::set_cache_dir(dir)); }, "dir"_a,
      "The plan cache's directory for this process; before the first plan only.");
  m.def(
      "cache_entries",
      []() {
        nb::list out;
        const rime::cache::Settings& s = rime::cache::settings();
        if (!s.cache) return out;
        std::vector<rime::cache::EntryInfo> entries;
        {
          nb::gil_scoped_release release;
          entries = s.cache->list(true);
        }
        for (const auto& e : entries) {
          nb::dict d;
          d["name"] = e.name;
          d["kind"] = e.kind == rime::cache::EntryKind::Entry       ? "entry"
                      : e.kind == rime::cache::EntryKind::OtherFormat ? "other-format"
                                                                    : "foreign";
          d["kernel"] = e.name_expression;
          d["arch"] = e.arch;
          d["bytes"] = e.bytes;
          d["valid"] = e.valid;
          d["problem"] = e.problem;
          out.append(d);
        }
        return out;
      },
      "The plan cache's entries, as `rime cache ls --json` lists them.");
  m.def("cache_dir", []() { return rime::cache::settings().dir; }, "The plan cache's directory (empty: memory only).");
}
