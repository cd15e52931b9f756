// The plan cache (docs/cache.md): its directory, and the reports `rime cache <action> --json` prints
// (rime/cache.hpp), as Python objects for python/rime/cache.py.
#include <nanobind/stl/optional.h>

#include <cstdint>
#include <optional>
#include <string>

#include "binding.hpp"
#include "rime/cache.hpp"

namespace rime::python {
namespace {

// A report made without the GIL (it reads the directory, and verify re-hashes every cubin), as Python objects.
template <class Report>
nb::object report(Report&& make) {
  Result<std::string> r = Status();
  {
    nb::gil_scoped_release release;
    r = make();
  }
  return json_loads(take(std::move(r)));
}

}  // namespace

void bind_cache(nb::module_& m) {
  using namespace nb::literals;
  m.def(
      "set_cache_dir", [](const std::string& dir) { check(set_cache_dir(dir)); }, "dir"_a,
      "The plan cache's directory for this process; before the first plan only.");
  m.def("cache_dir", []() { return cache_dir(); }, "The plan cache's directory (empty: memory only).");
  m.def("_cache_ls", []() { return report([] { return cache_report::list(); }); });
  m.def(
      "_cache_show",
      [](const std::string& name_or_key) { return report([&] { return cache_report::show(name_or_key); }); },
      "name_or_key"_a);
  m.def("_cache_stats", []() { return report([] { return cache_report::stats(); }); });
  m.def("_cache_verify", []() { return report([] { return cache_report::verify(); }); });
  m.def(
      "_cache_prune",
      [](std::optional<int64_t> max_bytes) { return report([&] { return cache_report::prune(max_bytes); }); },
      "max_bytes"_a = nb::none());
  m.def(
      "_cache_clear",
      [](bool tuned) {
        const nb::object r = report([&] { return cache_report::clear(tuned); });
        return r[tuned ? "removed_tuned" : "removed"];
      },
      "tuned"_a = false);
  m.def(
      "_parse_bytes", [](const std::string& text) { return take(cache_report::parse_size(text)); }, "text"_a);
}

}  // namespace rime::python
