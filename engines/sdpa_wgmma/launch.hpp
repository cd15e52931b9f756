// Host side of the sdpa_fp8_sm90 engine (engines/sdpa_wgmma/kernel.cuh): its two kernels, the V^T pre-pass and
// the wgmma attention kernel, and where V^T lives in the workspace.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "common/params.h"
#include "jit/kernel_spec.hpp"
#include "rime/config.hpp"
#include "rime/facts.hpp"
#include "rime/graph.hpp"
#include "sdpa_mma/launch.hpp"

namespace rime::engines {

KernelSpec sdpa_wgmma_spec(const Facts& facts, const Config& config, const std::string& arch);
KernelSpec vt_prepass_spec(const Facts& facts, const std::string& arch);

Launch sdpa_wgmma_launch(const Facts& facts, const Config& config);
Launch vt_prepass_launch(const Facts& facts);

// SdpaParams of both kernels: those of the mma engine plus V^T, which follows the split partials (if any) in
// the workspace.
SdpaParams sdpa_wgmma_params(const Graph& graph, const Facts& facts, const Config& config,
                             const std::unordered_map<int64_t, void*>& buffers, void* workspace);

}  // namespace rime::engines
