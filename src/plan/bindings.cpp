#include "plan/bindings.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <string>
#include <tuple>

namespace rime {

Status check_kv_extent(const Facts& f, const KvExtent& kv) {
  auto bad = [](std::string message) { return Status(StatusCode::InvalidArgument, "kv_extent: " + std::move(message)); };
  if (f.paged) return bad("K and V are paged: their keys are placed by the page table and seq_len_kv");
  if (f.ragged_kv) return bad("K and V are ragged: their keys are placed by cu_seqlens_kv");
  if (f.context_parallel.world > 0) return bad("a context-parallel plan's K and V are its shard, of the graph's extent");
  if (kv.length < 1 || kv.length > f.S_kv)
    return bad(fmt::format("length {} is outside [1, S_kv = {}] (the graph's S_kv is the capacity)", kv.length, f.S_kv));
  for (const auto& [name, t, strides] : {std::tuple{"K", &f.k(), &kv.k_strides}, std::tuple{"V", &f.v(), &kv.v_strides}}) {
    if ((*strides)[3] != 1)
      return bad(fmt::format("{}'s D stride is {}; it must be 1", name, (*strides)[3]));
    const int64_t bytes = bits_of(t->dtype) / 8;
    for (size_t i = 0; i < 3; ++i) {
      if ((*strides)[i] < 0) return bad(fmt::format("{}'s strides [{}] hold a negative one", name, fmt::join(*strides, ", ")));
      const int64_t extent = i == 2 ? kv.length : t->dims[i];
      if (t->aligned16 && extent > 1 && (*strides)[i] * bytes % 16 != 0)
        return bad(fmt::format("{}'s strides [{}] are not multiples of 16 bytes, which the plan's {} were",
                               name, fmt::join(*strides, ", "), name));
    }
  }
  return Status::success();
}

Status check_bindings(const Facts& f, const engines::RoleBuffers& buffers, const void* workspace,
                      int64_t workspace_bytes, const KvExtent* kv) {
  auto bad = [](std::string message) { return Status(StatusCode::InvalidArgument, std::move(message)); };
  if (workspace_bytes > 0 && !workspace) return bad(fmt::format("the plan needs a workspace of {} bytes", workspace_bytes));
  // The workspace's regions (fp32 split partials, the ring's K/V chunks) are accessed with vector loads and stores:
  // a 16-byte aligned base keeps every one of them aligned.
  if (workspace_bytes > 0 && reinterpret_cast<uintptr_t>(workspace) % 16 != 0)
    return bad("the workspace is not 16-byte aligned");
  for (int r = 0; r < kRoleCount; ++r) {
    const TensorFacts& t = f.tensors[static_cast<size_t>(r)];
    if (!t.bound) continue;
    void* p = buffers[static_cast<size_t>(r)];
    if (!p) return bad(fmt::format("no buffer bound for {} (uid {})", t.name, t.uid));
    // sf_o is 16-byte aligned whatever its shape (SPEC section 5): the F8_128x4 atoms are stored 16 bytes at once.
    const bool vector = (t.dims.size() == 4 && t.dims[3] > 1) || static_cast<Role>(r) == Role::SfO;
    const uintptr_t align = vector ? 16 : 4;
    if (reinterpret_cast<uintptr_t>(p) % align != 0)
      return bad(fmt::format("buffer for {} (uid {}) is not {}-byte aligned", t.name, t.uid, align));
  }
  auto range = [&](int r) {  // the bytes role r's buffer spans
    const TensorFacts& t = f.tensors[static_cast<size_t>(r)];
    const uintptr_t lo = reinterpret_cast<uintptr_t>(buffers[static_cast<size_t>(r)]);
    int64_t bytes = t.storage_bytes;
    if (kv && (&t == &f.k() || &t == &f.v())) {  // the span of this execute's K or V: its length, its strides
      const std::array<int64_t, 4>& s = &t == &f.k() ? kv->k_strides : kv->v_strides;
      const int64_t extent[4] = {t.dims[0], t.dims[1], kv->length, t.dims[3]};
      int64_t last = 0;
      for (size_t i = 0; i < 4; ++i) last += (extent[i] - 1) * s[i];
      bytes = (last + 1) * bits_of(t.dtype) / 8;
    }
    return std::pair<uintptr_t, uintptr_t>{lo, lo + static_cast<uintptr_t>(bytes)};
  };
  for (int r = 0; r < kRoleCount; ++r) {
    const TensorFacts& out = f.tensors[static_cast<size_t>(r)];
    if (!out.bound || !is_output_role(static_cast<Role>(r))) continue;
    const auto [olo, ohi] = range(r);
    for (int q = 0; q < kRoleCount; ++q) {
      const TensorFacts& other = f.tensors[static_cast<size_t>(q)];
      if (q == r || !other.bound) continue;
      const auto [lo, hi] = range(q);
      if (olo < hi && lo < ohi)
        return bad(fmt::format("the buffer of output {} (uid {}) overlaps the buffer of {} (uid {})", out.name,
                               out.uid, other.name, other.uid));
    }
  }
  // The kernels write the workspace (split partials, V^T) while they read the inputs and write the outputs.
  if (workspace_bytes > 0) {
    const uintptr_t wlo = reinterpret_cast<uintptr_t>(workspace), whi = wlo + static_cast<uintptr_t>(workspace_bytes);
    for (int r = 0; r < kRoleCount; ++r) {
      const TensorFacts& t = f.tensors[static_cast<size_t>(r)];
      if (!t.bound) continue;
      const auto [lo, hi] = range(r);
      if (lo < whi && wlo < hi)
        return bad(fmt::format("the buffer of {} {} (uid {}) overlaps the workspace",
                               is_output_role(static_cast<Role>(r)) ? "output" : "input", t.name, t.uid));
    }
  }
  return Status::success();
}

}  // namespace rime
