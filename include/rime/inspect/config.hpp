// The decision (SPEC section 8) and what it implies. choose() decides (which row runs the graph, with which
// tile and split-KV count, and why); derive() computes everything that follows from a decision (the kernels a
// plan launches, their launch shapes, the workspace layout) through the chosen row's engine. A plan artifact
// stores the decision and re-derives the rest, so that no recorded size can disagree with the code that uses it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "rime/inspect/facts.hpp"
#include "rime/inspect/rows.hpp"
#include "rime/status.hpp"

namespace rime {

struct SplitCandidate {
  int split = 1;
  int64_t waves = 0;
  double cost = 0;
};

// What choose decided, with the reasons `rime plan --explain` prints.
struct Decision {
  std::string row_id;
  TileShape tile;
  // Consumer warpgroups of the attention kernel (the Hopper engine's 1, 2 or 3, each 64 of the tile's rows); 0 for
  // an engine without them. The row lists it with the tile (RowTile).
  int consumer_warpgroups = 0;
  int split_kv = 1;
  std::string tile_reason;
  std::string split_reason;
  std::vector<SplitCandidate> split_candidates;  // empty when split was not considered
  // Set when the decision is the one `rime tune` recorded (include/rime/tune.hpp): what was timed and by how much it
  // beat the heuristics' choice. Not part of a plan artifact.
  std::string tuned;
};

// One kernel specialization (SPEC section 9): an engine header and the template instance it provides, for one
// exact arch. NVRTC compiles the generated unit that includes `header` and instantiates `name_expression`.
struct KernelSpec {
  std::string engine;           // "sdpa_mma_fp8", "combine": names cache entries and log lines
  std::string header;           // "sdpa_mma/kernel.cuh", relative to engines/
  std::string name_expression;  // "rime_dev::sdpa_mma_fwd<2, 2, 128, 128, 64, 6>"
  std::string params_type;      // the kernel's by-value parameter: "SdpaParams", "__grid_constant__ SdpaSm90Params"
  std::string arch;             // "sm_90a": exact, never a family

  friend bool operator==(const KernelSpec& a, const KernelSpec& b) {
    return a.engine == b.engine && a.header == b.header && a.name_expression == b.name_expression &&
           a.params_type == b.params_type && a.arch == b.arch;
  }
  friend bool operator!=(const KernelSpec& a, const KernelSpec& b) { return !(a == b); }
};

// One launch of a plan, in launch order.
struct KernelStage {
  std::string role;  // "v_transpose", "attention", "combine"
  KernelSpec spec;
  std::array<int64_t, 3> grid{1, 1, 1};
  int64_t block = 0;       // threads per CTA
  int64_t smem_bytes = 0;  // dynamic shared memory per CTA
  // A persistent grid: when the plan is loaded on a GPU, grid x becomes as many CTAs as the GPU holds at once
  // (the driver's occupancy for this kernel, block and shared memory, times the SM count); grid here is the
  // planning estimate.
  bool persistent = false;
  friend bool operator==(const KernelStage& a, const KernelStage& b) {
    return a.role == b.role && a.spec == b.spec && a.grid == b.grid && a.block == b.block &&
           a.smem_bytes == b.smem_bytes && a.persistent == b.persistent;
  }
};

// A named byte range of the plan's workspace.
struct WorkspaceRegion {
  std::string name;  // "o_partial", "lse_partial", "vt"
  int64_t offset = 0, bytes = 0;
  friend bool operator==(const WorkspaceRegion& a, const WorkspaceRegion& b) {
    return a.name == b.name && a.offset == b.offset && a.bytes == b.bytes;
  }
};

// Everything a decision implies for these facts, computed by derive().
struct Derived {
  std::string engine;
  int64_t packed_rows = 0;  // S_q * group: the row tile packs the q heads of one kv head
  int64_t q_tiles = 0;      // row tiles per (b, h_kv)
  int64_t kv_tiles = 0;     // KV tiles per row tile, unsplit and unmasked
  int64_t threads = 0;      // threads per CTA of the attention kernel
  int64_t smem_bytes = 0;   // its dynamic shared memory per CTA
  std::vector<WorkspaceRegion> workspace;  // in address order, each 256-byte aligned
  int64_t workspace_bytes = 0;
  std::vector<KernelStage> stages;  // launch order
  // The region named `name`, or nullptr.
  const WorkspaceRegion* region(const std::string& name) const;
};

struct Config {
  Decision decision;
  Derived derived;
};

// Picks the configuration: the accepted rows in preference order, the first whose heuristics succeed (a row
// whose tile does not fit, say, passes to the next). NotSupported when none does, listing every row's reason.
Result<Config> choose(const Facts& facts, const std::vector<RowVerdict>& verdicts);

// Every configuration the rows accept for the facts, as choose() makes it with (tile, split) pinned, one per distinct
// (row, tile, consumer warpgroups, split): for each accepted attention row and each tile it lists for the head dims,
// splits 1, 2, 4, ... up to the first that puts two waves of attention CTAs on the device (a split exists to fill
// the GPU; past two waves it adds the combine's work and a tail) and never past the KV tiles. What `rime tune` and
// the heuristics' oracle (tools/bench/oracle.cpp) time. Empty when no row serves the facts.
std::vector<Config> tuning_candidates(const Facts& facts);

// Everything a decision implies. NotSupported when the recorded row declines the facts, when a knob is outside
// the row's domain or contradicts a pin, or when the engine's launch limits are exceeded (each message names the
// row, the field and both values). choose(), Plan::build and Plan::load all derive through this one function.
Result<Derived> derive(const Facts& facts, const Decision& decision);

}  // namespace rime
