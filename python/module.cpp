// The rime extension module (nanobind): the C++ API one to one, no torch, one file per area (binding.hpp lists them).
// A failed call raises the exception class of its StatusCode (python/rime/errors.py) with the message, the JSON
// pointer and, for NotSupported, every row's reason. Planning, compiling, loading and running release the GIL; the
// library's log lines (every compile, before it starts and when it ends) go to Python's logging, logger `rime`.
#include <string>

#include "binding.hpp"
#include "rime/log.hpp"
#include "rime/version.hpp"

namespace {

using namespace rime::python;
using rime::LogLevel;

// The library's log lines, into logging.getLogger("rime") (INFO: each compile, before it starts and with its time;
// WARNING: cache problems). Called from any thread, with no lock of rime's held; takes the GIL.
void log_to_python(LogLevel level, const std::string& line) {
  if (!Py_IsInitialized()) return;
  nb::gil_scoped_acquire gil;
  PyObject* type = nullptr;
  PyObject* value = nullptr;
  PyObject* trace = nullptr;
  PyErr_Fetch(&type, &value, &trace);  // a log line never replaces an exception in flight
  try {
    const int py_level = level == LogLevel::Warn ? 30 : level == LogLevel::Info ? 20 : 10;
    nb::module_::import_("logging").attr("getLogger")("rime").attr("log")(py_level, line);
  } catch (...) {
    PyErr_Clear();
  }
  PyErr_Restore(type, value, trace);
}

// The status as the exception of its code. A message is UTF-8 (the library makes it so); should one not be, its
// bytes are replaced rather than the translation failing into a bare RuntimeError.
void raise_status(const rime::Status& status) {
  nb::object errors = nb::module_::import_("rime.errors");
  auto text = [](const std::string& s) {
    PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
    if (!o) throw nb::python_error();
    return nb::steal<nb::str>(o);
  };
  nb::object exc = errors.attr("from_status")(rime::to_string(status.code()), text(status.message()),
                                              text(status.location()));
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
}

}  // namespace

NB_MODULE(_rime, m) {
  m.doc() = "rime: attention graphs compiled into cached GPU plans (docs/python.md)";
  m.attr("__version__") = rime::kVersion;

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      raise_status(e.status);
    }
  });

  // torch's operator registry (rime.torch) keeps the Python kernels, and through them Plans, until the process ends,
  // past this module's teardown: nanobind would report those as leaks.
  nb::set_leak_warnings(false);
  rime::set_log_sink(log_to_python, LogLevel::Info);
  m.def(
      "_stop_logging", []() { rime::set_log_sink(nullptr, LogLevel::Off); },
      "Log lines go to stderr again (registered with atexit: no call into Python during its teardown).");

  bind_graph(m);
  bind_plan(m);
  bind_ring(m);
  bind_cache(m);
  bind_torch(m);
}
