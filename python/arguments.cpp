// What every area of the binding shares (binding.hpp): the status carried to Python, and device and option
// arguments as Python spells them.
#include <optional>
#include <string>

#include "binding.hpp"

namespace rime::python {

[[noreturn]] void invalid_argument(const std::string& message) {
  throw StatusError{Status(StatusCode::InvalidArgument, message)};
}

std::string text_of(nb::handle h) {
  PyObject* s = PyObject_Str(h.ptr());
  if (!s) throw nb::python_error();
  return nb::cast<std::string>(nb::steal<nb::str>(s));
}

PyObject* interned(const char* s) {
  PyObject* o = PyUnicode_InternFromString(s);
  if (!o) throw nb::python_error();
  return o;
}

nb::object json_loads(const std::string& text) { return nb::module_::import_("json").attr("loads")(text); }

std::optional<int> ordinal_of(nb::handle device) {
  if (device.is_none()) return std::nullopt;
  if (PyLong_Check(device.ptr())) return nb::cast<int>(device);
  std::string text;
  if (nb::isinstance<nb::str>(device)) {
    text = nb::cast<std::string>(device);
  } else if (nb::hasattr(device, "type") && nb::hasattr(device, "index")) {
    text = text_of(device.attr("type"));
    if (!device.attr("index").is_none()) text += ":" + text_of(device.attr("index"));
  } else {
    invalid_argument("device: expected None, an int, 'cuda[:N]' or a torch.device");
  }
  if (text == "cuda") return std::nullopt;
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5 && text.find_first_not_of("0123456789", 5) == std::string::npos)
    return std::stoi(text.substr(5));
  invalid_argument("device '" + text + "': rime plans run on CUDA devices ('cuda' or 'cuda:N')");
}

PlanOptions options_for(nb::handle device, const std::optional<std::string>& arch, const std::optional<int>& sms) {
  PlanOptions o;
  o.device_ordinal = ordinal_of(device);
  if (arch || sms) {
    Result<DeviceDesc> d = DeviceDesc::from_arch(arch.value_or("sm_90a"), sms.value_or(132));
    o.device = take(std::move(d));
    o.device_source = "given by --arch/--sms";  // the CLI's words, so that explain() reads as `rime plan --explain`
  }
  return o;
}

}  // namespace rime::python
