#include "runtime/nccl.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>

#include "runtime/symbols.hpp"

namespace rime::nccl {
namespace {

struct Loaded {
  Api api{};
  bool ok = false;
  int version = 0;
  std::string error;
};

template <class F>
bool load(void* lib, const char* name, F& out, std::string& error) {
  return runtime::load_symbol(lib, "the NCCL library", name, out, error);
}

const Loaded& loaded() {
  static const Loaded l = [] {
    Loaded out;
    const char* env = std::getenv("RIME_NCCL_LIBRARY");
    const std::string path = env && *env ? env : "libnccl.so.2";
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      out.error = fmt::format(
          "NCCL is needed for a context-parallel plan and did not load (dlopen {}: {}); set RIME_NCCL_LIBRARY to "
          "libnccl.so.2 (the CUDA toolkit's, or nvidia/nccl/lib/ of the nvidia-nccl wheel)",
          path, e ? e : "unknown error");
      return out;
    }
    Api& a = out.api;
    std::string& err = out.error;
    const bool ok = load(lib, "ncclGetVersion", a.ncclGetVersion, err) &&
                    load(lib, "ncclGetErrorString", a.ncclGetErrorString, err) &&
                    load(lib, "ncclCommCount", a.ncclCommCount, err) &&
                    load(lib, "ncclCommUserRank", a.ncclCommUserRank, err) &&
                    load(lib, "ncclCommCuDevice", a.ncclCommCuDevice, err) &&
                    load(lib, "ncclAllGather", a.ncclAllGather, err) &&
                    load(lib, "ncclSend", a.ncclSend, err) && load(lib, "ncclRecv", a.ncclRecv, err) &&
                    load(lib, "ncclGroupStart", a.ncclGroupStart, err) &&
                    load(lib, "ncclGroupEnd", a.ncclGroupEnd, err) &&
                    load(lib, "ncclGetUniqueId", a.ncclGetUniqueId, err) &&
                    load(lib, "ncclCommInitRank", a.ncclCommInitRank, err) &&
                    load(lib, "ncclCommInitAll", a.ncclCommInitAll, err) &&
                    load(lib, "ncclCommDestroy", a.ncclCommDestroy, err);
    if (!ok) {
      err = fmt::format("{} ({})", err, path);
      return out;
    }
    if (a.ncclGetVersion(&out.version) != kSuccess) {
      out.error = fmt::format("ncclGetVersion failed ({})", path);
      return out;
    }
    out.ok = true;
    return out;
  }();
  return l;
}

}  // namespace

const Api* api() { return loaded().ok ? &loaded().api : nullptr; }

Status load_status() { return loaded().ok ? Status::success() : Status(StatusCode::CudaError, loaded().error); }

int version() { return loaded().ok ? loaded().version : 0; }

Status check(Result result, const char* what) {
  if (result == kSuccess) return Status::success();
  const Api* a = api();
  const char* text = a ? a->ncclGetErrorString(result) : nullptr;
  return Status(StatusCode::CudaError, fmt::format("{} failed: NCCL error {} ({})", what, static_cast<int>(result),
                                                   text ? text : "unknown"));
}

}  // namespace rime::nccl
