// The checked-indices mode: engines/common/index_check.cuh on the device, the verdict read back here.
#include "plan/index_check.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "cache/get_kernel.hpp"
#include "common/sdpa_params.hpp"
#include "engine.hpp"
#include "runtime/module.hpp"
#include "status_macros.hpp"

namespace rime {
namespace {

Status load_checker(IndexChecker& c, const Facts& f, CUcontext ctx) {
  std::call_once(c.once, [&] {
    KernelSpec spec{"index_check", "common/index_check.cuh",
                    fmt::format("rime_dev::check_indices<{}>", f.paged ? 1 : 0), "IndexCheckParams",
                    f.device.arch_name()};
    Result<KernelLookup> k = get_kernel(spec);
    if (!k.ok()) {
      c.load_status = k.status();
      return;
    }
    Result<CUfunction> fn = runtime::load_function(*k->kernel, 0, ctx);
    if (!fn.ok()) {
      c.load_status = fn.status();
      return;
    }
    c.function = fn.value();
    c.load_status = Status::success();
  });
  return c.load_status;
}

// Reads one int32 of device memory (the bad entry's value, for the message).
int32_t read_int(const driver::Api* api, const void* base, int64_t index) {
  int32_t v = 0;
  if (api->cuMemcpyDtoH(&v, reinterpret_cast<CUdeviceptr>(static_cast<const int32_t*>(base) + index), 4) != CUDA_SUCCESS)
    return INT32_MIN;
  return v;
}

}  // namespace

Status check_indices(IndexChecker& checker, const Facts& f, const engines::RoleBuffers& buffers,
                     CUstream stream, CUcontext ctx, int64_t kv_length) {
  // Nothing to check without per-sequence lengths (paged K/V require them: validation).
  if (!f.mask.padding) return Status::success();
  RIME_RETURN_IF_ERROR(load_checker(checker, f, ctx));
  const driver::Api* api = driver::api();
  const engines::Bindings bindings{buffers};
  IndexCheckParams p{};
  p.seq_len_q = static_cast<const int*>(bindings.of(Role::SeqLenQ));
  p.seq_len_kv = static_cast<const int*>(bindings.of(Role::SeqLenKv));
  p.cu_seqlens_q = static_cast<const int*>(bindings.of(Role::CuSeqlensQ));
  p.cu_seqlens_kv = static_cast<const int*>(bindings.of(Role::CuSeqlensKv));
  p.page_table = static_cast<const int*>(bindings.of(Role::PageTable));
  p.seq_start_q = static_cast<const int*>(bindings.of(Role::SeqStartQ));
  p.seq_start_kv = static_cast<const int*>(bindings.of(Role::SeqStartKv));
  p.B = static_cast<int>(f.B);
  p.S_q = static_cast<int>(f.S_q);
  p.S_kv = static_cast<int>(kv_length);
  p.T_q = static_cast<int>(f.T_q);
  p.T_kv = static_cast<int>(f.T_kv);
  if (f.paged) {
    p.page_table_stride = f.operand(Role::PageTable).strides[0];
    p.page_size_log2 = engines::page_size_log2(f.page_size);
    p.num_pages = static_cast<int>(f.num_pages);
  }
  CUdeviceptr word = 0;
  RIME_RETURN_IF_ERROR(driver::check(api->cuMemAlloc(&word, sizeof(unsigned long long)), "cuMemAlloc(checked indices)"));
  p.first_bad = reinterpret_cast<unsigned long long*>(word);
  void* args[] = {&p};
  uint64_t first = 0;
  Status s = driver::check(api->cuMemsetD32Async(word, 0xffffffffu, 2, stream), "cuMemsetD32Async(checked indices)");
  if (s.ok())
    s = driver::check(api->cuLaunchKernel(checker.function, static_cast<unsigned>(f.B), 1, 1, 256, 1, 1, 0, stream, args,
                                          nullptr),
                      "launch of the checked-indices kernel");
  if (s.ok()) s = driver::check(api->cuStreamSynchronize(stream), "cuStreamSynchronize(checked indices)");
  if (s.ok()) s = driver::check(api->cuMemcpyDtoH(&first, word, sizeof(first)), "cuMemcpyDtoH(checked indices)");
  api->cuMemFree(word);
  RIME_RETURN_IF_ERROR(s);
  if (first == ~uint64_t{0}) return Status::success();
  const int64_t b = static_cast<int64_t>(first >> 32), entry = static_cast<int64_t>(first & 0xffffffffu) - 1;
  // Sequence b's length on one side, as the message states it: the offsets' pair of a ragged side.
  auto side = [&](const int* cu, const int* lens, const int* starts, const char* q_or_kv, int64_t S, int64_t T,
                  const char* max_name) {
    if (cu) {
      const int32_t begin = read_int(api, cu, b), end = read_int(api, cu, b + 1);
      return fmt::format("cu_seqlens_{0}[{1}] = {2}, cu_seqlens_{0}[{3}] = {4} (must hold 0 <= cu_seqlens_{0}[{1}] <= "
                         "cu_seqlens_{0}[{3}] <= T_{0} = {5} and a length of at most {6} = {7})",
                         q_or_kv, b, begin, b + 1, end, T, max_name, S);
    }
    if (starts)
      return fmt::format("seq_start_{0}[{1}] = {2}, seq_len_{0}[{1}] = {3} (must hold 0 <= start, 0 <= length and "
                         "start + length <= S_{0} = {4})",
                         q_or_kv, b, read_int(api, starts, b), read_int(api, lens, b), S);
    return fmt::format("seq_len_{0}[{1}] = {2} (must be in [0, S_{0} = {3}])", q_or_kv, b, read_int(api, lens, b), S);
  };
  if (entry < 0)
    return Status(StatusCode::InvalidArgument,
                  fmt::format("checked indices: sequence {}: {}, {}", b,
                              side(p.cu_seqlens_q, p.seq_len_q, p.seq_start_q, "q", f.S_q, f.T_q, "max_seqlen_q"),
                              side(p.cu_seqlens_kv, p.seq_len_kv, p.seq_start_kv, "kv", kv_length, f.T_kv,
                                   "max_seqlen_kv")));
  const int32_t id = read_int(api, p.page_table, b * p.page_table_stride + entry);
  const int32_t len_kv = read_int(api, p.seq_len_kv, b);
  return Status(StatusCode::InvalidArgument,
                fmt::format("checked indices: page_table[{}][{}] = {} is outside the pool [0, num_pages = {}) "
                            "(sequence {} holds {} keys: its pages 0..{} are read)",
                            b, entry, id, f.num_pages, b, len_kv, (len_kv + f.page_size - 1) / f.page_size - 1));
}

}  // namespace rime
