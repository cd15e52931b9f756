// rime::sequences_from_padding_mask (include/rime/padding_mask.hpp): engines/common/padding_mask.cuh, compiled
// through the plan cache once per (GPU arch, element size) and loaded once per context.
#include "rime/padding_mask.hpp"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <utility>

#include "cache/get_kernel.hpp"
#include "common/params.h"
#include "runtime/driver.hpp"
#include "runtime/module.hpp"
#include "status_macros.hpp"

namespace rime {
namespace {

Status invalid(const std::string& what) { return Status(StatusCode::InvalidArgument, "padding mask: " + what); }

Status validate(const PaddingMask& m, int64_t q_length, int64_t kv_length, const int32_t* out) {
  if (!m.data) return invalid("data is null");
  if (!out) return invalid("out is null");
  if (m.element_bytes != 1 && m.element_bytes != 2 && m.element_bytes != 4 && m.element_bytes != 8)
    return invalid(fmt::format("element_bytes = {} (1, 2, 4 or 8: bool, int32, int64 masks)", m.element_bytes));
  if (m.batch < 1 || m.batch > INT32_MAX)
    return invalid(fmt::format("batch = {} (1 .. {})", m.batch, INT32_MAX));
  if (m.positions < 1 || m.positions > INT32_MAX)
    return invalid(fmt::format("positions = {} (1 .. {})", m.positions, INT32_MAX));
  if (m.row_stride < m.positions && m.batch > 1)
    return invalid(fmt::format("row_stride = {} is below positions = {} (rows would overlap)", m.row_stride,
                               m.positions));
  if (kv_length < 1 || kv_length > m.positions)
    return invalid(fmt::format("kv_length = {} (1 .. positions = {})", kv_length, m.positions));
  if (q_length < 1 || q_length > kv_length)
    return invalid(fmt::format("q_length = {} (1 .. kv_length = {})", q_length, kv_length));
  return Status::success();
}

// The kernel of (context, element size), loaded on first use.
Result<CUfunction> kernel_for(int device, int element_bytes) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, CUfunction> loaded;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(device, element_bytes);
  if (auto it = loaded.find(key); it != loaded.end()) return it->second;
  Result<DeviceDesc> gpu = driver::query_device(device);
  if (!gpu.ok()) return gpu.status();
  Result<CUcontext> ctx = driver::primary_context(device);
  if (!ctx.ok()) return ctx.status();
  const KernelSpec spec{"padding_mask", "common/padding_mask.cuh",
                        fmt::format("rime_dev::padding_mask_sequences<{}>", element_bytes), "PaddingMaskParams",
                        gpu->arch_name()};
  Result<KernelLookup> k = get_kernel(spec);
  if (!k.ok()) return k.status();
  Result<CUfunction> fn = runtime::load_function(*k->kernel, 0, ctx.value());
  if (!fn.ok()) return fn.status();
  loaded.emplace(key, fn.value());
  return fn.value();
}

}  // namespace

Status sequences_from_padding_mask(const PaddingMask& mask, int64_t q_length, int64_t kv_length, int32_t* out,
                                   void* stream) {
  RIME_RETURN_IF_ERROR(validate(mask, q_length, kv_length, out));
  const driver::Api* api = driver::api();
  if (!api) return driver::load_status();
  Result<CUfunction> fn = kernel_for(mask.device, mask.element_bytes);
  if (!fn.ok()) return fn.status();
  Result<CUcontext> ctx = driver::primary_context(mask.device);
  if (!ctx.ok()) return ctx.status();
  const driver::ScopedContext in_ctx(ctx.value());
  RIME_RETURN_IF_ERROR(in_ctx.status());
  PaddingMaskParams p{};
  p.mask = mask.data;
  p.row_stride = mask.row_stride;
  p.B = static_cast<int>(mask.batch);
  p.offset = static_cast<int>(mask.positions - kv_length);
  p.positions = static_cast<int>(kv_length);
  p.q_length = static_cast<int>(q_length);
  p.out = out;
  void* args[] = {&p};
  return driver::check(api->cuLaunchKernel(fn.value(), static_cast<unsigned>(mask.batch), 1, 1, 256, 1, 1, 0,
                                           static_cast<CUstream>(stream), args, nullptr),
                       "launch of the padding-mask kernel");
}

}  // namespace rime
