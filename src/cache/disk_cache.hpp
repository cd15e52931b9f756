// Internal: the on-disk plan cache (SPEC section 9). Entries are directories `<engine>.<digest16>/` holding
// kernel.cu, kernel.cubin and meta.json; they are published by compiling into a private temp directory and
// renaming it into place, and every load verifies the cubin's sha256.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "jit/kernel_spec.hpp"
#include "rime/status.hpp"

namespace rime::cache {

inline constexpr int kFormatVersion = 1;
inline constexpr int64_t kDefaultMaxBytes = int64_t{2} << 30;

// Where the cache lives and whether it may be used, from RIME_CACHE_DIR / XDG_CACHE_HOME / HOME,
// RIME_CACHE_DISABLE and RIME_CACHE_MAX_BYTES.
struct Settings {
  std::string dir;           // empty when disabled or refused
  int64_t max_bytes = kDefaultMaxBytes;
  std::string disabled_why;  // why the disk cache is not used (empty when it is)
};
// Resolved and checked once per process; an unusable directory is reported by one warning.
const Settings& settings();
// Resolves and checks the settings afresh (tests and the cache tool, which change the environment).
Settings resolve_settings();

struct EntryInfo {
  std::string name;  // directory name: <engine>.<digest16>
  std::string path;
  std::string key, engine, name_expression, lowered_name, arch;
  int format_version = 0;
  int64_t bytes = 0;       // all files of the entry
  int64_t cubin_bytes = 0;
  double compile_ms = 0;
  int64_t created = 0;    // unix seconds
  int64_t last_used = 0;  // unix seconds (the entry directory's mtime, touched on every load)
  bool valid = false;
  std::string problem;  // why it is not valid
};

class DiskCache {
 public:
  explicit DiskCache(std::string dir, int64_t max_bytes = kDefaultMaxBytes)
      : dir_(std::move(dir)), max_bytes_(max_bytes) {}

  // nullopt on a miss; a missing, truncated, checksum-failing or other-version entry is a miss (logged).
  std::optional<CompiledKernel> load(const KernelSpec& spec, const std::string& key) const;
  // Publishes atomically; a concurrent identical entry wins and ours is discarded. A corrupt entry at the same
  // key is repaired file by file (atomic renames). Then evicts least-recently-used entries over max_bytes.
  Status store(const CompiledKernel& kernel) const;

  std::vector<EntryInfo> list() const;
  // Recomputes every checksum; moves bad entries to quarantine/ and returns them.
  std::vector<EntryInfo> verify() const;
  // Evicts least-recently-used entries until the total is at most max_bytes; returns those evicted.
  std::vector<EntryInfo> prune(int64_t max_bytes) const;
  // Removes every entry (and stale temp directories); returns how many entries.
  Result<int> clear() const;

  const std::string& dir() const { return dir_; }
  static std::string entry_name(const std::string& engine, const std::string& key) {
    return engine + "." + key.substr(0, 16);
  }

 private:
  EntryInfo inspect(const std::string& name) const;
  std::string dir_;
  int64_t max_bytes_;
};

}  // namespace rime::cache
