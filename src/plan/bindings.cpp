#include "plan/bindings.hpp"

#include <fmt/format.h>

namespace rime {

Status check_bindings(const Facts& f, const std::unordered_map<int64_t, void*>& buffers, const void* workspace,
                      int64_t workspace_bytes) {
  auto bad = [](std::string message) { return Status(StatusCode::InvalidArgument, std::move(message)); };
  if (workspace_bytes > 0 && !workspace) return bad(fmt::format("the plan needs a workspace of {} bytes", workspace_bytes));
  // The workspace's regions (fp32 split partials, the ring's K/V chunks) are accessed with vector loads and stores:
  // a 16-byte aligned base keeps every one of them aligned.
  if (workspace_bytes > 0 && reinterpret_cast<uintptr_t>(workspace) % 16 != 0)
    return bad("the workspace is not 16-byte aligned");
  for (int r = 0; r < kRoleCount; ++r) {
    const TensorFacts& t = f.tensors[static_cast<size_t>(r)];
    if (!t.bound) continue;
    auto it = buffers.find(t.uid);
    if (it == buffers.end() || !it->second) return bad(fmt::format("no buffer bound for {} (uid {})", t.name, t.uid));
    // sf_o is 16-byte aligned whatever its shape (SPEC section 5): the F8_128x4 atoms are stored 16 bytes at once.
    const bool vector = (t.dims.size() == 4 && t.dims[3] > 1) || static_cast<Role>(r) == Role::SfO;
    const uintptr_t align = vector ? 16 : 4;
    if (reinterpret_cast<uintptr_t>(it->second) % align != 0)
      return bad(fmt::format("buffer for {} (uid {}) is not {}-byte aligned", t.name, t.uid, align));
  }
  auto range = [&](const TensorFacts& t) {
    const uintptr_t lo = reinterpret_cast<uintptr_t>(buffers.find(t.uid)->second);
    return std::pair<uintptr_t, uintptr_t>{lo, lo + static_cast<uintptr_t>(t.storage_bytes)};
  };
  for (int r = 0; r < kRoleCount; ++r) {
    const TensorFacts& out = f.tensors[static_cast<size_t>(r)];
    if (!out.bound || !is_output_role(static_cast<Role>(r))) continue;
    const auto [olo, ohi] = range(out);
    for (int q = 0; q < kRoleCount; ++q) {
      const TensorFacts& other = f.tensors[static_cast<size_t>(q)];
      if (q == r || !other.bound) continue;
      const auto [lo, hi] = range(other);
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
      const auto [lo, hi] = range(t);
      if (lo < whi && wlo < hi)
        return bad(fmt::format("the buffer of {} {} (uid {}) overlaps the workspace",
                               is_output_role(static_cast<Role>(r)) ? "output" : "input", t.name, t.uid));
    }
  }
  return Status::success();
}

}  // namespace rime
