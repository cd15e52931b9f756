// The CUDA driver for the testing code (allocation, copies, streams, events, graph capture): the library's own
// table (src/runtime/driver.hpp), opened with dlopen, so that the CLI, the GPU tests and the benchmarks build and
// plan on machines without a GPU.
#pragma once

#include "rime/status.hpp"
#include "runtime/driver.hpp"

namespace rime::testing {

using CudaApi = driver::Api;

// nullptr without a driver or GPU (cuda_status() says why). Also makes device 0's primary context current on
// the calling thread, as the library does before it loads a plan.
const CudaApi* cuda();
Status cuda_status();

}  // namespace rime::testing
