// The rime extension module (nanobind): the C++ API one to one, no torch. A failed call raises the exception class
// of its StatusCode (python/rime/errors.py) with the message, the JSON pointer and, for NotSupported, every row's
// reason. Planning, compiling, loading and running release the GIL; the library's log lines (every compile, before
// it starts and when it ends) go to Python's logging, logger `rime`.
#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/disk_cache.hpp"
#include "log/log.hpp"
#include "units/bytes.hpp"
#include "rime/inspect/config.hpp"
#include "rime/json.hpp"
#include "rime/plan.hpp"
#include "rime/ring.hpp"
#include "rime/tune.hpp"
#include "rime/version.hpp"
#include "runtime/driver.hpp"
#include "runtime/nccl.hpp"

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
[[noreturn]] void invalid_argument(const std::string& message) {
  throw StatusError{rime::Status(rime::StatusCode::InvalidArgument, message)};
}

// str(h), as Python spells it.
std::string text_of(nb::handle h) {
  PyObject* s = PyObject_Str(h.ptr());
  if (!s) throw nb::python_error();
  return nb::cast<std::string>(nb::steal<nb::str>(s));
}

// A CUDA device: None (the current one), an ordinal, "cuda" / "cuda:N", or an object with `type` and `index`
// (torch.device).
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

// plan()'s and explain()'s context_parallel=(comm, rank, world): the ncclComm_t as an address.
std::optional<rime::ContextParallel> context_parallel_of(const std::optional<std::tuple<uintptr_t, int, int>>& t) {
  if (!t) return std::nullopt;
  return rime::ContextParallel{reinterpret_cast<void*>(std::get<0>(*t)), std::get<1>(*t), std::get<2>(*t)};
}

// `device` names the GPU to plan for and load on (ordinal_of); arch/sms plan for a device described instead of
// queried.
rime::PlanOptions options_for(nb::handle device, const std::optional<std::string>& arch,
                              const std::optional<int>& sms) {
  rime::PlanOptions o;
  o.device_ordinal = ordinal_of(device);
  if (arch || sms) {
    rime::Result<rime::DeviceDesc> d = rime::DeviceDesc::from_arch(arch.value_or("sm_90a"), sms.value_or(132));
    o.device = take(std::move(d));
    o.device_source = "given by --arch/--sms";  // the CLI's words, so that explain() reads as `rime plan --explain`
  }
  return o;
}

// ---- Buffers: what run() accepts and checks ----------------------------------------------------------------------

// Interned attribute names, created once and never released (they outlive the interpreter's teardown of modules).
PyObject* interned(const char* s) {
  PyObject* o = PyUnicode_InternFromString(s);
  if (!o) throw nb::python_error();
  return o;
}

// A Python int that must be a non-negative 64-bit value (a pointer): run()'s argument `name` (a tensor's name, the
// stream, the workspace) or its `field`, named in the message (built on the error path only).
uintptr_t as_pointer(PyObject* o, const std::string& name, const char* field = "") {
  const unsigned long long v = PyLong_AsUnsignedLongLong(o);
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    invalid_argument("run(): " + name + field + ": expected a non-negative int (a device pointer)");
  }
  return static_cast<uintptr_t>(v);
}

// The element type of a buffer as seen from Python: a rime DataType, or raw bytes (uint8/int8), which any one-byte
// type (FP8, E8M0 scales, the FP4 container) accepts, since frameworks hold such data as bytes.
struct SeenType {
  std::optional<rime::DataType> dtype;
  bool raw_bytes = false;
  bool fp4_pairs = false;  // torch.float4_e2m1fn_x2: one element is a byte of two FP4 values (the container)
  std::string name;        // as the object spells it
};

