// The one table from a row's `engine` to the object that implements it. Adding an engine: its folder, one line
// here (and the declaration of its object), and its rows (docs/engines.md).
#include "engine.hpp"

namespace rime::engines {

// Each engine's object, defined in its folder's engine.cpp.
const Engine& sdpa_mma_engine();
const Engine& sdpa_sm90_engine();

const Engine* find_engine(std::string_view name) {
  static const std::pair<std::string_view, const Engine*> kEngines[] = {
      {"sdpa_mma", &sdpa_mma_engine()},
      {"sdpa_sm90", &sdpa_sm90_engine()},
  };
  for (const auto& [n, engine] : kEngines)
    if (n == name) return engine;
  return nullptr;
}

}  // namespace rime::engines
