// The one path from a caller's buffers to device pointers: torch-like tensors (data_ptr(), shape, stride(), dtype,
// get_device()), any object with __dlpack__, or plain ints, checked against the graph's tensors (dtype, shape,
// strides, device) without a copy; streams and workspaces.
#include <cstdint>
#include <deque>
#include <nanobind/ndarray.h>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "binding.hpp"

namespace rime::python {

// A Python int that must be a non-negative 64-bit value (a pointer).
uintptr_t as_pointer(PyObject* o, const std::string& name, const char* field) {
  const unsigned long long v = PyLong_AsUnsignedLongLong(o);
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    invalid_argument("run(): " + name + field + ": expected a non-negative int (a device pointer)");
  }
  return static_cast<uintptr_t>(v);
}

namespace {

// The element type of a buffer as seen from Python: a rime DataType, or raw bytes (uint8/int8), which any one-byte
// type (FP8, E8M0 scales, the FP4 container) accepts, since frameworks hold such data as bytes.
struct SeenType {
  std::optional<DataType> dtype;
  bool raw_bytes = false;
  bool fp4_pairs = false;  // torch.float4_e2m1fn_x2: one element is a byte of two FP4 values (the container)
  std::string name;        // as the object spells it
};

SeenType type_from_torch_name(const std::string& name) {
  static const std::pair<const char*, DataType> kNames[] = {
      {"torch.float32", DataType::FP32},       {"torch.float16", DataType::FP16},
      {"torch.bfloat16", DataType::BF16},      {"torch.float8_e4m3fn", DataType::FP8_E4M3},
      {"torch.float8_e5m2", DataType::FP8_E5M2}, {"torch.float8_e8m0fnu", DataType::FP8_E8M0},
      {"torch.int32", DataType::INT32},        {"torch.int64", DataType::INT64},
  };
  SeenType t;
  t.name = name;
  for (const auto& [n, d] : kNames)
    if (name == n) t.dtype = d;
  t.raw_bytes = name == "torch.uint8" || name == "torch.int8";
  if (name == "torch.float4_e2m1fn_x2") {
    t.dtype = DataType::FP4_E2M1;
    t.fp4_pairs = true;
  }
  return t;
}

SeenType type_from_dlpack(nb::dlpack::dtype dt) {
  using Code = nb::dlpack::dtype_code;
  SeenType t;
  const auto code = static_cast<Code>(dt.code);
  t.name = "dlpack(code " + std::to_string(dt.code) + ", " + std::to_string(dt.bits) + " bits)";
  if (dt.lanes != 1) return t;
  if (code == Code::Float && dt.bits == 32) t.dtype = DataType::FP32;
  if (code == Code::Float && dt.bits == 16) t.dtype = DataType::FP16;
  if (code == Code::Bfloat && dt.bits == 16) t.dtype = DataType::BF16;
  if (code == Code::Float8_E4M3FN && dt.bits == 8) t.dtype = DataType::FP8_E4M3;
  if (code == Code::Float8_E5M2 && dt.bits == 8) t.dtype = DataType::FP8_E5M2;
  if (code == Code::Float8_E8M0FNU && dt.bits == 8) t.dtype = DataType::FP8_E8M0;
  if (code == Code::Float4_E2M1FN && dt.bits == 4) t.dtype = DataType::FP4_E2M1;
  if (code == Code::Int && dt.bits == 32) t.dtype = DataType::INT32;
  if (code == Code::Int && dt.bits == 64) t.dtype = DataType::INT64;
  t.raw_bytes = (code == Code::UInt || code == Code::Int) && dt.bits == 8;
  return t;
}

// torch dtype objects are singletons: their rime type is looked up by identity after the first time. A deque, so
// that the references handed out stay valid as it grows.
const SeenType& torch_type(PyObject* dtype_obj) {
  static std::deque<std::pair<PyObject*, SeenType>> seen;  // the GIL guards it
  for (const auto& [o, t] : seen)
    if (o == dtype_obj) return t;
  const std::string name = text_of(dtype_obj);
  Py_INCREF(dtype_obj);  // held forever, so that the identity stays this dtype's
  seen.emplace_back(dtype_obj, type_from_torch_name(name));
  return seen.back().second;
}

std::string list_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Dims or strides read off a buffer, on the stack: run() checks each tensor without allocating (the checks of a
// four-tensor call are most of the checked run's cost over run_pointers()).
constexpr size_t kMaxRank = 8;
struct Extents {
  int64_t v[kMaxRank];
  size_t n = 0;
  std::vector<int64_t> vec() const { return std::vector<int64_t>(v, v + n); }
};

// The shape the buffer of `t` has as Python sees it: the logical dims and strides, except for an FP4 tensor held as
// bytes (uint8, or torch.float4_e2m1fn_x2), which is its byte container (SPEC section 1).
std::pair<std::vector<int64_t>, std::vector<int64_t>> expected_shape(const TensorDesc& t, bool container) {
  std::vector<int64_t> dims = t.dims, strides = t.strides;
  if (!container) return {dims, strides};
  for (size_t i = 0; i < dims.size(); ++i) {
    if (strides[i] == 1) dims[i] /= 2;
    else strides[i] /= 2;
  }
  return {dims, strides};
}

// The extent-1 dims dropped (a stride no index multiplies): a [1] scale binds a [1, 1, 1, 1] tensor, and a
// transposed view's unit dims may carry any stride.
std::vector<std::pair<int64_t, int64_t>> addressed(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != 1) out.emplace_back(dims[i], strides[i]);
  return out;
}

// addressed(seen) == addressed(expected_shape(t, container)), compared in place (the success path allocates nothing).
bool same_addressing(const Extents& dims, const Extents& strides, const TensorDesc& t, bool container) {
  size_t i = 0, j = 0;
  const size_t m = t.dims.size();
  for (;;) {
    while (i < dims.n && dims.v[i] == 1) ++i;
    int64_t want_dim = 0, want_stride = 0;
    for (; j < m; ++j) {
      want_dim = t.dims[j];
      want_stride = t.strides[j];
      if (container) {
        if (want_stride == 1) want_dim /= 2;
        else want_stride /= 2;
      }
      if (want_dim != 1) break;
    }
    const bool seen_done = i == dims.n, wanted_done = j == m;
    if (seen_done || wanted_done) return seen_done && wanted_done;
    if (dims.v[i] != want_dim || strides.v[i] != want_stride) return false;
    ++i;
    ++j;
  }
}

// What run() reads off one buffer object.
struct SeenBuffer {
  uintptr_t ptr = 0;
  const SeenType* type = nullptr;  // torch_type()'s, or dlpack_type
  SeenType dlpack_type;
  Extents dims, strides;
  int device = -1;             // CUDA ordinal, -1 when not on a CUDA device
  int dlpack_device_type = 0;  // a DLPack object's device type (when not CUDA, for the message)
};

void read_ints(PyObject* tuple, Extents& out, const std::string& tensor, const char* field) {
  if (!PyTuple_Check(tuple)) invalid_argument("run(): " + tensor + field + ": expected a tuple");
  const size_t n = static_cast<size_t>(PyTuple_GET_SIZE(tuple));
  if (n > kMaxRank)
    invalid_argument("run(): " + tensor + field + ": " + std::to_string(n) + " dims; rime tensors have at most " +
                     std::to_string(kMaxRank));
  out.n = n;
  for (size_t i = 0; i < n; ++i) out.v[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, i));
  if (PyErr_Occurred()) {
    PyErr_Clear();
    invalid_argument("run(): " + tensor + field + ": expected ints");
  }
}

