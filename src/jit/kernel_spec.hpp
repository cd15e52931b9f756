// Internal: one kernel specialization (SPEC section 9) and the NVRTC compile that turns it into a cubin.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "rime/status.hpp"

namespace rime {

// What to compile: an engine header and the template instance it provides, for one exact arch.
struct KernelSpec {
  std::string engine;           // "sdpa_fp8_sm89", "combine": names cache entries and log lines
  std::string header;           // "sdpa_mma/kernel.cuh", relative to engines/
  std::string name_expression;  // "rime_dev::sdpa_mma_fwd<2, 2, 128, 128, 64, 6>"
  std::string params_type;      // the kernel's single by-value parameter: "SdpaParams", "CombineParams"
  std::string arch;             // "sm_90a": exact, never a family

  friend bool operator==(const KernelSpec& a, const KernelSpec& b) {
    return a.engine == b.engine && a.header == b.header && a.name_expression == b.name_expression &&
           a.params_type == b.params_type && a.arch == b.arch;
  }
};

struct CompiledKernel {
  KernelSpec spec;
  std::string key;           // sha256 hex of everything that determines the cubin
  std::string lowered_name;  // the mangled symbol to look up in the module
  std::string cubin;         // bytes
  double compile_ms = 0;     // of the NVRTC compile that produced it
};

// A kernel and where this lookup found it.
struct KernelLookup {
  std::shared_ptr<const CompiledKernel> kernel;
  std::string origin;  // "compiled", "disk" or "memory"
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

// Memory, then disk, then NVRTC; single-flight per key across threads; every compile is logged at
// RIME_LOG=info with its name, digest and milliseconds.
Result<KernelLookup> get_kernel(const KernelSpec& spec);

namespace cache {
class DiskCache;
}
// The same with an explicit disk cache (nullptr: memory only); tests use it to point at their own directory.
Result<KernelLookup> get_kernel(const KernelSpec& spec, const cache::DiskCache* disk);

// Drops the in-memory map (tests use it to force the disk path).
void clear_memory_cache();

}  // namespace rime
