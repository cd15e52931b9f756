// Internal: where the plan cache lives and whether it may be used (settings.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cache/disk_cache.hpp"
#include "rime/status.hpp"

namespace rime::cache {

// Where the cache lives and whether it may be used, from RIME_CACHE_DIR / XDG_CACHE_HOME / HOME,
// RIME_CACHE_DISABLE and RIME_CACHE_MAX_BYTES.
struct Settings {
  std::string dir;  // as configured; empty when disabled or refused
  int64_t max_bytes = kDefaultMaxBytes;
  std::string disabled_why;  // why the disk cache is not used (empty when it is)
  std::shared_ptr<const DiskCache> cache;  // the opened cache when usable
};
// Resolved and checked once per process (set_cache_dir's directory, else the environment's); an unusable
// directory is reported by one warning.
const Settings& settings();
// The directory the first settings() takes instead of the environment's (rime::set_cache_dir); InvalidArgument once
// settings() has resolved.
Status set_directory(const std::string& dir);
// Resolves and checks the settings afresh (tests and the cache tool, which change the environment).
Settings resolve_settings();

}  // namespace rime::cache