// A torch-like tensor (data_ptr(), shape, stride(), dtype, get_device()): read with plain attribute calls, which
// cost well under a microsecond, where its __dlpack__ is Python code that costs several.
void read_torch_like(nb::handle h, const std::string& tensor, SeenBuffer& b) {
  static PyObject* const s_data_ptr = interned("data_ptr");
  static PyObject* const s_shape = interned("shape");
  static PyObject* const s_stride = interned("stride");
  static PyObject* const s_dtype = interned("dtype");
  static PyObject* const s_get_device = interned("get_device");
  auto call = [&](PyObject* name) {
    PyObject* r = PyObject_CallMethodNoArgs(h.ptr(), name);
    if (!r) throw nb::python_error();
    return nb::steal(r);
  };
  auto get = [&](PyObject* name) {
    PyObject* r = PyObject_GetAttr(h.ptr(), name);
    if (!r) throw nb::python_error();
    return nb::steal(r);
  };
  b.ptr = as_pointer(call(s_data_ptr).ptr(), tensor, ".data_ptr()");
  read_ints(get(s_shape).ptr(), b.dims, tensor, ".shape");
  read_ints(call(s_stride).ptr(), b.strides, tensor, ".stride()");
  b.type = &torch_type(get(s_dtype).ptr());
  const long long dev = PyLong_AsLongLong(call(s_get_device).ptr());
  if (dev == -1 && PyErr_Occurred()) throw nb::python_error();
  b.device = static_cast<int>(dev);
}

