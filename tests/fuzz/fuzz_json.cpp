// libFuzzer target over the JSON entry point: any byte string must come back as a graph or a Status, never a
// crash, a sanitizer report, an abort or an escaped exception. A parsed graph must also round-trip.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "rime/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  rime::Result<rime::Graph> parsed = rime::parse_graph_json(text);
  if (!parsed.ok()) return 0;
  (void)rime::validate(parsed.value());
  const std::string canonical = rime::graph_to_json(parsed.value());
  rime::Result<rime::Graph> again = rime::parse_graph_json(canonical);
  // The writer's output must always read back as the same graph.
  if (!again.ok() || !(again.value() == parsed.value())) std::abort();
  (void)rime::graph_hash(parsed.value());
  return 0;
}
