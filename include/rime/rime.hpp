// Umbrella header of the rime public API: every public header.
#pragma once

#include "rime/config.hpp"
#include "rime/device.hpp"
#include "rime/facts.hpp"
#include "rime/graph.hpp"
#include "rime/json.hpp"
#include "rime/plan.hpp"
#include "rime/rows.hpp"
#include "rime/status.hpp"
#include "rime/types.hpp"
#include "rime/version.hpp"
