#include "runtime/module.hpp"

#include <fmt/format.h>

#include <map>
#include <mutex>

#include "runtime/driver.hpp"

namespace rime::runtime {

Result<CUfunction> load_function(const CompiledKernel& kernel, int smem_bytes, CUcontext ctx) {
  static std::mutex mu;
  // (context, key) -> module, for the life of the process: a module belongs to the context it was loaded in,
  // so two GPUs (two contexts) of one process each get their own.
  static std::map<std::pair<CUcontext, std::string>, CUmodule> modules;
  const driver::ScopedContext in_ctx(ctx);  // cuModuleLoadData loads into the current context
  if (!in_ctx.status().ok()) return in_ctx.status();
  const driver::Api* api = driver::api();
  Status s;
  std::lock_guard<std::mutex> lock(mu);
  CUmodule& module = modules[{ctx, kernel.key}];
  if (!module) {
    s = driver::check(api->cuModuleLoadData(&module, kernel.cubin.data()), "cuModuleLoadData");
    if (!s.ok()) {
      module = nullptr;
      return Status(StatusCode::CudaError, fmt::format("{} ({} for {})", s.message(), kernel.spec.engine,
                                                       kernel.spec.arch));
    }
  }
  CUfunction fn = nullptr;
  s = driver::check(api->cuModuleGetFunction(&fn, module, kernel.lowered_name.c_str()), "cuModuleGetFunction");
  if (!s.ok()) return s;
  if (smem_bytes > 48 * 1024) {
    s = driver::check(api->cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem_bytes),
                      "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    if (!s.ok()) return s;
  }
  return fn;
}

}  // namespace rime::runtime
