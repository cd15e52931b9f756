// Umbrella header of the rime public API: what a user builds, plans and runs with. The analyzer's facts, the
// decision and the capability rows are under rime/inspect/ (installed too, for tools that print them).
#pragma once

#include "rime/cache.hpp"
#include "rime/communicator.hpp"
#include "rime/device.hpp"
#include "rime/gpu.hpp"
#include "rime/graph.hpp"
#include "rime/json.hpp"
#include "rime/padding_mask.hpp"
#include "rime/plan.hpp"
#include "rime/ring.hpp"
#include "rime/tune.hpp"
#include "rime/status.hpp"
#include "rime/types.hpp"
#include "rime/version.hpp"
