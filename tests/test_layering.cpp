// The stages are layered: a source file may include headers of its own level or lower, never higher. The levels
// follow the pipeline (docs/engines.md draws them): the core types, the graph, facts, rows, heuristics, the
// decision types, the JIT, the cache, the driver, the engines, choose, the plan, and above the library the
// testing library, the CLI and the Python binding. This test reads every quoted include of those sources; the
// binding, like any user of the library, includes only its public headers (include/rime/) and its own, and the CLI
// those, its own and the testing harness's (tools/testing/, which checks a run's outputs).
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "catch.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;

namespace {

struct Level {
  int rank;
  const char* name;
  std::vector<std::string> prefixes;  // repository paths (a trailing '/' names a folder)
};

const std::vector<Level>& levels() {
  static const std::vector<Level> kLevels = {
      {0, "core", {"include/rime/status.hpp", "include/rime/types.hpp", "include/rime/version.hpp",
                   "include/rime/device.hpp", "include/rime/log.hpp", "src/status.cpp", "src/device.cpp", "src/status_macros.hpp",
                   "src/digest/", "src/log/", "src/json/", "src/units/", "src/embedded_files.hpp"}},
      {1, "graph", {"include/rime/graph.hpp", "include/rime/json.hpp", "src/graph/", "src/validate/"}},
      {2, "facts", {"include/rime/inspect/facts.hpp", "src/analyze/"}},
      {3, "rows", {"include/rime/inspect/rows.hpp", "src/match/"}},
      {4, "heuristics", {"heuristics/"}},
      {5, "decision types", {"include/rime/inspect/config.hpp"}},
      {6, "jit", {"src/jit/"}},
      {7, "cache", {"include/rime/cache.hpp", "src/cache/"}},
      {8, "driver", {"include/rime/communicator.hpp", "include/rime/gpu.hpp", "src/runtime/"}},
      {9, "engines", {"engines/"}},
      {10, "choose", {"src/choose/"}},
      {11, "plan", {"include/rime/plan.hpp", "include/rime/padding_mask.hpp", "include/rime/ring.hpp", "include/rime/tune.hpp",
                    "src/plan/"}},
      {12, "public api", {"include/rime/rime.hpp"}},
      {13, "testing", {"tools/testing/"}},
      {14, "cli", {"tools/cli/"}},
      {15, "python binding", {"python/"}},
  };
  return kLevels;
}

const Level* level_of(const std::string& path) {
  const Level* best = nullptr;
  size_t best_len = 0;
  for (const Level& l : levels())
    for (const std::string& p : l.prefixes)
      if (path.compare(0, p.size(), p) == 0 && p.size() > best_len) best = &l, best_len = p.size();
  return best;
}

// The repository path a quoted include resolves to, searching as the build does: the including file's folder,
// then the include directories of the targets.
std::string resolve(const fs::path& root, const std::string& including, const std::string& header) {
  const fs::path dir = fs::path(including).parent_path();
  for (const fs::path& base : {dir, fs::path("include"), fs::path("src"), fs::path("engines"), fs::path("tools"),
                               fs::path("")}) {
    const fs::path candidate = base / header;
    if (fs::exists(root / candidate)) return candidate.lexically_normal().generic_string();
  }
  return {};
}

}  // namespace

TEST_CASE("no stage includes a header of a higher stage", "[layering]") {
  const fs::path root = rime::test::source_dir();
  const std::regex include_re(R"(^\s*#\s*include\s+"([^"]+)\")");
  int files = 0;
  for (const char* top : {"include", "src", "heuristics", "engines", "tools/testing", "tools/cli", "python"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      if (!entry.is_regular_file()) continue;
      const std::string ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".hpp" && ext != ".h" && ext != ".cuh") continue;
      const std::string path = fs::relative(entry.path(), root).generic_string();
      const Level* own = level_of(path);
      INFO(path);
      REQUIRE(own != nullptr);  // every file of these folders has a level
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      while (std::getline(in, line)) {
        std::smatch m;
        if (!std::regex_search(line, m, include_re)) continue;
        const std::string target = resolve(root, path, m[1].str());
        INFO(path << " includes \"" << m[1].str() << "\" (" << target << ")");
        REQUIRE_FALSE(target.empty());
        const Level* theirs = level_of(target);
        REQUIRE(theirs != nullptr);
        INFO(own->name << " (level " << own->rank << ") includes " << theirs->name << " (level " << theirs->rank
                       << ")");
        CHECK(theirs->rank <= own->rank);
        if (path.rfind("python/", 0) == 0)  // the binding: public headers and its own only
          CHECK((target.rfind("include/rime/", 0) == 0 || target.rfind("python/", 0) == 0));
        if (path.rfind("tools/cli/", 0) == 0)  // the CLI: public headers, its own and the testing harness's
          CHECK((target.rfind("include/rime/", 0) == 0 || target.rfind("tools/cli/", 0) == 0 ||
                 target.rfind("tools/testing/", 0) == 0));
      }
    }
  }
  CHECK(files > 50);
}