// Any object with __dlpack__ (CuPy, JAX, numba, ...), through nanobind's DLPack import: no copy, no conversion.
void read_dlpack(nb::handle h, const std::string& tensor, SeenBuffer& b) {
  nb::ndarray<> a;
  if (!nb::try_cast(h, a, false)) invalid_argument("run(): " + tensor + ": its __dlpack__ export failed");
  b.ptr = reinterpret_cast<uintptr_t>(a.data());
  b.dlpack_type = type_from_dlpack(a.dtype());
  b.type = &b.dlpack_type;
  if (a.ndim() > kMaxRank)
    invalid_argument("run(): " + tensor + ": " + std::to_string(a.ndim()) + " dims; rime tensors have at most " +
                     std::to_string(kMaxRank));
  b.dims.n = b.strides.n = a.ndim();
  for (size_t i = 0; i < a.ndim(); ++i) {
    b.dims.v[i] = a.shape(i);
    b.strides.v[i] = a.stride(i);
  }
  const bool cuda = a.device_type() == nb::device::cuda::value;
  b.device = cuda ? a.device_id() : -1;
  b.dlpack_device_type = a.device_type();
}

// Whether `h` is read as a torch-like tensor: the last type that had data_ptr() is remembered (held), so that a call
// of plain torch.Tensors looks the attribute up once, not per tensor per call.
bool has_data_ptr(nb::handle h) {
  static PyObject* const s_data_ptr = interned("data_ptr");
  static PyTypeObject* known = nullptr;  // the GIL guards it
  if (Py_TYPE(h.ptr()) == known) return true;
  if (!PyObject_HasAttr(h.ptr(), s_data_ptr)) return false;
  Py_XDECREF(reinterpret_cast<PyObject*>(known));
  known = Py_TYPE(h.ptr());
  Py_INCREF(reinterpret_cast<PyObject*>(known));
  return true;
}

