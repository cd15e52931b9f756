// The engine interface (STYLE lesson 13). An engine is one folder of engines/: its kernel headers (compiled by
// NVRTC), a layout header that the kernel and this host side both read, and one object implementing Engine.
// A row names its engine; find_engine() (engines/registry.cpp) maps the name to the object, and choose(),
// derive() and the plan talk to engines only through this interface. docs/engines.md says how to add one.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "rime/inspect/config.hpp"
#include "rime/inspect/facts.hpp"
#include "rime/inspect/rows.hpp"
#include "rime/status.hpp"

namespace rime::engines {

// The tile an engine picks for a graph (one of the row's, with its consumer warpgroups), and why.
struct TileChoice {
  RowTile tile;
  std::string reason;
};

// The attention launch of one tile: what the split-KV heuristic and derive() build on.
struct TileGeometry {
  int64_t packed_rows = 0;  // S_q * group
  int64_t q_tiles = 0;      // row tiles per (b, h_kv)
  int64_t kv_tiles = 0;     // KV tiles a row tile walks, unsplit and unmasked
  int64_t threads = 0;      // per CTA
  int64_t smem_bytes = 0;   // dynamic shared memory per CTA
  // CTAs one SM holds at once where the engine's launch bounds say (its kernels' registers per thread); 0: the
  // heuristics derive it from threads and shared memory, assuming the 255-register worst case.
  int ctas_per_sm = 0;
  // CTAs per SM that the split-KV model counts in one wave, where fewer than ctas_per_sm add throughput;
  // 0: ctas_per_sm.
  int split_ctas_per_sm = 0;
};

// The caller's buffer of each role for one execute, nullptr where the graph leaves the role empty (or the caller
// bound none: check_bindings refuses that before a launch). The uid map of the public API is resolved into it once
// per execute, so that a pass of the prefill ring moves a few roles in a copy on the stack, not in a copy of the map.
using RoleBuffers = std::array<void*, kRoleCount>;

inline RoleBuffers role_buffers(const Facts& facts, const std::unordered_map<int64_t, void*>& by_uid) {
  RoleBuffers out{};
  for (size_t r = 0; r < out.size(); ++r) {
    const TensorFacts& t = facts.tensors[r];
    if (!t.bound) continue;
    auto it = by_uid.find(t.uid);
    if (it != by_uid.end()) out[r] = it->second;
  }
  return out;
}

// The caller's device memory for one execute: the buffer of each role (check_bindings has verified them) and the
// workspace.
struct Bindings {
  const RoleBuffers& buffers;
  void* workspace = nullptr;
  // This execute's K/V extent (ExecuteOptions::kv_extent, checked by the plan), or nullptr: the graph's.
  const KvExtent* kv = nullptr;
  // The buffer bound to a role, or nullptr when the graph leaves the role empty.
  void* of(Role role) const { return buffers[static_cast<size_t>(role)]; }
  // The workspace region `name` of the plan, or nullptr when it has none.
  void* region(const Derived& derived, const std::string& name) const {
    const WorkspaceRegion* r = derived.region(name);
    return r ? static_cast<char*>(workspace) + r->offset : nullptr;
  }
};

// The parameter block of each stage of one execute, in launch order: storage the plan owns, so that execute
// allocates nothing. 128-byte alignment covers a CUtensorMap inside a block.
inline constexpr int kMaxStages = 4;
inline constexpr size_t kMaxParamBytes = 2048;
struct alignas(128) ParamBlock {
  unsigned char bytes[kMaxParamBytes];
};
using StageParams = std::array<ParamBlock, kMaxStages>;

class Engine {
 public:
  virtual ~Engine() = default;

  // The tile for these facts among the row's tiles for the graph's head dims (a pinned tile is the only
  // candidate), with the reason. NotSupported naming the row when none fits the device.
  virtual Result<TileChoice> choose_tile(const Facts& facts, const CapabilityRow& row) const = 0;

  // The attention launch of one of the row's tiles.
  virtual TileGeometry geometry(const Facts& facts, const RowTile& tile) const = 0;

  // The stages of a plan for a decision (kernel specializations and launch shapes, launch order), the
  // workspace layout, and the engine's launch limits checked: NotSupported naming the row, the field and both
  // values. The row has accepted the facts and the decision's knobs are in its domain (derive() checks both
  // before it calls this).
  virtual Result<Derived> derive(const Facts& facts, const CapabilityRow& row, const Decision& decision) const = 0;

  // Writes every stage's parameter block for one execute. Called on the execute path: no allocation, no
  // synchronisation, no device work (host-side encodes such as tensor maps are fine).
  virtual Status fill_params(const Facts& facts, const Config& config, const Bindings& bindings,
                             StageParams& out) const = 0;
};

// The engine a row names, or nullptr.
const Engine* find_engine(std::string_view name);

// Launch limits every engine checks in derive() (CUDA's grid limits): NotSupported naming the row, the stage,
// the field, how it is formed and both values. `formula` reads like "B x split_kv = 600 x 128".
Status check_grid_dim(const CapabilityRow& row, const std::string& stage, char axis, int64_t value,
                      const std::string& formula);
// A value a kernel holds in 32 bits: NotSupported past INT32_MAX.
Status check_int32(const CapabilityRow& row, const char* field, int64_t value);

}  // namespace rime::engines
