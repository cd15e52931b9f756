// Internal: a kernel by its specialization, from memory, then the disk cache, then NVRTC.
#pragma once

#include <memory>
#include <string>

#include "jit/kernel_spec.hpp"
#include "rime/status.hpp"

namespace rime {

// A kernel and where this lookup found it.
struct KernelLookup {
  std::shared_ptr<const CompiledKernel> kernel;
  std::string origin;  // "compiled", "disk" or "memory"
};

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
