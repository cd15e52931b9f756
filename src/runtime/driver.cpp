#include "runtime/driver.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>

namespace rime::driver {
namespace {

struct Loaded {
  Api api{};
  void* lib = nullptr;
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
    out.lib = lib;
    Api& a = out.api;
    std::string& err = out.error;
    // The _v2 names are the ABI that cuda.h's macros select for these entry points.
    bool ok = load_symbol(lib, "cuInit", a.cuInit, err) && load_symbol(lib, "cuGetErrorString", a.cuGetErrorString, err) &&
              load_symbol(lib, "cuDeviceGet", a.cuDeviceGet, err) &&
              load_symbol(lib, "cuDeviceGetCount", a.cuDeviceGetCount, err) &&
              load_symbol(lib, "cuDeviceGetAttribute", a.cuDeviceGetAttribute, err) &&
              load_symbol(lib, "cuDeviceGetName", a.cuDeviceGetName, err) &&
              load_symbol(lib, "cuDevicePrimaryCtxRetain", a.cuDevicePrimaryCtxRetain, err) &&
              load_symbol(lib, "cuCtxSetCurrent", a.cuCtxSetCurrent, err) &&
              load_symbol(lib, "cuCtxGetCurrent", a.cuCtxGetCurrent, err) &&
              load_symbol(lib, "cuCtxGetDevice", a.cuCtxGetDevice, err) &&
              load_symbol(lib, "cuModuleLoadData", a.cuModuleLoadData, err) &&
              load_symbol(lib, "cuModuleGetFunction", a.cuModuleGetFunction, err) &&
              load_symbol(lib, "cuFuncSetAttribute", a.cuFuncSetAttribute, err) &&
              load_symbol(lib, "cuOccupancyMaxActiveBlocksPerMultiprocessor",
                          a.cuOccupancyMaxActiveBlocksPerMultiprocessor, err) &&
              load_symbol(lib, "cuLaunchKernel", a.cuLaunchKernel, err) &&
              load_symbol(lib, "cuMemsetD32Async", a.cuMemsetD32Async, err) &&
              load_symbol(lib, "cuMemAlloc_v2", a.cuMemAlloc, err) && load_symbol(lib, "cuMemFree_v2", a.cuMemFree, err) &&
              load_symbol(lib, "cuMemcpyDtoH_v2", a.cuMemcpyDtoH, err) &&
              load_symbol(lib, "cuStreamSynchronize", a.cuStreamSynchronize, err);
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

void* library() { return loaded().ok ? loaded().lib : nullptr; }

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
  CUdevice dev = 0;
  Status s = check(a->cuDeviceGet(&dev, 0), "cuDeviceGet");
  if (!s.ok()) return s;
  s = check(a->cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  if (!s.ok()) return s;
  return check(a->cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
}

Result<DeviceDesc> query_device() {
  Status s = ensure_context();
  if (!s.ok()) return s;
  const Api* a = api();
  CUdevice dev = 0;
  s = check(a->cuCtxGetDevice(&dev), "cuCtxGetDevice");
  if (!s.ok()) return s;
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

}  // namespace rime::driver