// The device pointer of buffer `h` bound to tensor `t`: an int is taken as it is; a tensor object must match the
// graph's tensor in dtype, shape, strides and device (InvalidArgument naming the tensor and both values), and is
// never copied, cast or made contiguous.
void* pointer_for(const TensorDesc& t, nb::handle h, int plan_device) {
  if (PyLong_Check(h.ptr())) return reinterpret_cast<void*>(as_pointer(h.ptr(), t.name));
  static PyObject* const s_dlpack = interned("__dlpack__");
  auto fail = [&](const std::string& message) { invalid_argument("run(): " + t.name + ": " + message); };
  SeenBuffer b;
  if (has_data_ptr(h)) read_torch_like(h, t.name, b);
  else if (PyObject_HasAttr(h.ptr(), s_dlpack)) read_dlpack(h, t.name, b);
  else fail("expected a device pointer (an int), a tensor with data_ptr(), or an object with __dlpack__");
  const SeenType& type = *b.type;
  const bool one_byte = DataType::FP8_E4M3 == t.dtype || DataType::FP8_E5M2 == t.dtype ||
                        DataType::FP8_E8M0 == t.dtype || DataType::FP4_E2M1 == t.dtype;
  const bool type_ok = (type.dtype && *type.dtype == t.dtype) || (type.raw_bytes && one_byte);
  if (!type_ok)
    fail("dtype " + type.name + " differs from the graph's " + std::string(to_string(t.dtype)) +
         (one_byte ? " (or raw bytes: uint8, int8)" : ""));
  const bool container = t.dtype == DataType::FP4_E2M1 && (type.raw_bytes || type.fp4_pairs);
  if (!same_addressing(b.dims, b.strides, t, container)) {
    const auto [dims, strides] = expected_shape(t, container);
    const std::vector<int64_t> seen_dims = b.dims.vec(), seen_strides = b.strides.vec();
    const std::string held = container ? " (FP4 held as bytes: the byte container of the graph's dims " +
                                             list_str(t.dims) + ")"
                                       : "";
    auto extents = [](const std::vector<std::pair<int64_t, int64_t>>& a) {
      std::vector<int64_t> out;
      for (const auto& d : a) out.push_back(d.first);
      return out;
    };
    if (extents(addressed(seen_dims, seen_strides)) != extents(addressed(dims, strides)))
      fail("shape " + list_str(seen_dims) + " differs from the graph's " + list_str(dims) + held);
    fail("strides " + list_str(seen_strides) + " differ from the graph's " + list_str(strides) + " (shape " +
         list_str(dims) + ")" + held + "; rime never copies a tensor to make it fit");
  }
  if (b.device < 0) {
    const std::string where = b.dlpack_device_type ? "DLPack device type " + std::to_string(b.dlpack_device_type)
                                                   : std::string("a device other than CUDA");
    fail("the buffer is on " + where + "; the plan runs on " +
         (plan_device >= 0 ? "cuda:" + std::to_string(plan_device) : std::string("a CUDA device")));
  }
  if (plan_device >= 0 && b.device != plan_device)
    fail("the buffer is on cuda:" + std::to_string(b.device) + ", the plan runs on cuda:" +
         std::to_string(plan_device));
  return reinterpret_cast<void*>(b.ptr);
}

}  // namespace

// run()'s buffers (by tensor name or uid: a device pointer, or a tensor checked against the graph's) as pointers by
// uid; every object read and checked before the GIL is released. `what`: the caller's name, for the messages.
PointersByUid pointers_by_uid(const Graph& graph, const nb::dict& buffers, int device, const std::string& what) {
  const std::vector<TensorDesc>& tensors = graph.tensors();
  PointersByUid by_uid;
  by_uid.reserve(buffers.size());
  for (auto [key, value] : buffers) {
    const TensorDesc* t = nullptr;
    if (PyLong_Check(key.ptr())) {
      const int64_t uid = nb::cast<int64_t>(key);
      t = graph.find_tensor(uid);
      if (!t) invalid_argument(what + ": the graph has no tensor of uid " + std::to_string(uid));
    } else {
      // The name's UTF-8 is cached in the str object: compared in place, no string built per call.
      Py_ssize_t size = 0;
      const char* utf8 = PyUnicode_Check(key.ptr()) ? PyUnicode_AsUTF8AndSize(key.ptr(), &size) : nullptr;
      if (!utf8) {
        PyErr_Clear();
        invalid_argument(what + ": buffers: a key is neither a tensor name (str) nor a uid (int)");
      }
      const std::string_view name(utf8, static_cast<size_t>(size));
      for (const TensorDesc& d : tensors)
        if (d.name == name) t = &d;
      if (!t) invalid_argument(what + ": the graph has no tensor named '" + std::string(name) + "'");
    }
    by_uid[t->uid] = pointer_for(*t, value, device);
  }
  return by_uid;
}

