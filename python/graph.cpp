// Graphs: parsed and validated documents (docs/graph-json.md).
#include <nanobind/stl/vector.h>

#include "binding.hpp"
#include "rime/json.hpp"

namespace rime::python {
namespace {

nb::dict tensor_dict(const TensorDesc& t) {
  nb::dict d;
  d["name"] = t.name;
  d["uid"] = t.uid;
  d["dims"] = t.dims;
  d["strides"] = t.strides;
  d["dtype"] = std::string(to_string(t.dtype));
  d["output"] = t.is_output;
  return d;
}

}  // namespace

void bind_graph(nb::module_& m) {
  using namespace nb::literals;
  nb::class_<Graph>(m, "Graph", "A validated attention graph (docs/graph-json.md).")
      .def_static(
          "from_json", [](const std::string& text) { return take(graph_from_json(text)); }, "text"_a,
          "Parses and validates a graph document; InvalidJsonError / InvalidGraphError name the field.")
      .def_prop_ro("name", [](const Graph& g) { return g.name(); })
      .def_prop_ro("hash", [](const Graph& g) { return graph_hash(g); }, "sha256 of the canonical form")
      .def_prop_ro(
          "tensors",
          [](const Graph& g) {
            nb::list out;
            for (const TensorDesc& t : g.tensors()) out.append(tensor_dict(t));
            return out;
          },
          "Every tensor, in declaration order: name, uid, dims, strides, dtype, output.")
      .def("to_json", [](const Graph& g, bool pretty) { return graph_to_json(g, pretty); },
           "pretty"_a = true);

  m.def(
      "validate", [](const Graph& g) { check(validate(g)); }, "graph"_a,
      "Raises InvalidGraphError (with .location) when the graph breaks a rule.");

}

}  // namespace rime::python
