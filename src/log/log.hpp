// Internal: leveled logging to stderr. RIME_LOG=off|warn|info|debug (default warn).
#pragma once

#include <fmt/format.h>

#include <string>

namespace rime::log {

enum class Level : int { Off = 0, Warn = 1, Info = 2, Debug = 3 };
Level level();
void write(Level level, const std::string& line);

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
