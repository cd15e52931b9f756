// Internal: loaded modules, one per (CUDA context, cache key) per process.
#pragma once

#include <cuda.h>

#include "jit/kernel_spec.hpp"
#include "rime/status.hpp"

namespace rime::runtime {

// Loads (once per context: the current one, else device 0's primary context) the kernel's cubin and returns its
// function, with its dynamic shared memory limit raised to `smem_bytes` when that is above the 48 KB default. A
// plan prepared in one context runs in that context: prepare a plan per GPU.
Result<CUfunction> load_function(const CompiledKernel& kernel, int smem_bytes);

}  // namespace rime::runtime
