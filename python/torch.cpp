// The torch layer's per-call path (python/rime/torch/): one C++ call each for the shape-class key and the launch.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "binding.hpp"

namespace rime::python {
namespace {

// The shape class of an operator call: (`head`, bytes), where head is the operator and its attributes and the bytes
// hold, per tensor of the call, its dims, strides, dtype (the dtype object's identity: torch's dtypes are immortal
// singletons) and device (`device` when given: a warmup's meta tensors stand for tensors on that GPU), or a zero
// for an absent one. Built here rather than in Python, and as bytes rather than tuples of torch.Size, whose hashing
// and comparing in the plan lookup cost as much as building them: key and lookup of a four-tensor call took 1.8 us
// as Python tuples and 1.45 us as bytes on a 2-core CPU machine, the devices included only in the latter.
nb::object call_key(nb::handle head, nb::handle tensors, std::optional<int> device) {
  static PyObject* const s_shape = interned("shape");
  static PyObject* const s_stride = interned("stride");
  static PyObject* const s_dtype = interned("dtype");
  static PyObject* const s_get_device = interned("get_device");
  if (!PyTuple_Check(tensors.ptr())) invalid_argument("_call_key: tensors must be a tuple");
  const Py_ssize_t n = PyTuple_GET_SIZE(tensors.ptr());
  int64_t words[512];
  size_t used = 0;
  auto put = [&](int64_t w) {
    if (used == std::size(words)) invalid_argument("_call_key: too many dims");
    words[used++] = w;
  };
  auto put_ints = [&](PyObject* tuple) {
    if (!tuple) throw nb::python_error();
    nb::object owner = nb::steal(tuple);
    if (!PyTuple_Check(tuple)) invalid_argument("_call_key: a tensor's shape or stride() is not a tuple");
    const Py_ssize_t rank = PyTuple_GET_SIZE(tuple);
    put(rank);
    for (Py_ssize_t d = 0; d < rank; ++d) put(PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, d)));
    if (PyErr_Occurred()) throw nb::python_error();
  };
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* t = PyTuple_GET_ITEM(tensors.ptr(), i);
    if (t == Py_None) {
      put(0);
      continue;
    }
    put(1);
    put_ints(PyObject_GetAttr(t, s_shape));
    put_ints(PyObject_CallMethodNoArgs(t, s_stride));
    nb::object dtype = nb::steal(PyObject_GetAttr(t, s_dtype));
    if (!dtype.is_valid()) throw nb::python_error();
    put(static_cast<int64_t>(reinterpret_cast<uintptr_t>(dtype.ptr())));
    if (device) {
      put(*device);
    } else {
      PyObject* d = PyObject_CallMethodNoArgs(t, s_get_device);
      if (!d) throw nb::python_error();
      put(PyLong_AsLongLong(nb::steal(d).ptr()));
      if (PyErr_Occurred()) throw nb::python_error();
    }
  }
  PyObject* bytes = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(words),
                                              static_cast<Py_ssize_t>(used * sizeof(int64_t)));
  if (!bytes) throw nb::python_error();
  return nb::make_tuple(head, nb::steal(bytes));
}

// How an operator's plan binds a call: per graph tensor in declaration order, the index of the call's tensor whose
// data_ptr() it takes, or -1 and a constant pointer (a scale or lengths tensor the layer made for the shape class).
// run() reads the pointers and launches in one call, the GIL released around the launch.
struct CallBinding {
  nb::object plan_object;  // keeps the Plan alive
  const Plan* plan = nullptr;
  std::vector<int> index;
  std::vector<uintptr_t> constant;
  std::vector<int64_t> uid;

  CallBinding(nb::handle plan_handle, const std::vector<std::pair<int, uintptr_t>>& slots)
      : plan_object(nb::borrow(plan_handle)), plan(nb::cast<const Plan*>(plan_handle)) {
    const std::vector<TensorDesc>& tensors = plan->graph().tensors();
    if (slots.size() != tensors.size())
      invalid_argument("_CallBinding: " + std::to_string(slots.size()) + " slots for the graph's " +
                       std::to_string(tensors.size()) + " tensors");
    for (size_t i = 0; i < slots.size(); ++i) {
      index.push_back(slots[i].first);
      constant.push_back(slots[i].second);
      uid.push_back(tensors[i].uid);
    }
  }

  void run(nb::handle tensors, uintptr_t workspace, uintptr_t stream) const {
    static PyObject* const s_data_ptr = interned("data_ptr");
    if (!PyTuple_Check(tensors.ptr())) invalid_argument("_CallBinding.run: tensors must be a tuple");
    const Py_ssize_t n = PyTuple_GET_SIZE(tensors.ptr());
    PointersByUid by_uid;
    by_uid.reserve(index.size());
    for (size_t i = 0; i < index.size(); ++i) {
      uintptr_t ptr = constant[i];
      if (index[i] >= 0) {
        if (index[i] >= n) invalid_argument("_CallBinding.run: the call has no tensor " + std::to_string(index[i]));
        PyObject* r = PyObject_CallMethodNoArgs(PyTuple_GET_ITEM(tensors.ptr(), index[i]), s_data_ptr);
        if (!r) throw nb::python_error();
        ptr = as_pointer(nb::steal(r).ptr(), plan->graph().tensors()[i].name, ".data_ptr()");
      }
      by_uid.emplace(uid[i], reinterpret_cast<void*>(ptr));
    }
    execute(*plan, by_uid, reinterpret_cast<void*>(workspace), reinterpret_cast<void*>(stream));
  }
};

}  // namespace

void bind_torch(nb::module_& m) {
  using namespace nb::literals;
  m.def("_call_key", &call_key, "head"_a, "tensors"_a, "device"_a = nb::none(),
        "The torch layer's shape-class key of a call (python/rime/torch/_plans.py).");
  nb::class_<CallBinding>(m, "_CallBinding", "How the torch layer's plan binds a call's tensors.")
      .def(nb::init<nb::handle, const std::vector<std::pair<int, uintptr_t>>&>(), "plan"_a, "slots"_a)
      .def("run", &CallBinding::run, "tensors"_a, "workspace"_a, "stream"_a);
}

}  // namespace rime::python
