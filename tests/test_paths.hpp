// Where the tests find the repository's files: RIME_SOURCE_DIR from the environment (for a build carried to
// another machine), else the source directory this build was configured from.
#pragma once
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace rime::test {
inline std::string source_dir() {
  if (const char* env = std::getenv("RIME_SOURCE_DIR")) return env;
  return RIME_CONFIGURED_SOURCE_DIR;
}
inline std::string example_path(const std::string& name) { return source_dir() + "/examples/" + name + ".json"; }
// A graph of tests/data (graphs no row serves yet, or malformed on purpose).
inline std::string data_path(const std::string& name) { return source_dir() + "/tests/data/" + name + ".json"; }
inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace rime::test
