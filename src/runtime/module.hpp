// Internal: loaded modules, one per cache key per process (the primary context of device 0).
#pragma once

#include <cuda.h>

#include "jit/kernel_spec.hpp"
#include "rime/status.hpp"

namespace rime::runtime {

// Loads (once) the kernel's cubin and returns its function, with its dynamic shared memory limit raised to
// `smem_bytes` when that is above the 48 KB default.
Result<CUfunction> load_function(const CompiledKernel& kernel, int smem_bytes);

}  // namespace rime::runtime
