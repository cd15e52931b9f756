#include "runtime/driver.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <map>
#include <mutex>

#include "runtime/symbols.hpp"

namespace rime::driver {
namespace {

struct Loaded {
  Api api{};
  bool ok = false;
  std::string error;
};

const Loaded& loaded() {
  static const Loaded l = [] {
    Loaded out;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      out.error = fmt::format("no CUDA driver (dlopen libcuda.so.1: {})", e ? e : "unknown error");
      return out;
    }
    Api& a = out.api;
    std::string& err = out.error;
    auto load = [&](const char* name, auto& fn) { return runtime::load_symbol(lib, "libcuda", name, fn, err); };
    // The _v2 names are the ABI that cuda.h's macros select for these entry points.
    bool ok = load("cuInit", a.cuInit) && load("cuGetErrorString", a.cuGetErrorString) &&
              load("cuDriverGetVersion", a.cuDriverGetVersion) && load("cuDeviceGet", a.cuDeviceGet) &&
              load("cuDeviceGetCount", a.cuDeviceGetCount) && load("cuDeviceGetAttribute", a.cuDeviceGetAttribute) &&
              load("cuDeviceGetName", a.cuDeviceGetName) &&
              load("cuDevicePrimaryCtxRetain", a.cuDevicePrimaryCtxRetain) &&
              load("cuCtxSetCurrent", a.cuCtxSetCurrent) && load("cuCtxGetCurrent", a.cuCtxGetCurrent) &&
              load("cuCtxGetDevice", a.cuCtxGetDevice) && load("cuCtxSynchronize", a.cuCtxSynchronize) &&
              load("cuModuleLoadData", a.cuModuleLoadData) && load("cuModuleGetFunction", a.cuModuleGetFunction) &&
              load("cuFuncSetAttribute", a.cuFuncSetAttribute) &&
              load("cuOccupancyMaxActiveBlocksPerMultiprocessor", a.cuOccupancyMaxActiveBlocksPerMultiprocessor) &&
              load("cuLaunchKernel", a.cuLaunchKernel) && load("cuMemAlloc_v2", a.cuMemAlloc) &&
              load("cuMemFree_v2", a.cuMemFree) && load("cuMemcpyHtoD_v2", a.cuMemcpyHtoD) &&
              load("cuMemcpyDtoH_v2", a.cuMemcpyDtoH) && load("cuMemcpyDtoD_v2", a.cuMemcpyDtoD) &&
              load("cuMemcpyDtoDAsync_v2", a.cuMemcpyDtoDAsync) && load("cuMemsetD8_v2", a.cuMemsetD8) &&
              load("cuMemsetD8Async", a.cuMemsetD8Async) && load("cuMemsetD32Async", a.cuMemsetD32Async) &&
              load("cuStreamCreate", a.cuStreamCreate) && load("cuStreamDestroy_v2", a.cuStreamDestroy) &&
              load("cuStreamSynchronize", a.cuStreamSynchronize) && load("cuStreamWaitEvent", a.cuStreamWaitEvent) &&
              load("cuStreamBeginCapture_v2", a.cuStreamBeginCapture) &&
              load("cuStreamEndCapture", a.cuStreamEndCapture) && load("cuEventCreate", a.cuEventCreate) &&
              load("cuEventDestroy_v2", a.cuEventDestroy) && load("cuEventRecord", a.cuEventRecord) &&
              load("cuEventQuery", a.cuEventQuery) && load("cuEventSynchronize", a.cuEventSynchronize) &&
              load("cuEventElapsedTime", a.cuEventElapsedTime) &&
              load("cuGraphInstantiateWithFlags", a.cuGraphInstantiate) && load("cuGraphLaunch", a.cuGraphLaunch) &&
              load("cuGraphExecDestroy", a.cuGraphExecDestroy) && load("cuGraphDestroy", a.cuGraphDestroy);
    if (!ok) return out;
    a.cuLaunchKernelEx = reinterpret_cast<decltype(a.cuLaunchKernelEx)>(dlsym(lib, "cuLaunchKernelEx"));
    a.cuTensorMapEncodeTiled = reinterpret_cast<decltype(a.cuTensorMapEncodeTiled)>(dlsym(lib, "cuTensorMapEncodeTiled"));
    CUresult r = a.cuInit(0);
    if (r != CUDA_SUCCESS) {
      const char* s = nullptr;
      a.cuGetErrorString(r, &s);
      out.error = fmt::format("cuInit failed: {}", s ? s : "unknown error");
      return out;
    }
    int count = 0;
    if (a.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
      out.error = "the CUDA driver sees no GPU";
      return out;
    }
    out.ok = true;
    return out;
  }();
  return l;
}

}  // namespace

