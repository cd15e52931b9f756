// Host side of the split-KV combine (engines/combine/kernel.cuh), the second stage of every split plan: the
// attention engines append it through these functions.
#pragma once

#include "common/params.h"
#include "engine.hpp"

namespace rime::engines {

// The combine launch of a split plan (one CTA per output row), with its grid checked against CUDA's limits.
Result<KernelStage> combine_stage(const Facts& facts, const CapabilityRow& row, const std::string& arch);

// Its parameter block: the partials of the workspace and the outputs.
CombineParams combine_params(const Facts& facts, const Config& config, const Bindings& bindings);

}  // namespace rime::engines
