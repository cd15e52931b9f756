// Internal: the NVRTC compile of one kernel specialization (KernelSpec, SPEC section 9) and its cache key.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "rime/inspect/config.hpp"
#include "rime/status.hpp"

namespace rime {

struct CompiledKernel {
  KernelSpec spec;
  std::string key;           // sha256 hex of everything that determines the cubin
  std::string lowered_name;  // the mangled symbol to look up in the module
  std::string cubin;         // bytes
  double compile_ms = 0;     // of the NVRTC compile that produced it
};

// The tiny generated translation unit: includes the engine header and instantiates the template.
std::string generated_source(const KernelSpec& spec);
// NVRTC options, in order (part of the key).
std::vector<std::string> nvrtc_options(const KernelSpec& spec);
// "13.0"
std::string nvrtc_version();
// sha256 over: cache format version, rime version, NVRTC version, arch, options, the generated source and the
// contents of every header it includes (transitively). Never a path.
Result<std::string> cache_key(const KernelSpec& spec);

// NVRTC compile, no cache. CompileFailed carries the full log and the kernel's name.
Result<CompiledKernel> compile_uncached(const KernelSpec& spec);

}  // namespace rime
