// Internal: the JSON summary of Facts and Config shared by plan artifacts and `rime plan --json`.
#pragma once

#include <nlohmann/json.hpp>

#include "rime/config.hpp"
#include "rime/facts.hpp"

namespace rime {

nlohmann::json facts_to_json(const Facts& f);
nlohmann::json config_to_json(const Config& c);
// Reads what config_to_json wrote (the candidates are kept as recorded). Throws nlohmann exceptions on bad input;
// the caller catches.
Config config_from_json(const nlohmann::json& j);

}  // namespace rime
