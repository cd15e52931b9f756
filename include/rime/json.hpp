// JSON graph files (schema: docs/graph-json.md). Never throws; a malformed document gets InvalidJson (syntax,
// types, unknown or missing fields, limits) or InvalidGraph (a well-formed graph that breaks a rule), each with
// the JSON pointer of the offending field in Status::location().
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "rime/graph.hpp"
#include "rime/status.hpp"

namespace rime {

// Limits that keep a hostile file from costing more than a graph could need.
inline constexpr std::size_t kMaxGraphJsonBytes = 4u << 20;  // a graph with every operand is ~3 KB
inline constexpr int kMaxGraphJsonDepth = 16;                // the schema nests 5 levels
inline constexpr std::size_t kMaxNameLength = 256;

// Parses and validates a graph.
Result<Graph> graph_from_json(std::string_view text);
// Parses only (no validate()); for tools that want to show an invalid graph.
Result<Graph> parse_graph_json(std::string_view text);
// Reads a file and parses it, then validates it unless run_validate is false. Files over kMaxGraphJsonBytes are
// refused before reading.
Result<Graph> load_graph_file(const std::string& path, bool run_validate = true);

// Canonical JSON (sorted keys; absent optionals omitted). graph_from_json(graph_to_json(g)) == g for any graph.
std::string graph_to_json(const Graph& graph, bool pretty = true);

// sha256 (hex) of the canonical JSON: the same graph gives the same hash whatever the key order of its file.
std::string graph_hash(const Graph& graph);

}  // namespace rime
