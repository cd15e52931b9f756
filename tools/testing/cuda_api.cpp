#include "testing/cuda_api.hpp"

#include <string>

#include "runtime/driver.hpp"

namespace rime::testing {
namespace {

struct Loaded {
  CudaApi api{};
  Status status;
};

template <class F>
bool load(void* lib, const char* name, F& out, Status& status) {
  std::string error;
  if (driver::load_symbol(lib, name, out, error)) return true;
  status = Status(StatusCode::CudaError, error);
  return false;
}

const Loaded& loaded() {
  static const Loaded l = [] {
    Loaded out;
    // The library's handle: it reports a missing driver or GPU in its own words.
    out.status = driver::load_status();
    if (!out.status.ok()) return out;
    void* lib = driver::library();
    CudaApi& a = out.api;
    Status& s = out.status;
    // The _v2 names are the ABI that cuda.h's macros select for these entry points.
    load(lib, "cuMemAlloc_v2", a.cuMemAlloc, s) && load(lib, "cuMemFree_v2", a.cuMemFree, s) &&
        load(lib, "cuMemcpyHtoD_v2", a.cuMemcpyHtoD, s) && load(lib, "cuMemcpyDtoH_v2", a.cuMemcpyDtoH, s) &&
        load(lib, "cuMemcpyDtoD_v2", a.cuMemcpyDtoD, s) &&
        load(lib, "cuMemcpyDtoDAsync_v2", a.cuMemcpyDtoDAsync, s) && load(lib, "cuMemsetD8_v2", a.cuMemsetD8, s) &&
        load(lib, "cuMemsetD8Async", a.cuMemsetD8Async, s) && load(lib, "cuStreamCreate", a.cuStreamCreate, s) &&
        load(lib, "cuStreamDestroy_v2", a.cuStreamDestroy, s) &&
        load(lib, "cuStreamSynchronize", a.cuStreamSynchronize, s) &&
        load(lib, "cuCtxSynchronize", a.cuCtxSynchronize, s) &&
        load(lib, "cuStreamBeginCapture_v2", a.cuStreamBeginCapture, s) &&
        load(lib, "cuStreamEndCapture", a.cuStreamEndCapture, s) &&
        load(lib, "cuGraphInstantiateWithFlags", a.cuGraphInstantiate, s) &&
        load(lib, "cuGraphLaunch", a.cuGraphLaunch, s) && load(lib, "cuGraphExecDestroy", a.cuGraphExecDestroy, s) &&
        load(lib, "cuGraphDestroy", a.cuGraphDestroy, s) && load(lib, "cuEventCreate", a.cuEventCreate, s) &&
        load(lib, "cuEventDestroy_v2", a.cuEventDestroy, s) && load(lib, "cuEventRecord", a.cuEventRecord, s) &&
        load(lib, "cuEventSynchronize", a.cuEventSynchronize, s) &&
        load(lib, "cuEventElapsedTime", a.cuEventElapsedTime, s);
    return out;
  }();
  return l;
}

}  // namespace

const CudaApi* cuda() {
  if (!loaded().status.ok()) return nullptr;
  if (!driver::ensure_context().ok()) return nullptr;
  return &loaded().api;
}

Status cuda_status() {
  if (!loaded().status.ok()) return loaded().status;
  return driver::ensure_context();
}

}  // namespace rime::testing