// A CUstream: an int, an object with `cuda_stream` (torch.cuda.Stream), or the CUDA stream protocol
// (`__cuda_stream__()` -> (version, handle)); None is the legacy default stream.
void* stream_of(nb::handle h) {
  static PyObject* const s_cuda_stream = interned("cuda_stream");
  static PyObject* const s_protocol = interned("__cuda_stream__");
  if (h.is_none()) return nullptr;
  if (PyLong_Check(h.ptr())) return reinterpret_cast<void*>(as_pointer(h.ptr(), "stream"));
  // torch.cuda.Stream's cuda_stream is a C property; its __cuda_stream__ is Python code (~0.5 us): ask for the
  // property first. Both name the same handle.
  if (PyObject* handle = PyObject_GetAttr(h.ptr(), s_cuda_stream))
    return reinterpret_cast<void*>(as_pointer(nb::steal(handle).ptr(), "stream", ".cuda_stream"));
  PyErr_Clear();
  if (PyObject_HasAttr(h.ptr(), s_protocol)) {
    nb::object pair = nb::steal(PyObject_CallMethodNoArgs(h.ptr(), s_protocol));
    if (!pair.is_valid()) throw nb::python_error();
    return reinterpret_cast<void*>(as_pointer(nb::object(pair[1]).ptr(), "stream", ".__cuda_stream__()[1]"));
  }
  invalid_argument("run(): stream: expected an int (a CUstream), None, or a stream object (cuda_stream or "
                   "__cuda_stream__)");
}

void* workspace_of(nb::handle h, int plan_device) {
  if (h.is_none()) return nullptr;
  if (PyLong_Check(h.ptr())) return reinterpret_cast<void*>(as_pointer(h.ptr(), "workspace"));
  static PyObject* const s_data_ptr = interned("data_ptr");
  static PyObject* const s_get_device = interned("get_device");
  if (has_data_ptr(h) && PyObject_HasAttr(h.ptr(), s_get_device)) {
    nb::object dev_obj = nb::steal(PyObject_CallMethodNoArgs(h.ptr(), s_get_device));
    if (!dev_obj.is_valid()) throw nb::python_error();
    const int dev = nb::cast<int>(dev_obj);
    if (plan_device >= 0 && dev != plan_device)
      invalid_argument("run(): workspace: on device " + std::to_string(dev) + ", the plan runs on cuda:" +
                       std::to_string(plan_device));
    nb::object ptr = nb::steal(PyObject_CallMethodNoArgs(h.ptr(), s_data_ptr));
    if (!ptr.is_valid()) throw nb::python_error();
    return reinterpret_cast<void*>(as_pointer(ptr.ptr(), "workspace", ".data_ptr()"));
  }
  invalid_argument("run(): workspace: expected a device pointer (an int) or a tensor with data_ptr()");
}

PointersByUid pointers_in_order(const Graph& graph, const std::vector<uintptr_t>& pointers, const std::string& what) {
  const std::vector<TensorDesc>& tensors = graph.tensors();
  if (pointers.size() != tensors.size())
    invalid_argument(what + ": " + std::to_string(pointers.size()) + " pointers for the graph's " +
                     std::to_string(tensors.size()) + " tensors (in the order of Plan.uids)");
  PointersByUid by_uid;
  by_uid.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) by_uid.emplace(tensors[i].uid, reinterpret_cast<void*>(pointers[i]));
  return by_uid;
}

}  // namespace rime::python
