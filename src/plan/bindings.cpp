#include "plan/bindings.hpp"

#include <fmt/format.h>

#include "graph/geometry.hpp"

namespace rime {

Status check_bindings(const Graph& g, const std::unordered_map<int64_t, void*>& buffers, const void* workspace,
                      int64_t workspace_bytes) {
  const SdpaOp& op = *g.op();
  if (workspace_bytes > 0 && !workspace)
    return Status(StatusCode::InvalidGraph, fmt::format("the plan needs a workspace of {} bytes", workspace_bytes));
  // The workspace holds fp32 partials (8-byte stores) and the wgmma engine's V^T (16-byte stores).
  if (workspace_bytes > 0 && reinterpret_cast<uintptr_t>(workspace) % 16 != 0)
    return Status(StatusCode::InvalidGraph, "the workspace is not 16-byte aligned");
  for (int r = 0; r < kRoleCount; ++r) {
    if (!op.operands[r]) continue;
    const TensorDesc& t = *g.find_tensor(*op.operands[r]);
    auto it = buffers.find(t.uid);
    if (it == buffers.end() || !it->second)
      return Status(StatusCode::InvalidGraph, fmt::format("no buffer bound for {} (uid {})", t.name, t.uid));
    // sf_o is 16-byte aligned whatever its shape (SPEC section 5): the F8_128x4 atoms are stored 16 bytes at once.
    const bool vector = (t.dims.size() == 4 && t.dims[3] > 1) || static_cast<Role>(r) == Role::SfO;
    const uintptr_t align = vector ? 16 : 4;
    if (reinterpret_cast<uintptr_t>(it->second) % align != 0)
      return Status(StatusCode::InvalidGraph,
                    fmt::format("buffer for {} (uid {}) is not {}-byte aligned", t.name, t.uid, align));
  }
  auto range = [&](const TensorDesc& t) {
    const uintptr_t lo = reinterpret_cast<uintptr_t>(buffers.find(t.uid)->second);
    return std::pair<uintptr_t, uintptr_t>{lo, lo + static_cast<uintptr_t>(tensor_storage_bytes(t))};
  };
  for (int r = 0; r < kRoleCount; ++r) {
    if (!op.operands[r] || !is_output_role(static_cast<Role>(r))) continue;
    const TensorDesc& out = *g.find_tensor(*op.operands[r]);
    const auto [olo, ohi] = range(out);
    for (int q = 0; q < kRoleCount; ++q) {
      if (q == r || !op.operands[q]) continue;
      const TensorDesc& other = *g.find_tensor(*op.operands[q]);
      const auto [lo, hi] = range(other);
      if (olo < hi && lo < ohi)
        return Status(StatusCode::InvalidGraph,
                      fmt::format("the buffer of output {} (uid {}) overlaps the buffer of {} (uid {})", out.name,
                                  out.uid, other.name, other.uid));
    }
  }
  // The kernels write the workspace (split partials, V^T) while they read the inputs and write the outputs.
  if (workspace_bytes > 0) {
    const uintptr_t wlo = reinterpret_cast<uintptr_t>(workspace), whi = wlo + static_cast<uintptr_t>(workspace_bytes);
    for (int r = 0; r < kRoleCount; ++r) {
      if (!op.operands[r]) continue;
      const TensorDesc& t = *g.find_tensor(*op.operands[r]);
      const auto [lo, hi] = range(t);
      if (lo < whi && wlo < hi)
        return Status(StatusCode::InvalidGraph, fmt::format("the buffer of {} {} (uid {}) overlaps the workspace",
                                                            is_output_role(static_cast<Role>(r)) ? "output" : "input",
                                                            t.name, t.uid));
    }
  }
  return Status::success();
}

}  // namespace rime
