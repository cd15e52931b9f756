// Where rime's log lines go: stderr by default, down to RIME_LOG's level (off|warn|info|debug, default warn); each
// compile is logged at info before it starts and with its time, cache problems at warn.
#pragma once

#include <string>

namespace rime {

enum class LogLevel : int { Off = 0, Warn = 1, Info = 2, Debug = 3 };

// Lines go to `sink` instead of stderr, down to `sink_level` (RIME_LOG's level when that is more detailed); nullptr
// restores stderr. The sink is called without any lock of rime's held (it may take its own, such as Python's GIL),
// from whichever thread logs.
using LogSink = void (*)(LogLevel level, const std::string& line);
void set_log_sink(LogSink sink, LogLevel sink_level);
// A line of the caller's through the same log (the sink, or stderr), when `level` is logged.
void write_log(LogLevel level, const std::string& line);

}  // namespace rime
