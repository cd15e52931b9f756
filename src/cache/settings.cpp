// The plan cache's settings: where it lives (set_cache_dir's directory, else RIME_CACHE_DIR / XDG_CACHE_HOME /
// HOME), whether it is used (RIME_CACHE_DISABLE) and its size cap (RIME_CACHE_MAX_BYTES).
#include "cache/settings.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

#include "json/checked.hpp"
#include "log/log.hpp"
#include "units/bytes.hpp"

namespace rime::cache {

namespace {
// set_cache_dir's directory, taken by the first settings() (guarded: planning threads may race the first use).
std::mutex& chosen_dir_mutex() {
  static std::mutex m;
  return m;
}
std::optional<std::string>& chosen_dir() {
  static std::optional<std::string> d;
  return d;
}
bool& settings_resolved() {
  static bool resolved = false;
  return resolved;
}
}  // namespace

Status set_directory(const std::string& dir) {
  if (dir.empty()) return Status(StatusCode::InvalidArgument, "the plan cache directory is empty");
  // A C string ends at the first NUL: the directory would be the part before it, silently.
  if (const size_t nul = dir.find('\0'); nul != std::string::npos)
    return Status(StatusCode::InvalidArgument,
                  fmt::format("dir: the plan cache directory {} holds a NUL byte at offset {}, which no path can hold",
                              json_checked::quoted(dir), nul));
  std::lock_guard<std::mutex> lock(chosen_dir_mutex());
  if (settings_resolved())
    return Status(StatusCode::InvalidArgument,
                  fmt::format("the plan cache is already in use (at '{}'); set its directory before the first plan",
                              settings().dir));
  chosen_dir() = dir;
  return Status::success();
}

Settings resolve_settings() {
  Settings s;
  if (const char* m = std::getenv("RIME_CACHE_MAX_BYTES")) {
    std::optional<int64_t> v = parse_bytes(m);
    if (v && *v > 0) s.max_bytes = *v;
    else log::warn("RIME_CACHE_MAX_BYTES='{}' is not a positive size (digits, optionally K, M, G or T); using {}", m,
                   s.max_bytes);
  }
  if (const char* d = std::getenv("RIME_CACHE_DISABLE"); d && *d && std::strcmp(d, "0") != 0) {
    s.disabled_why = "RIME_CACHE_DISABLE is set";
    return s;
  }
  std::string dir;
  std::optional<std::string> chosen;
  {
    std::lock_guard<std::mutex> lock(chosen_dir_mutex());
    chosen = chosen_dir();
  }
  if (chosen) dir = *chosen;
  else if (const char* d = std::getenv("RIME_CACHE_DIR"); d && *d) dir = d;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = std::string(x) + "/rime";
  else if (const char* h = std::getenv("HOME"); h && *h) dir = std::string(h) + "/.cache/rime";
  if (dir.empty()) {
    s.disabled_why = "no RIME_CACHE_DIR, XDG_CACHE_HOME or HOME to put the cache in";
    return s;
  }
  Result<DiskCache> opened = DiskCache::open(dir, s.max_bytes);
  if (!opened.ok()) {
    s.disabled_why = opened.status().message();
    return s;
  }
  s.dir = dir;
  s.cache = std::make_shared<const DiskCache>(std::move(opened).value());
  return s;
}

const Settings& settings() {
  static const Settings s = [] {
    Settings r = resolve_settings();
    {
      std::lock_guard<std::mutex> lock(chosen_dir_mutex());
      settings_resolved() = true;
    }
    if (!r.cache && r.disabled_why != "RIME_CACHE_DISABLE is set")
      log::warn("plan cache on disk disabled, compiling into memory only: {}", r.disabled_why);
    return r;
  }();
  return s;
}

}  // namespace rime::cache
