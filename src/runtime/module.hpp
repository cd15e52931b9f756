// Internal: loaded modules, one per (CUDA context, cache key) per process.
#pragma once

#include <cuda.h>

#include "jit/kernel_spec.hpp"
#include "rime/status.hpp"

namespace rime::runtime {

// Loads (once per context) the kernel's cubin into `ctx` and returns its function, with its dynamic shared memory
// limit raised to `smem_bytes` when that is above the 48 KB default. The function launches in `ctx` only: a plan
// keeps the context its kernels were loaded in (one plan per GPU).
Result<CUfunction> load_function(const CompiledKernel& kernel, int smem_bytes, CUcontext ctx);

}  // namespace rime::runtime
