// Internal: the JSON forms of Facts, Decision and Derived, shared by plan artifacts and `rime plan --json`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "rime/inspect/config.hpp"
#include "rime/inspect/facts.hpp"

namespace rime {

nlohmann::json facts_to_json(const Facts& f);
nlohmann::json decision_to_json(const Decision& d);
nlohmann::json derived_to_json(const Derived& d);
// Reads what decision_to_json wrote, every field type-checked (InvalidJson naming the pointer otherwise). Never
// throws.
Result<Decision> decision_from_json(const nlohmann::json& j, const std::string& pointer);

}  // namespace rime
