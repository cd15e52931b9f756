// Internal: the checks execute() makes on the caller's buffers before launching anything. Pure (no device
// access, no allocation), so they are tested on the CPU.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "engine.hpp"
#include "rime/inspect/facts.hpp"
#include "rime/plan.hpp"
#include "rime/status.hpp"

namespace rime {

// Every operand bound to a non-null buffer; 16-byte alignment for [.., D] tensors (cp.async, TMA and vector
// stores), 4 for the rest; no output overlapping any other operand or the workspace (an output written over an
// input races with the kernel reading it; SPEC section 5 asks it of sf_o in particular). InvalidArgument
// otherwise.
// `kv`: this execute's K/V extent (ExecuteOptions::kv_extent, already checked by check_kv_extent), whose spans K and
// V then are.
Status check_bindings(const Facts& facts, const engines::RoleBuffers& buffers, const void* workspace,
                      int64_t workspace_bytes, const KvExtent* kv = nullptr);
// The same over a uid map, the public API's form (tests; execute resolves the map once and calls the one above).
inline Status check_bindings(const Facts& facts, const std::unordered_map<int64_t, void*>& buffers,
                             const void* workspace, int64_t workspace_bytes, const KvExtent* kv = nullptr) {
  return check_bindings(facts, engines::role_buffers(facts, buffers), workspace, workspace_bytes, kv);
}

// An execute's K/V extent against the plan's facts: dense K and V (not paged, ragged or context-parallel), a length
// in [1, S_kv], D's stride 1, the other strides non-negative and, where the graph's K and V were 16-byte aligned, so
// too. InvalidArgument naming the field otherwise.
Status check_kv_extent(const Facts& facts, const KvExtent& kv);

}  // namespace rime
