// Internal: the CUDA driver API, opened at run time with dlopen so that everything but execution works on a
// machine without a GPU or driver.
#pragma once

#include <cuda.h>

#include <string>

#include "rime/device.hpp"
#include "rime/status.hpp"

namespace rime::driver {

// Function pointers of every driver entry point rime calls: the library's (loading, launching, the streams and
// events of the context-parallel ring, the checked-indices verdict copy, tune's timing), and those of its tools
// (tools/testing: allocation, copies, graph capture), in one table loaded once. api() returns nullptr when there
// is no driver (then load_status() says why).
struct Api {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGetAttribute)(int*, CUdevice_attribute, CUdevice);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxGetDevice)(CUdevice*);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuFuncSetAttribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int*, CUfunction, int, size_t);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**);
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*cuMemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventQuery)(CUevent);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  CUresult (*cuStreamBeginCapture)(CUstream, CUstreamCaptureMode);
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*);
  CUresult (*cuGraphInstantiate)(CUgraphExec*, CUgraph, unsigned long long);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  CUresult (*cuGraphDestroy)(CUgraph);
  CUresult (*cuDriverGetVersion)(int*);
  // Optional (nullptr when the driver lacks them): launches with attributes, for programmatic dependent launch;
  // tensor maps for engines that load with TMA.
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig*, CUfunction, void**, void**);
  CUresult (*cuTensorMapEncodeTiled)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                     const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                     CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
};

const Api* api();
Status load_status();

// Wraps a driver result into a Status naming the call.
Status check(CUresult result, const char* what);

// Makes device 0's primary context current on this thread (no-op if a context is already current).
Status ensure_context();

// The GPU of this thread's current context, else 0 (the one ensure_context would make current). CudaError without
// a driver.
Result<int> current_ordinal();
// GPU `ordinal`'s primary context, retained once per process (it then lives as long as the process, as the CUDA
// runtime's does). InvalidArgument naming the GPU count when there is no such GPU.
Result<CUcontext> primary_context(int ordinal);

// The device description of GPU `ordinal` (attributes only: no context is made current).
Result<DeviceDesc> query_device(int ordinal);
// The device description of the current GPU (current_ordinal()), or CudaError without one.
Result<DeviceDesc> query_device();

// Makes `ctx` current on this thread for the guard's life when another (or none) is, and restores that one after:
// a plan's kernels launch in the context they were loaded in, whatever the caller's thread has current.
class ScopedContext {
 public:
  explicit ScopedContext(CUcontext ctx);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  // The result of making it current (success when it already was).
  const Status& status() const { return status_; }

 private:
  CUcontext previous_ = nullptr;
  bool switched_ = false;
  Status status_;
};

}  // namespace rime::driver
