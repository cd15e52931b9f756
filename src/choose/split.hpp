// Internal: whether a split plan is possible for a row, shared by choose() and derive().
#pragma once

#include <string>

#include "rime/inspect/facts.hpp"
#include "rime/inspect/rows.hpp"

namespace rime {

// Empty when a plan of this row may split KV for these facts; else why not: the facts (Amax_S), the row's wiring
// for these head dims, or the combine row declining the graph's outputs.
std::string split_unavailable(const Facts& facts, const CapabilityRow& row);

}  // namespace rime
