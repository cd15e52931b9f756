// The torch layer's per-call path (python/rime/torch/): one C++ call each for the shape-class key and the launch.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "binding.hpp"
#include "rime/padding_mask.hpp"

namespace rime::python {
namespace {

// A tuple's ints (a tensor's shape or stride()), into `out`; returns the rank. Raises on anything else.
int ints_of(PyObject* tuple, int64_t (&out)[8]) {
  if (!tuple) throw nb::python_error();
  nb::object owner = nb::steal(tuple);
  if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) > 8)
    invalid_argument("a tensor's shape or stride() is not a tuple of at most 8 ints");
  const int rank = static_cast<int>(PyTuple_GET_SIZE(tuple));
  for (int d = 0; d < rank; ++d) out[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, d));
  if (PyErr_Occurred()) throw nb::python_error();
  return rank;
}

// The dense operator's K/V capacity (ExecuteOptions::kv_extent): `kv` = (index of q, k, v, seq_lens_k and seq_bounds
// in the call's tensors), Q, K, V each [B, S, H, D]. A call with per-sequence key lengths (either tensor) and more
// keys than queries (a cache's decode or chunked prefill) is planned for S_kv rounded up to a power of two (at least
// 256), K and V 16-byte aligned: a cache that grows a token a step then meets a new shape class once per doubling
// instead of once per token. capacity 0 otherwise (the call's own S_kv). Under a capacity, K's and V's shapes and
// strides as read, so that the key does not read them again.
struct KvRead {
  int64_t capacity = 0;
  int index[2] = {-1, -1};  // K's and V's in the call's tensors
  int64_t shape[2][8], stride[2][8];
};

KvRead read_kv(nb::handle tensors, nb::handle kv) {
  static PyObject* const s_shape = interned("shape");
  static PyObject* const s_stride = interned("stride");
  static PyObject* const s_itemsize = interned("itemsize");
  KvRead r;
  if (kv.is_none()) return r;
  const auto [qi, ki, vi, li, bi] = nb::cast<std::tuple<int, int, int, int, int>>(kv);
  PyObject* t = tensors.ptr();
  if (!PyTuple_Check(t)) invalid_argument("_kv_capacity: tensors must be a tuple");
  for (int i : {qi, ki, vi, li, bi})
    if (i < 0 || i >= PyTuple_GET_SIZE(t)) invalid_argument("_kv_capacity: an index past the call's tensors");
  if (PyTuple_GET_ITEM(t, li) == Py_None && PyTuple_GET_ITEM(t, bi) == Py_None) return r;
  int64_t q_shape[8];
  if (ints_of(PyObject_GetAttr(PyTuple_GET_ITEM(t, qi), s_shape), q_shape) != 4 ||
      ints_of(PyObject_GetAttr(PyTuple_GET_ITEM(t, ki), s_shape), r.shape[0]) != 4 || q_shape[1] >= r.shape[0][1])
    return r;
  const int index[2] = {ki, vi};
  for (int w = 0; w < 2; ++w) {
    PyObject* x = PyTuple_GET_ITEM(t, index[w]);
    if ((w == 1 && ints_of(PyObject_GetAttr(x, s_shape), r.shape[1]) != 4) ||
        ints_of(PyObject_CallMethodNoArgs(x, s_stride), r.stride[w]) != 4 || r.stride[w][3] != 1)
      return r;
    nb::object size = nb::steal(PyObject_GetAttr(x, s_itemsize));
    if (!size.is_valid()) throw nb::python_error();
    const int64_t bytes = PyLong_AsLongLong(size.ptr());
    for (int d = 0; d < 3; ++d)
      if (r.stride[w][d] * bytes % 16 != 0) return r;
  }
  r.capacity = 256;
  while (r.capacity < r.shape[0][1]) r.capacity *= 2;
  r.index[0] = ki;
  r.index[1] = vi;
  return r;
}

int64_t kv_capacity(nb::handle tensors, nb::handle kv) { return read_kv(tensors, kv).capacity; }

