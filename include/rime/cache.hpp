// The plan cache on disk (docs/cache.md), as `rime cache ls|show|stats|verify|prune|clear --json` reports it: each
// call returns that JSON document, so that the CLI, the Python package (rime.cache) and a user's tools read one
// schema. They work on this process's cache directory (set_cache_dir's, else RIME_CACHE_DIR / XDG_CACHE_HOME /
// HOME); without a usable one, CacheCorrupt says why. Nothing outside rime's own entries is removed or renamed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "rime/status.hpp"

namespace rime::cache_report {

// Every name in the directory: entries (checksums checked), foreign names (never touched), then the choices
// `rime tune` recorded (kind "tuned", the document under "tuned"). A JSON array.
Result<std::string> list();
// One entry, by its name or a key prefix of at least 4 hex digits (InvalidArgument naming the entries when none or
// several match), or a tuned choice by its name (tuned/<key16>.json).
Result<std::string> show(const std::string& name_or_key);
// {dir, entries, foreign, bytes, max_bytes, invalid, compile_ms_saved_per_cold_start}
Result<std::string> stats();
// Recomputes every checksum and moves bad entries to quarantine/: {checked, quarantined, foreign}; a foreign name
// with blocks_entry holds an entry's name, and remove_with is the command that removes it (rime never does).
// `clean`, when given: no entry was bad and no foreign name holds an entry's name.
Result<std::string> verify(bool* clean = nullptr);
// Evicts least-recently-used entries until at most `max_bytes` remain (default: the cache's cap):
// {max_bytes, evicted}. InvalidArgument for a negative size.
Result<std::string> prune(std::optional<int64_t> max_bytes = std::nullopt);
// Removes every entry ({"removed": n}; foreign names and live writers' temp directories stay), or with `tuned` the
// recorded choices instead ({"removed_tuned": n}).
Result<std::string> clear(bool tuned = false);
// A byte size as people write it: digits, optionally followed by K, M, G or T (binary units; "512M", "1G").
// InvalidArgument naming `field` and the text otherwise.
Result<int64_t> parse_size(std::string_view text, std::string_view field = "max_bytes");

}  // namespace rime::cache_report
