#include "log/log.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace rime::log {

Level level() {
  static const Level l = [] {
    const char* v = std::getenv("RIME_LOG");
    if (!v) return Level::Warn;
    if (!std::strcmp(v, "off")) return Level::Off;
    if (!std::strcmp(v, "info")) return Level::Info;
    if (!std::strcmp(v, "debug")) return Level::Debug;
    return Level::Warn;
  }();
  return l;
}

void write(Level lvl, const std::string& line) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const char* tag = lvl == Level::Warn ? "warning" : lvl == Level::Info ? "info" : "debug";
  std::fprintf(stderr, "rime %s: %s\n", tag, line.c_str());
}

}  // namespace rime::log