const Api* api() { return loaded().ok ? &loaded().api : nullptr; }

Status load_status() {
  return loaded().ok ? Status::success() : Status(StatusCode::CudaError, loaded().error);
}

Status check(CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return Status::success();
  const char* s = nullptr;
  if (api()) api()->cuGetErrorString(result, &s);
  return Status(StatusCode::CudaError, fmt::format("{} failed: {} ({})", what, s ? s : "unknown error",
                                                   static_cast<int>(result)));
}

Status ensure_context() {
  const Api* a = api();
  if (!a) return load_status();
  CUcontext ctx = nullptr;
  if (a->cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx) return Status::success();
  Result<CUcontext> primary = primary_context(0);
  if (!primary.ok()) return primary.status();
  return check(a->cuCtxSetCurrent(primary.value()), "cuCtxSetCurrent");
}

Result<int> current_ordinal() {
  const Api* a = api();
  if (!a) return load_status();
  CUcontext ctx = nullptr;
  if (a->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) return 0;
  CUdevice dev = 0;
  Status s = check(a->cuCtxGetDevice(&dev), "cuCtxGetDevice");
  if (!s.ok()) return s;
  return static_cast<int>(dev);  // a CUdevice is its ordinal (cuDeviceGet(&dev, n) gives n)
}

namespace {
Result<CUdevice> device_of(int ordinal) {
  const Api* a = api();
  if (!a) return load_status();
  int count = 0;
  Status s = check(a->cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (!s.ok()) return s;
  if (ordinal < 0 || ordinal >= count)
    return Status(StatusCode::InvalidArgument,
                  fmt::format("device {} does not exist: the CUDA driver sees {} GPU(s), 0..{}", ordinal, count,
                              count - 1));
  CUdevice dev = 0;
  s = check(a->cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  if (!s.ok()) return s;
  return dev;
}
}  // namespace

Result<CUcontext> primary_context(int ordinal) {
  static std::mutex mu;
  static std::map<int, CUcontext> retained;
  Result<CUdevice> dev = device_of(ordinal);
  if (!dev.ok()) return dev.status();
  std::lock_guard<std::mutex> lock(mu);
  auto it = retained.find(ordinal);
  if (it != retained.end()) return it->second;
  CUcontext ctx = nullptr;
  Status s = check(api()->cuDevicePrimaryCtxRetain(&ctx, dev.value()), "cuDevicePrimaryCtxRetain");
  if (!s.ok()) return s;
  retained[ordinal] = ctx;
  return ctx;
}

Result<DeviceDesc> query_device(int ordinal) {
  Result<CUdevice> device = device_of(ordinal);
  if (!device.ok()) return device.status();
  const Api* a = api();
  const CUdevice dev = device.value();
  int major = 0, minor = 0, sms = 0, smem = 0;
  a->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  a->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  a->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
  a->cuDeviceGetAttribute(&smem, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev);
  int smem_sm = 0;
  a->cuDeviceGetAttribute(&smem_sm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, dev);
  char name[256] = {};
  a->cuDeviceGetName(name, sizeof(name), dev);
  DeviceDesc d;
  d.arch = major * 10 + minor;
  // The arch-specific target (sm_90a, sm_100a, ...) runs only on its own arch, which is the one we have.
  d.arch_specific = major >= 9;
  d.sm_count = sms;
  d.smem_per_block = smem;
  d.smem_per_sm = smem_sm;
  d.name = name;
  return d;
}

Result<DeviceDesc> query_device() {
  Result<int> ordinal = current_ordinal();
  if (!ordinal.ok()) return ordinal.status();
  return query_device(ordinal.value());
}

ScopedContext::ScopedContext(CUcontext ctx) {
  const Api* a = api();
  if (!a) {
    status_ = load_status();
    return;
  }
  status_ = check(a->cuCtxGetCurrent(&previous_), "cuCtxGetCurrent");
  if (!status_.ok() || previous_ == ctx) return;
  status_ = check(a->cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  switched_ = status_.ok();
}

ScopedContext::~ScopedContext() {
  if (switched_) api()->cuCtxSetCurrent(previous_);
}

}  // namespace rime::driver
