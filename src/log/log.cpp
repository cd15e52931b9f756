#include "log/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace rime::log {
namespace {

std::atomic<Sink> g_sink{nullptr};
std::atomic<int> g_sink_level{static_cast<int>(Level::Off)};

Level env_level() {
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

}  // namespace

Level level() {
  const int sink = g_sink_level.load(std::memory_order_relaxed);
  return static_cast<int>(env_level()) >= sink ? env_level() : static_cast<Level>(sink);
}

void set_sink(Sink sink, Level sink_level) {
  g_sink_level.store(static_cast<int>(sink ? sink_level : Level::Off), std::memory_order_relaxed);
  g_sink.store(sink, std::memory_order_release);
}

void write(Level lvl, const std::string& line) {
  if (Sink sink = g_sink.load(std::memory_order_acquire)) {
    sink(lvl, line);
    return;
  }
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const char* tag = lvl == Level::Warn ? "warning" : lvl == Level::Info ? "info" : "debug";
  std::fprintf(stderr, "rime %s: %s\n", tag, line.c_str());
}

}  // namespace rime::log

namespace rime {
void set_log_sink(LogSink sink, LogLevel sink_level) { log::set_sink(sink, sink_level); }
void write_log(LogLevel level, const std::string& line) {
  if (level != LogLevel::Off && log::level() >= level) log::write(level, line);
}
}  // namespace rime
