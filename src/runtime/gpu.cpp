// rime/gpu.hpp: the driver's GPUs for tools (the library's own queries are driver::query_device).
#include "rime/gpu.hpp"

#include "runtime/driver.hpp"

namespace rime {

Result<DeviceDesc> query_device(std::optional<int> ordinal) {
  return ordinal ? driver::query_device(*ordinal) : driver::query_device();
}

Result<int> device_count() {
  const driver::Api* api = driver::api();
  if (!api) return driver::load_status();
  int n = 0;
  if (Status s = driver::check(api->cuDeviceGetCount(&n), "cuDeviceGetCount"); !s.ok()) return s;
  return n;
}

}  // namespace rime
