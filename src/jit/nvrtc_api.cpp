#include "jit/nvrtc_api.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <vector>

namespace rime::jit {
namespace {

struct Loaded {
  NvrtcApi api{};
  bool ok = false;
  std::string error;
};

const Loaded& loaded() {
  static const Loaded l = [] {
    Loaded out;
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("RIME_NVRTC_LIBRARY"); env && *env) candidates.push_back(env);
    for (const char* name : {"libnvrtc.so.13", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so.13",
                             "/usr/local/cuda/lib64/libnvrtc.so"})
      candidates.push_back(name);
    std::string tried;
    void* lib = nullptr;
    for (const std::string& c : candidates) {
      lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib) break;
      const char* e = dlerror();
      tried += fmt::format("\n  {}: {}", c, e ? e : "not loaded");
    }
    if (!lib) {
      out.error = "NVRTC is not available (rime compiles its kernels with it; install the CUDA toolkit's NVRTC or the "
                  "nvidia-cuda-nvrtc wheel, or set RIME_NVRTC_LIBRARY to libnvrtc.so):" + tried;
      return out;
    }
    NvrtcApi& a = out.api;
    bool ok = true;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn) {
        ok = false;
        out.error += fmt::format("NVRTC has no {}; ", name);
      }
    };
    sym(a.nvrtcVersion, "nvrtcVersion");
    sym(a.nvrtcCreateProgram, "nvrtcCreateProgram");
    sym(a.nvrtcDestroyProgram, "nvrtcDestroyProgram");
    sym(a.nvrtcAddNameExpression, "nvrtcAddNameExpression");
    sym(a.nvrtcCompileProgram, "nvrtcCompileProgram");
    sym(a.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize");
    sym(a.nvrtcGetProgramLog, "nvrtcGetProgramLog");
    sym(a.nvrtcGetLoweredName, "nvrtcGetLoweredName");
    sym(a.nvrtcGetCUBINSize, "nvrtcGetCUBINSize");
    sym(a.nvrtcGetCUBIN, "nvrtcGetCUBIN");
    sym(a.nvrtcGetErrorString, "nvrtcGetErrorString");
    out.ok = ok;
    return out;
  }();
  return l;
}

}  // namespace

const NvrtcApi* nvrtc() { return loaded().ok ? &loaded().api : nullptr; }

Status nvrtc_status() {
  return loaded().ok ? Status::success() : Status(StatusCode::CompileFailed, loaded().error);
}

}  // namespace rime::jit
