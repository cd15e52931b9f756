// Host side of the sdpa_f16_sm80 / sdpa_fp8_sm89 engines and of the split-KV combine: which specialization a
// configuration needs, and how its parameter block is filled.
#pragma once

#include <cuda.h>

#include <string>
#include <unordered_map>

#include "common/params.h"
#include "jit/kernel_spec.hpp"
#include "rime/config.hpp"
#include "rime/facts.hpp"
#include "rime/graph.hpp"

namespace rime::engines {

// The O type argument of the attention kernels: the dtype, or the block-scaled format sf_o makes of it.
int sdpa_o_type_code(const Facts& facts);
// The RIME_F_* feature bits of the attention kernels for these facts (with or without split).
int sdpa_features(const Facts& facts, bool split);

// The specialization of the attention kernel for (facts, config) on `arch`.
KernelSpec sdpa_mma_spec(const Facts& facts, const Config& config, const std::string& arch);
// The combine specialization for a split plan.
KernelSpec combine_spec(const Facts& facts, const std::string& arch);

struct Launch {
  unsigned grid[3];
  unsigned block;
  unsigned smem;
};
Launch sdpa_mma_launch(const Facts& facts, const Config& config);
Launch combine_launch(const Facts& facts);

// Fills the parameter blocks from the graph's strides and the bound buffers. `workspace` holds the split
// partials (partial O first, then LSE, each 256-byte aligned).
SdpaParams sdpa_mma_params(const Graph& graph, const Facts& facts, const Config& config,
                           const std::unordered_map<int64_t, void*>& buffers, void* workspace);
CombineParams combine_params(const Graph& graph, const Facts& facts, const Config& config,
                             const std::unordered_map<int64_t, void*>& buffers, void* workspace);

}  // namespace rime::engines
