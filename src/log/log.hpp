// Internal: leveled logging to stderr, or to a sink that replaces it (the Python package's: logger `rime`).
// RIME_LOG=off|warn|info|debug (default warn); a sink receives its own level and above as well.
#pragma once

#include <fmt/format.h>

#include <string>

#include "rime/log.hpp"

namespace rime::log {

using Level = LogLevel;
// The most detailed level written: RIME_LOG's, or the sink's when that is more detailed.
Level level();
void write(Level level, const std::string& line);

// rime::set_log_sink (include/rime/log.hpp).
using Sink = LogSink;
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
