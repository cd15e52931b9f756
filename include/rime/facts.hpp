// Analyzer facts (SPEC section 7): one flat, immutable value per graph, computed once. Rows, heuristics and
// engines read only Facts, never the graph.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "rime/graph.hpp"
#include "rime/status.hpp"
#include "rime/types.hpp"

namespace rime {

// The GPU a plan is made for. Given, not queried, so Facts and plans can be made on a machine without a GPU.
struct DeviceDesc {
  int arch = 90;                     // compute capability x 10 (sm_90 -> 90)
  bool arch_specific = true;         // the "a" targets (sm_90a) that enable wgmma/setmaxnreg
  int sm_count = 132;                // H200 SXM
  int smem_per_block = 227 * 1024;   // opt-in dynamic shared memory per block (H100/H200)
  int smem_per_sm = 228 * 1024;      // shared memory per SM (H100/H200)
  std::string name = "NVIDIA H200";  // documentation only

  // The documented default: an H200 (sm_90a, 132 SMs).
  static DeviceDesc h200() { return DeviceDesc{}; }
  // "sm_90a", "sm_89", ...
  std::string arch_name() const;
  // Parses "sm_90a", "sm_89", "90". Fills arch and arch_specific; keeps the rest.
  static Result<DeviceDesc> from_arch(std::string_view arch, int sm_count);
};

// Physical layout of a rank-4 [B, H, S, D] tensor.
enum class Layout : int {
  Bhsd,        // packed, B H S D
  Bshd,        // packed, B S H D (token-major)
  DenseOther,  // packed in another dim order, unit stride on D
  Strided,     // unit stride on D, gaps elsewhere (e.g. Q/K/V sliced from a fused projection)
};
std::string_view to_string(Layout layout) noexcept;

// The two sf_o stride sets of SPEC section 5.
enum class SfLayout : int { Planes, TokenMajor };
std::string_view to_string(SfLayout layout) noexcept;

struct MaskFacts {
  bool causal = false;
  bool bottom_right = false;           // diagonal shifted by S_kv - S_q
  std::optional<int64_t> window_left;  // sliding window
  std::optional<int64_t> band_right;   // diagonal band right bound (causal is band_right 0)
  bool padding = false;                // per-batch seq lens
  bool any() const { return causal || window_left || band_right || padding; }
  // "none", or the features joined by '+': "causal+window+padding (bottom-right)"
  std::string describe() const;
};

struct TensorFacts {
  DataType dtype = DataType::FP32;
  Layout layout = Layout::Bhsd;
  bool aligned16 = true;  // every non-unit stride is a multiple of 16 bytes (vector loads possible)
};

struct Facts {
  OpKind op = OpKind::Sdpa;
  int64_t B = 0, H_q = 0, H_kv = 0, group = 0, S_q = 0, S_kv = 0, D_qk = 0, D_v = 0;
  TensorFacts q, k, v, o;
  bool is_fp8 = false;    // sdpa_fp8
  bool is_mxfp8 = false;  // sdpa_mxfp8
  MaskFacts mask;
  bool has_sink = false;
  bool wants_stats = false;
  bool stats_log2 = false;
  bool wants_amax_s = false;
  bool wants_amax_o = false;
  int o_block_scale = 0;                // 0, 16 (NVFP4) or 32 (MXFP8)
  std::optional<SfLayout> sf_o_layout;  // when o_block_scale != 0
  int64_t sf_o_rows = 0, sf_o_cols = 0;  // R and C of sf_o
  bool has_scale_o = false;
  bool decode = false;  // S_q == 1
  bool split_eligible = false;
  std::string split_ineligible_reason;  // empty when eligible
  float attn_scale = 1.0f;
  std::optional<int> pinned_split;
  std::optional<TileShape> pinned_tile;
  DeviceDesc device;

  // The O format rows compare against: the O dtype, or "NVFP4" / "MXFP8" for block-scaled O.
  std::string o_format() const;
};

// Derives the facts of a graph for a device. Validates the graph first (InvalidGraph on failure).
Result<Facts> analyze(const Graph& graph, const DeviceDesc& device);

}  // namespace rime
