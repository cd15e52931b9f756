// The GPUs of this machine as the CUDA driver reports them (the driver is opened at run time: without one, each call
// is a CudaError saying why). What a tool needs to choose between planning for the GPU it has and for a described
// one (`rime plan --arch`).
#pragma once

#include <optional>

#include "rime/device.hpp"
#include "rime/status.hpp"

namespace rime {

// GPU `ordinal`'s description (arch, SMs, shared memory, name); without an ordinal, the GPU of this thread's current
// CUDA context, else GPU 0: the one a plan is made for when PlanOptions names none.
Result<DeviceDesc> query_device(std::optional<int> ordinal = std::nullopt);

// How many GPUs the driver sees.
Result<int> device_count();

}  // namespace rime