// The shape class of an operator call: (`head`, bytes), where head is the operator and its attributes and the bytes
// hold, per tensor of the call, its dims, strides, dtype (the dtype object's identity: torch's dtypes are immortal
// singletons) and device (`device` when given: a warmup's meta tensors stand for tensors on that GPU), or a zero
// for an absent one. Built here rather than in Python, and as bytes rather than tuples of torch.Size, whose hashing
// and comparing in the plan lookup cost as much as building them: key and lookup of a four-tensor call took 1.8 us
// as Python tuples and 1.45 us as bytes on a 2-core CPU machine, the devices included only in the latter.
// `kv` (the dense operator's): under a K/V capacity (kv_capacity), K and V enter as [B, capacity, H, D] with their
// strides' order only (the plan reads each call's own length and strides).
nb::object call_key(nb::handle head, nb::handle tensors, std::optional<int> device, nb::handle kv) {
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
  const KvRead kv_read = read_kv(tensors, kv);
  put(kv_read.capacity);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* t = PyTuple_GET_ITEM(tensors.ptr(), i);
    if (t == Py_None) {
      put(0);
      continue;
    }
    put(1);
    const int w = i == kv_read.index[0] ? 0 : i == kv_read.index[1] ? 1 : -1;
    if (w >= 0) {  // under a capacity: [B, capacity, H, D] and the strides' order, as read_kv read them
      const int64_t(&shape)[8] = kv_read.shape[w];
      const int64_t(&stride)[8] = kv_read.stride[w];
      for (int d = 0; d < 4; ++d) put(d == 1 ? kv_read.capacity : shape[d]);
      for (int d = 0; d < 4; ++d) {  // each dim's rank among the strides: the layout, whatever the length
        int rank = 0;
        for (int e = 0; e < 4; ++e) rank += stride[e] > stride[d] || (stride[e] == stride[d] && e < d);
        put(rank);
      }
    } else {
      put_ints(PyObject_GetAttr(t, s_shape));
      put_ints(PyObject_CallMethodNoArgs(t, s_stride));
    }
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
// data_ptr() it takes and a byte offset into it (a row of seq_bounds), or -1 and a constant pointer (a scale or
// lengths tensor the layer made for the shape class). run() reads the pointers and launches in one call, the GIL
// released around the launch. `kv` (k, v): a plan for a K/V capacity, to which each run passes the call's K/V
// extent ([B, S, H, D] tensors: their S and strides).
struct CallBinding {
  nb::object plan_object;  // keeps the Plan alive
  const Plan* plan = nullptr;
  std::vector<int> index;
  std::vector<uintptr_t> offset_or_pointer;  // index >= 0: bytes past the call tensor's data_ptr(); else the pointer
  std::vector<int64_t> uid;
  std::optional<std::pair<int, int>> kv;

  CallBinding(nb::handle plan_handle, const std::vector<std::pair<int, uintptr_t>>& slots,
              std::optional<std::pair<int, int>> kv_indices)
      : plan_object(nb::borrow(plan_handle)), plan(nb::cast<const Plan*>(plan_handle)), kv(kv_indices) {
    const std::vector<TensorDesc>& tensors = plan->graph().tensors();
    if (slots.size() != tensors.size())
      invalid_argument("_CallBinding: " + std::to_string(slots.size()) + " slots for the graph's " +
                       std::to_string(tensors.size()) + " tensors");
    for (size_t i = 0; i < slots.size(); ++i) {
      index.push_back(slots[i].first);
      offset_or_pointer.push_back(slots[i].second);
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
      uintptr_t ptr = offset_or_pointer[i];
      if (index[i] >= 0) {
        if (index[i] >= n) invalid_argument("_CallBinding.run: the call has no tensor " + std::to_string(index[i]));
        PyObject* r = PyObject_CallMethodNoArgs(PyTuple_GET_ITEM(tensors.ptr(), index[i]), s_data_ptr);
        if (!r) throw nb::python_error();
        ptr += as_pointer(nb::steal(r).ptr(), plan->graph().tensors()[i].name, ".data_ptr()");
      }
      by_uid.emplace(uid[i], reinterpret_cast<void*>(ptr));
    }
    if (!kv) {
      execute(*plan, by_uid, reinterpret_cast<void*>(workspace), reinterpret_cast<void*>(stream));
      return;
    }
    static PyObject* const s_shape = interned("shape");
    static PyObject* const s_stride = interned("stride");
    ExecuteOptions options;
    KvExtent& e = options.kv_extent.emplace();
    for (int which = 0; which < 2; ++which) {
      PyObject* t = PyTuple_GET_ITEM(tensors.ptr(), which ? kv->second : kv->first);
      int64_t shape[8], stride[8];
      if (ints_of(PyObject_GetAttr(t, s_shape), shape) != 4 || ints_of(PyObject_CallMethodNoArgs(t, s_stride), stride) != 4)
        invalid_argument("_CallBinding.run: K and V must be [B, S, H, D]");
      if (!which) e.length = shape[1];
      // [B, S, H, D] as the graph's logical [B, H, S, D]
      (which ? e.v_strides : e.k_strides) = {stride[0], stride[2], stride[1], stride[3]};
    }
    execute(*plan, by_uid, reinterpret_cast<void*>(workspace), reinterpret_cast<void*>(stream), options);
  }
};

}  // namespace

void bind_torch(nb::module_& m) {
  using namespace nb::literals;
  m.def("_call_key", &call_key, "head"_a, "tensors"_a, "device"_a = nb::none(), "kv"_a = nb::none(),
        "The torch layer's shape-class key of a call (python/rime/torch/_plans.py).");
  m.def("_kv_capacity", &kv_capacity, "tensors"_a, "kv"_a,
        "The K/V capacity a dense call is planned for (0: its own S_kv), as _call_key keys it.");
  nb::class_<CallBinding>(m, "_CallBinding", "How the torch layer's plan binds a call's tensors.")
      .def(nb::init<nb::handle, const std::vector<std::pair<int, uintptr_t>>&, std::optional<std::pair<int, int>>>(),
           "plan"_a, "slots"_a, "kv"_a = nb::none())
      .def("run", &CallBinding::run, "tensors"_a, "workspace"_a, "stream"_a);
  m.def(
      "_padding_mask_sequences",
      [](uintptr_t mask, int element_bytes, int64_t batch, int64_t positions, int64_t row_stride, int device,
         int64_t q_length, int64_t kv_length, uintptr_t out, uintptr_t stream) {
        PaddingMask m;
        m.data = reinterpret_cast<const void*>(mask);
        m.element_bytes = element_bytes;
        m.batch = batch;
        m.positions = positions;
        m.row_stride = row_stride;
        m.device = device;
        Status s;
        {
          nb::gil_scoped_release release;  // the first call of an element size compiles (NVRTC) or reads the cache
          s = sequences_from_padding_mask(m, q_length, kv_length, reinterpret_cast<int32_t*>(out),
                                          reinterpret_cast<void*>(stream));
        }
        check(s);
      },
      "mask"_a, "element_bytes"_a, "batch"_a, "positions"_a, "row_stride"_a, "device"_a, "q_length"_a, "kv_length"_a,
      "out"_a, "stream"_a,
      "rime::sequences_from_padding_mask (include/rime/padding_mask.hpp): a [batch, positions] padding mask's "
      "starts and lengths into out ([4, batch] int32), in stream order (rime.transformers' mask function).");
}

}  // namespace rime::python
