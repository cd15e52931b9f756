// Internal: leveled logging to stderr, or to a sink that replaces it (the Python package's: logger `rime`).
// RIME_LOG=off|warn|info|debug (default warn); a sink receives its own level and above as well.
#pragma once

#include <fmt/format.h>

#include <string>

namespace rime::log {

enum class Level : int { Off = 0, Warn = 1, Info = 2, Debug = 3 };
// The most detailed level written: RIME_LOG's, or the sink's when that is more detailed.
Level level();
void write(Level level, const std::string& line);

// Lines go to `sink` instead of stderr, down to `sink_level`; nullptr restores stderr. The sink is called without
// any lock of rime's held (it may take its own, such as Python's GIL), from whichever thread logs.
using Sink = void (*)(Level level, const std::string& line);
void set_sink(Sink sink, Level sink_level);

template <class... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  if (level() >= Level::Warn) write(Level::Warn, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (level() >= Level::Info) write(Level::Info, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (level() >= Level::Debug) write(Level::Debug, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace rime::log