SeenType type_from_torch_name(const std::string& name) {
  using rime::DataType;
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
  using rime::DataType;
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
std::pair<std::vector<int64_t>, std::vector<int64_t>> expected_shape(const rime::TensorDesc& t, bool container) {
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
bool same_addressing(const Extents& dims, const Extents& strides, const rime::TensorDesc& t, bool container) {
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
void* pointer_for(const rime::TensorDesc& t, nb::handle h, int plan_device) {
  if (PyLong_Check(h.ptr())) return reinterpret_cast<void*>(as_pointer(h.ptr(), t.name));
  static PyObject* const s_dlpack = interned("__dlpack__");
  auto fail = [&](const std::string& message) { invalid_argument("run(): " + t.name + ": " + message); };
  SeenBuffer b;
  if (has_data_ptr(h)) read_torch_like(h, t.name, b);
  else if (PyObject_HasAttr(h.ptr(), s_dlpack)) read_dlpack(h, t.name, b);
  else fail("expected a device pointer (an int), a tensor with data_ptr(), or an object with __dlpack__");
  const SeenType& type = *b.type;
  const bool one_byte = rime::DataType::FP8_E4M3 == t.dtype || rime::DataType::FP8_E5M2 == t.dtype ||
                        rime::DataType::FP8_E8M0 == t.dtype || rime::DataType::FP4_E2M1 == t.dtype;
  const bool type_ok = (type.dtype && *type.dtype == t.dtype) || (type.raw_bytes && one_byte);
  if (!type_ok)
    fail("dtype " + type.name + " differs from the graph's " + std::string(rime::to_string(t.dtype)) +
         (one_byte ? " (or raw bytes: uint8, int8)" : ""));
  const bool container = t.dtype == rime::DataType::FP4_E2M1 && (type.raw_bytes || type.fp4_pairs);
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

// run()'s buffers (by tensor name or uid: a device pointer, or a tensor checked against the graph's) as pointers by
// uid; every object read and checked before the GIL is released. `what`: the caller's name, for the messages.
std::unordered_map<int64_t, void*> pointers_by_uid(const rime::Graph& graph, const nb::dict& buffers, int device,
                                                   const std::string& what) {
  const std::vector<rime::TensorDesc>& tensors = graph.tensors();
  std::unordered_map<int64_t, void*> by_uid;
  by_uid.reserve(buffers.size());
  for (auto [key, value] : buffers) {
    const rime::TensorDesc* t = nullptr;
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
      for (const rime::TensorDesc& d : tensors)
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

// Plan.run and RingPlan.run: the buffers, workspace and stream converted and checked against `graph` on `device`,
// then `plan.execute` without the GIL.
template <class Executable>
void run_buffers(const Executable& plan, const rime::Graph& graph, int device, const nb::dict& buffers,
                 nb::handle workspace, nb::handle stream) {
  const std::unordered_map<int64_t, void*> by_uid = pointers_by_uid(graph, buffers, device, "run()");
  void* ws = workspace_of(workspace, device);
  void* cu_stream = stream_of(stream);
  rime::Status s;
  {
    nb::gil_scoped_release release;
    s = plan.execute(by_uid, ws, cu_stream);
  }
  check(s);
}

// ---- The torch layer's per-call path (python/rime/torch.py): one C++ call each for the key and the launch ----

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
  const rime::Plan* plan = nullptr;
  std::vector<int> index;
  std::vector<uintptr_t> constant;
  std::vector<int64_t> uid;

  CallBinding(nb::handle plan_handle, const std::vector<std::pair<int, uintptr_t>>& slots)
      : plan_object(nb::borrow(plan_handle)), plan(nb::cast<const rime::Plan*>(plan_handle)) {
    const std::vector<rime::TensorDesc>& tensors = plan->graph().tensors();
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
    std::unordered_map<int64_t, void*> by_uid;
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
    rime::Status s;
    {
      nb::gil_scoped_release release;
      s = plan->execute(by_uid, reinterpret_cast<void*>(workspace), reinterpret_cast<void*>(stream));
    }
    check(s);
  }
};

// A JSON document as Python objects.
nb::object json_loads(const std::string& text) { return nb::module_::import_("json").attr("loads")(text); }

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

nb::dict tensor_dict(const rime::TensorDesc& t) {
  nb::dict d;
  d["name"] = t.name;
  d["uid"] = t.uid;
  d["dims"] = t.dims;
  d["strides"] = t.strides;
  d["dtype"] = std::string(rime::to_string(t.dtype));
  d["output"] = t.is_output;
  return d;
}

// ---- The plan cache ----------------------------------------------------------------------------------------------

// The process's disk cache (set_cache_dir's directory, else the environment's), or CacheCorrupt naming why there is
// none, as `rime cache` reports it.
const rime::cache::DiskCache& disk_cache() {
  const rime::cache::Settings& s = rime::cache::settings();
  if (!s.cache)
    throw StatusError{rime::Status(rime::StatusCode::CacheCorrupt, "no usable cache directory: " + s.disabled_why)};
  return *s.cache;
}

// A JSON value as Python objects (a foreign name's bytes that are not UTF-8 replaced, as the CLI prints them).
nb::object to_python(const nlohmann::json& j) {
  return json_loads(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

// Entries with the fields of `rime cache ls --json` (cache::entry_json, which the CLI prints).
nb::object entry_list(const std::vector<rime::cache::EntryInfo>& entries) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& e : entries) j.push_back(rime::cache::entry_json(e));
  return to_python(j);
}

// ---- Logging -----------------------------------------------------------------------------------------------------

// The library's log lines, into logging.getLogger("rime") (INFO: each compile, before it starts and with its time;
// WARNING: cache problems). Called from any thread, with no lock of rime's held; takes the GIL.
void log_to_python(rime::log::Level level, const std::string& line) {
  if (!Py_IsInitialized()) return;
  nb::gil_scoped_acquire gil;
  PyObject* type = nullptr;
  PyObject* value = nullptr;
  PyObject* trace = nullptr;
  PyErr_Fetch(&type, &value, &trace);  // a log line never replaces an exception in flight
  try {
    const int py_level = level == rime::log::Level::Warn ? 30 : level == rime::log::Level::Info ? 20 : 10;
    nb::module_::import_("logging").attr("getLogger")("rime").attr("log")(py_level, line);
  } catch (...) {
    PyErr_Clear();
  }
  PyErr_Restore(type, value, trace);
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

  // torch's operator registry (rime.torch) keeps the Python kernels, and through them Plans, until the process ends,
  // past this module's teardown: nanobind would report those as leaks.
  nb::set_leak_warnings(false);
  rime::log::set_sink(log_to_python, rime::log::Level::Info);
  m.def(
      "_stop_logging", []() { rime::log::set_sink(nullptr, rime::log::Level::Off); },
      "Log lines go to stderr again (registered with atexit: no call into Python during its teardown).");

  nb::class_<rime::Graph>(m, "Graph", "A validated attention graph (docs/graph-json.md).")
      .def_static(
          "from_json", [](const std::string& text) { return take(rime::graph_from_json(text)); }, "text"_a,
          "Parses and validates a graph document; InvalidJsonError / InvalidGraphError name the field.")
      .def_prop_ro("name", [](const rime::Graph& g) { return g.name(); })
      .def_prop_ro("hash", [](const rime::Graph& g) { return rime::graph_hash(g); }, "sha256 of the canonical form")
      .def_prop_ro(
          "tensors",
          [](const rime::Graph& g) {
            nb::list out;
            for (const rime::TensorDesc& t : g.tensors()) out.append(tensor_dict(t));
            return out;
          },
          "Every tensor, in declaration order: name, uid, dims, strides, dtype, output.")
      .def("to_json", [](const rime::Graph& g, bool pretty) { return rime::graph_to_json(g, pretty); },
           "pretty"_a = true);

  m.def(
      "validate", [](const rime::Graph& g) { check(rime::validate(g)); }, "graph"_a,
      "Raises InvalidGraphError (with .location) when the graph breaks a rule.");

  nb::class_<rime::Plan>(m, "Plan", "A graph compiled for one device (docs/plan-json.md).")
      .def_static(
          "load",
          [](const std::string& artifact, nb::handle device) {
            const std::optional<int> ordinal = ordinal_of(device);
            nb::gil_scoped_release release;
            return take(rime::Plan::load(artifact, ordinal));
          },
          "artifact"_a, "device"_a = nb::none(),
          "Restores a plan from Plan.to_json() (kernels from the cache), loaded on `device` as plan() loads.")
      .def("to_json", &rime::Plan::to_json)
      .def_prop_ro("graph", &rime::Plan::graph, "the graph the plan was made from")
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
      .def_prop_ro("device", &rime::Plan::device_ordinal, "the CUDA device the kernels are loaded on (-1: none)")
      .def_prop_ro(
          "uids",
          [](const rime::Plan& p) {
            std::vector<int64_t> out;
            for (const rime::TensorDesc& t : p.graph().tensors()) out.push_back(t.uid);
            return out;
          },
          "The graph's tensor uids in declaration order: the order run_pointers() takes its pointers in.")
      .def(
          "explain",
          [](const rime::Plan& p, bool as_dict) -> nb::object {
            const rime::Explanation e = p.explain();
            return as_dict ? json_loads(e.json) : nb::str(e.text.c_str());
          },
          "json"_a = false, "The text of `rime plan --explain` (json=True: the fields of `rime plan --json`, a dict).")
      .def(
          "run",
          [](const rime::Plan& p, const nb::dict& buffers, nb::handle workspace, nb::handle stream) {
            run_buffers(p, p.graph(), p.device_ordinal(), buffers, workspace, stream);
          },
          "buffers"_a, "workspace"_a = nb::none(), "stream"_a = nb::none(),
          "Runs the plan on `stream` (an int CUstream, a stream object, or None: the legacy default stream). "
          "buffers: by tensor name or uid, a device pointer (int, unchecked) or a tensor (data_ptr() or "
          "__dlpack__) whose dtype, shape, strides and device must be the graph's. No allocation, copy, cast, "
          "synchronization or compile: capturable in a CUDA graph.")
      .def(
          "run_pointers",
          [](const rime::Plan& p, const std::vector<uintptr_t>& pointers, uintptr_t workspace, uintptr_t stream) {
            const std::vector<rime::TensorDesc>& tensors = p.graph().tensors();
            if (pointers.size() != tensors.size())
              invalid_argument("run_pointers(): " + std::to_string(pointers.size()) + " pointers for the graph's " +
                               std::to_string(tensors.size()) + " tensors (in the order of Plan.uids)");
            std::unordered_map<int64_t, void*> by_uid;
            by_uid.reserve(tensors.size());
            for (size_t i = 0; i < tensors.size(); ++i) by_uid[tensors[i].uid] = reinterpret_cast<void*>(pointers[i]);
            rime::Status s;
            {
              nb::gil_scoped_release release;
              s = p.execute(by_uid, reinterpret_cast<void*>(workspace), reinterpret_cast<void*>(stream));
            }
            check(s);
          },
          "pointers"_a, "workspace"_a = 0, "stream"_a = 0,
          "run() for callers that built the graph from their tensors: one device pointer per graph tensor, in the "
          "order of Plan.uids, taken unchecked (the library still checks null, alignment and overlap).");

  nb::class_<rime::RingPlan>(m, "RingPlan",
                             "A rank's part of the context-parallel prefill ring (docs/context-parallel.md): its "
                             "pass plans, the K/V transfers over NCCL and the merge.")
      .def_prop_ro("graph", &rime::RingPlan::graph, "the rank's shard: its two zig-zag chunks of Q, K, V and O")
      .def_prop_ro("workspace_size", &rime::RingPlan::workspace_size, "bytes of device memory run() needs")
      .def_prop_ro("prepared", &rime::RingPlan::prepared)
      .def_prop_ro("pass_plans",
                   [](const rime::RingPlan& r) {
                     nb::list out;
                     for (const rime::Plan* p : r.pass_plans()) out.append(*p);
                     return out;
                   },
                   "the plans of the passes (copies sharing their state): one per slot (step), K/V chunk count and "
                   "mask")
      .def("explain", &rime::RingPlan::explain, "the rank, its chunks, the schedule and the pass plans")
      .def(
          "transfer_times",
          [](const rime::RingPlan& r) {
            const rime::RingPlan::TransferTimes t = take(r.transfer_times());
            nb::dict d;
            d["transfers"] = t.transfers;
            d["transfer_ms"] = t.transfer_ms;
            d["exposed_ms"] = t.exposed_ms;
            return d;
          },
          "The last run's K/V transfers, once it has finished: their count, their time and the part of it the "
          "attention waited for (exposed).")
      .def(
          "run",
          [](const rime::RingPlan& r, const nb::dict& buffers, nb::handle workspace, nb::handle stream) {
            const int device = r.pass_plans().empty() ? -1 : r.pass_plans()[0]->device_ordinal();
            run_buffers(r, r.graph(), device, buffers, workspace, stream);
          },
          "buffers"_a, "workspace"_a = nb::none(), "stream"_a = nb::none(),
          "Runs the rank's part of the ring on `stream`: every rank of the communicator runs it for the step. "
          "buffers as Plan.run takes them, for the shard's tensors.");
  // NCCL communicators for callers without one (rime.torch.NcclCommunicator makes one over a torch.distributed
  // group, which exposes none): the unique id rank 0 makes and broadcasts, then every rank's collective init.
  m.def(
      "_nccl_unique_id",
      []() {
        check(rime::nccl::load_status());
        rime::nccl::UniqueId id{};
        check(rime::nccl::check(rime::nccl::api()->ncclGetUniqueId(&id), "ncclGetUniqueId"));
        return nb::bytes(id.internal, sizeof(id.internal));
      },
      "NCCL's unique id for a new communicator (128 bytes), made by one rank and given to all.");
  m.def(
      "_nccl_comm_init_rank",
      [](const nb::bytes& id_bytes, int world, int rank, int device) {
        check(rime::nccl::load_status());
        rime::nccl::UniqueId id{};
        if (id_bytes.size() != sizeof(id.internal))
          invalid_argument("an NCCL unique id is " + std::to_string(sizeof(id.internal)) + " bytes, not " +
                           std::to_string(id_bytes.size()));
        std::memcpy(id.internal, id_bytes.c_str(), sizeof(id.internal));
        rime::Result<CUcontext> ctx = rime::driver::primary_context(device);
        const CUcontext context = take(std::move(ctx));
        rime::nccl::Comm comm = nullptr;
        rime::Status s;
        {
          nb::gil_scoped_release release;  // collective: returns once every rank has joined
          const rime::driver::ScopedContext in_ctx(context);  // NCCL takes the current GPU as the rank's
          s = in_ctx.status();
          if (s.ok())
            s = rime::nccl::check(rime::nccl::api()->ncclCommInitRank(&comm, world, id, rank), "ncclCommInitRank");
        }
        check(s);
        return reinterpret_cast<uintptr_t>(comm);
      },
      "id"_a, "world"_a, "rank"_a, "device"_a,
      "Joins rank `rank` of `world` to the communicator of `id` on GPU `device`; returns its ncclComm_t's address.");
  m.def(
      "_nccl_comm_destroy",
      [](uintptr_t comm) {
        check(rime::nccl::load_status());
        check(rime::nccl::check(rime::nccl::api()->ncclCommDestroy(reinterpret_cast<rime::nccl::Comm>(comm)),
                                "ncclCommDestroy"));
      },
      "comm"_a);
  m.def(
      "ring_plan",
      [](const rime::Graph& shard, uintptr_t comm, int rank, int world, nb::handle device,
         std::optional<std::string> arch, std::optional<int> sms, bool use_tuned) {
        rime::PlanOptions o = options_for(device, arch, sms);
        o.use_tuned = use_tuned;
        nb::gil_scoped_release release;
        return take(rime::RingPlan::build(shard, rime::ContextParallel{reinterpret_cast<void*>(comm), rank, world}, o));
      },
      "shard"_a, "comm"_a, "rank"_a, "world"_a, "device"_a = nb::none(), "arch"_a = nb::none(), "sms"_a = nb::none(),
      "use_tuned"_a = true,
      "Plans rank `rank`'s part of the prefill ring over `world` GPUs (docs/context-parallel.md): `shard` holds chunks "
      "rank and 2 world - 1 - rank of the sequence's 2 world equal chunks of Q, K, V and O, one after the other "
      "along dims[2]; `comm` is the address of the caller's ncclComm_t over the ranks (an int; 0 plans without "
      "loading). device/arch/sms as plan() takes them.");
  m.def(
      "plan",
      [](const rime::Graph& g, nb::handle device, std::optional<std::string> arch, std::optional<int> sms,
         bool use_tuned, std::optional<std::tuple<uintptr_t, int, int>> context_parallel) {
        rime::PlanOptions o = options_for(device, arch, sms);
        o.use_tuned = use_tuned;
        o.context_parallel = context_parallel_of(context_parallel);
        nb::gil_scoped_release release;
        return take(rime::Plan::build(g, o));
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
      [](const rime::Graph& g, nb::handle device, int iterations, bool record) {
        rime::TuneOptions o;
        o.device_ordinal = ordinal_of(device);
        o.iterations = iterations;
        o.record = record;
        // Progress through the library's log, which reaches Python's logging (logger `rime`) like compile lines.
        o.progress = [](const std::string& line) { rime::log::info("tune: {}", line); };
        rime::Result<rime::TuneReport> r = rime::Status();
        {
          nb::gil_scoped_release release;
          r = rime::tune(g, o);
        }
        const rime::TuneReport rep = take(std::move(r));
        nb::list candidates;
        for (size_t i = 0; i < rep.candidates.size(); ++i) {
          const rime::TuneCandidate& c = rep.candidates[i];
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
      [](const rime::Graph& g, nb::handle device, std::optional<std::string> arch, std::optional<int> sms,
         bool as_dict, bool use_tuned, std::optional<std::tuple<uintptr_t, int, int>> context_parallel) -> nb::object {
        rime::PlanOptions o = options_for(device, arch, sms);
        o.use_tuned = use_tuned;
        o.context_parallel = context_parallel_of(context_parallel);
        rime::Explanation e;
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

  m.def(
      "set_cache_dir", [](const std::string& dir) { check(rime::set_cache_dir(dir)); }, "dir"_a,
      "The plan cache's directory for this process; before the first plan only.");
  m.def("cache_dir", []() { return rime::cache::settings().dir; }, "The plan cache's directory (empty: memory only).");
  m.def(
      "_cache_ls",
      []() {
        const rime::cache::DiskCache& disk = disk_cache();
        std::vector<rime::cache::EntryInfo> entries;
        std::vector<rime::cache::DiskCache::TunedFile> tuned;
        {
          nb::gil_scoped_release release;
          entries = disk.list(true);
          tuned = disk.list_tuned();
        }
        nlohmann::json j = nlohmann::json::array();
        for (const auto& e : entries) j.push_back(rime::cache::entry_json(e));
        for (const auto& t : tuned) j.push_back(rime::cache::tuned_json(t));
        return to_python(j);
      });
  m.def(
      "_cache_show",
      [](const std::string& name_or_key) {
        const rime::cache::DiskCache& disk = disk_cache();
        for (const auto& t : disk.list_tuned())
          if (t.name == name_or_key || "tuned/" + t.name == name_or_key) return to_python(rime::cache::tuned_json(t));
        rime::Result<rime::cache::EntryInfo> found = rime::Status();
        {
          nb::gil_scoped_release release;
          found = disk.find(name_or_key);
        }
        return to_python(rime::cache::entry_json(take(std::move(found))));
      },
      "name_or_key"_a);
  m.def(
      "_cache_stats",
      []() {
        const rime::cache::DiskCache& disk = disk_cache();
        rime::cache::DiskCache::Stats st;
        {
          nb::gil_scoped_release release;
          st = disk.stats();
        }
        nb::dict d;
        d["dir"] = disk.dir();
        d["entries"] = st.entries;
        d["foreign"] = st.foreign;
        d["bytes"] = st.bytes;
        d["max_bytes"] = disk.max_bytes();
        d["invalid"] = st.invalid;
        d["compile_ms_saved_per_cold_start"] = st.compile_ms;
        return d;
      });
  m.def(
      "_cache_verify",
      []() {
        const rime::cache::DiskCache& disk = disk_cache();
        std::vector<rime::cache::EntryInfo> listed, bad;
        {
          nb::gil_scoped_release release;
          listed = disk.list(false);
          bad = disk.verify();
        }
        int64_t checked = 0;
        nlohmann::json foreign = nlohmann::json::array();
        for (const auto& e : listed) {
          checked += e.kind == rime::cache::EntryKind::Entry;
          if (e.kind != rime::cache::EntryKind::Foreign) continue;
          foreign.push_back(rime::cache::entry_json(e));
          foreign.back()["blocks_entry"] = e.blocks_entry;  // as `rime cache verify --json` marks it
        }
        nb::dict d;
        d["checked"] = checked;
        d["quarantined"] = entry_list(bad);
        d["foreign"] = to_python(foreign);
        return d;
      });
  m.def("_call_key", &call_key, "head"_a, "tensors"_a, "device"_a = nb::none(),
        "The torch layer's shape-class key of a call (python/rime/torch.py).");
  nb::class_<CallBinding>(m, "_CallBinding", "How the torch layer's plan binds a call's tensors.")
      .def(nb::init<nb::handle, const std::vector<std::pair<int, uintptr_t>>&>(), "plan"_a, "slots"_a)
      .def("run", &CallBinding::run, "tensors"_a, "workspace"_a, "stream"_a);

  m.def(
      "_cache_prune",
      [](std::optional<int64_t> max_bytes) {
        const rime::cache::DiskCache& disk = disk_cache();
        const int64_t cap = max_bytes.value_or(disk.max_bytes());
        if (cap < 0) invalid_argument("cache prune: max_bytes " + std::to_string(cap) + " is negative");
        std::vector<rime::cache::EntryInfo> evicted;
        {
          nb::gil_scoped_release release;
          evicted = disk.prune(cap);
        }
        nb::dict d;
        d["max_bytes"] = cap;
        d["evicted"] = entry_list(evicted);
        return d;
      },
      "max_bytes"_a = nb::none());
  m.def(
      "_parse_bytes",
      [](const std::string& text) {
        const std::optional<int64_t> v = rime::parse_bytes(text);
        if (!v) invalid_argument("max_bytes '" + text + "': digits, optionally followed by K, M, G or T");
        return *v;
      },
      "text"_a);
  m.def(
      "_cache_clear",
      [](bool tuned) {
        const rime::cache::DiskCache& disk = disk_cache();
        rime::Result<int> n = rime::Status();
        {
          nb::gil_scoped_release release;
          n = tuned ? disk.clear_tuned() : disk.clear();
        }
        return take(std::move(n));
      },
      "tuned"_a = false);
}
