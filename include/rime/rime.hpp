// Umbrella header of the rime public API.
#pragma once

#include "rime/graph.hpp"
#include "rime/json.hpp"
#include "rime/status.hpp"
#include "rime/types.hpp"
#include "rime/version.hpp"
