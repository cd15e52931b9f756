// Internal: the on-disk plan cache (SPEC section 9). Entries are directories `<engine>.<digest16>/` holding
// kernel.cu, kernel.cubin and meta.json; they are published by compiling into a private temp directory and
// renaming it into place, and every load verifies the cubin's sha256.
//
// The cache directory is hostile ground: the rules every operation keeps are stated once, in cache/fs_at.hpp. The
// names rime owns here: entry names (the key format above), their temp and trash names (`.tmp-<entry>-<suffix>`,
// `.trash-<entry>-<suffix>`), compile locks (`.lock-<entry>`), `quarantine/` and `tuned/` (tuned_store.cpp).
// Anything else in the directory (a user's notes/, a symlink named like an entry) is foreign: listed, never
// loaded, moved or deleted. Where the directory is: cache/settings.hpp; its JSON reports: rime/cache.hpp.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "jit/kernel_spec.hpp"
#include "rime/status.hpp"

namespace rime::cache {

inline constexpr int kFormatVersion = 1;
inline constexpr int64_t kDefaultMaxBytes = int64_t{2} << 30;
// A temp or trash directory this old belongs to a process that was killed; it is removed.
inline constexpr int64_t kStaleTempSeconds = 600;
// A publish rescans the directory's sizes (for the size cap) at most this often, unless what this process
// published since its last scan may have crossed the cap: with 10,000 entries a scan is ~40,000 stat calls.
inline constexpr int64_t kSizeRescanSeconds = 30;
// The directory below the cache directory where `rime tune` records its choices (tuned_store.cpp).
inline constexpr const char* kTunedDir = "tuned";

// An open directory descriptor, closed when the last copy goes.
class DirHandle {
 public:
  explicit DirHandle(int fd) : fd_(fd) {}
  ~DirHandle();
  DirHandle(const DirHandle&) = delete;
  DirHandle& operator=(const DirHandle&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

class DiskCache;

// A cross-process lock on one kernel key: an flock on `.lock-<entry>` in the cache directory, held while this
// process compiles the key, so that N processes warming the same graphs (the ranks of one server) compile each
// kernel once and the others load it. The kernel releases an flock when its holder dies, so a killed compile
// leaves no lock behind. Empty (no lock) where the file cannot be made; the publish protocol stays race-safe
// without it.
class CompileLock {
 public:
  CompileLock() = default;
  explicit CompileLock(int fd) : fd_(fd) {}
  ~CompileLock();
  CompileLock(CompileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  CompileLock& operator=(CompileLock&& other) noexcept;
  CompileLock(const CompileLock&) = delete;
  CompileLock& operator=(const CompileLock&) = delete;

 private:
  int fd_ = -1;
};

enum class EntryKind {
  Entry,        // a directory with an entry's name
  OtherFormat,  // an entry of another cache format version: listed, never loaded, quarantined or verified
  Foreign,      // not a name rime owns, or a symlink / file with an entry's name: never touched
};

struct EntryInfo {
  std::string name;  // <engine>.<digest16>, or the foreign name
  std::string path;
  EntryKind kind = EntryKind::Entry;
  std::string key, engine, name_expression, lowered_name, arch;
  int format_version = 0;
  int64_t bytes = 0;  // of the entry's files (stat sizes)
  int64_t cubin_bytes = 0;
  double compile_ms = 0;
  int64_t created = 0;    // unix seconds
  int64_t last_used = 0;  // unix seconds (the entry directory's mtime, touched on every load)
  bool valid = false;     // checked: meta.json types, key, cubin size and sha256 (list with checksums)
  std::string problem;    // why it is not valid, or what a foreign name is
  // A foreign thing (a file, a symlink) holding an entry's name: the entry of that key can never be published, so
  // its kernel is compiled again by every process. rime never removes it (it did not write it); `cache verify`
  // reports it with the command that does.
  bool blocks_entry = false;
};

class DiskCache {
 public:
  // Opens (creating it, 0700, when missing) and checks a cache directory: a real directory, or a symlink whose
  // owner is this user or root; the directory itself owned by this user and not writable by group or others.
  // InvalidArgument otherwise, with the reason.
  static Result<DiskCache> open(const std::string& dir, int64_t max_bytes = kDefaultMaxBytes);

  // nullopt on a miss; a missing, truncated, checksum-failing, mistyped or other-version entry is a miss (the
  // bad ones are logged).
  std::optional<CompiledKernel> load(const KernelSpec& spec, const std::string& key) const;
  // Publishes atomically; a concurrent identical entry wins and ours is discarded. A corrupt entry at the same
  // key (a file missing, truncated, a directory in place of a file) is moved aside and replaced. Then evicts
  // least-recently-used entries over max_bytes, by stat sizes and times (no checksums, no file reads), from a
  // scan at most kSizeRescanSeconds old plus what this process published since.
  Status store(const CompiledKernel& kernel) const;

  // Waits for and takes the compile lock of an entry (CompileLock).
  CompileLock lock_compile(const std::string& engine, const std::string& key) const;

  // Every name in the directory: entries first (checked with checksums when `checksums`), then foreign names.
  std::vector<EntryInfo> list(bool checksums = true) const;
  // Recomputes every checksum; moves bad entries of this format version to quarantine/ and returns them.
  // Entries of other format versions and foreign names are left alone.
  std::vector<EntryInfo> verify() const;
  // Evicts least-recently-used entries until the total is at most max_bytes; returns those evicted.
  std::vector<EntryInfo> prune(int64_t max_bytes) const;
  // Removes every entry, quarantined entries and stale temp directories (a live writer's stay); returns how
  // many entries. Foreign names stay.
  Result<int> clear() const;

  // The entry `rime cache show` names: an entry name, or a key prefix of at least 4 hex digits that names exactly
  // one entry (checked with checksums). InvalidArgument otherwise, naming the entries a prefix matches.
  Result<EntryInfo> find(const std::string& name_or_key) const;

  // The totals `rime cache stats` prints, from one listing with checksums.
  struct Stats {
    int64_t entries = 0, invalid = 0, foreign = 0, bytes = 0;
    double compile_ms = 0;  // the NVRTC time the entries hold (saved per cold start)
  };
  Stats stats() const;

  // Tuned choices (`rime tune`, src/plan/tuned.hpp): one JSON document per tuning key in the directory tuned/ (never
  // through a symlink), named <key16>.json, published by writing `.tmp-<key16>.json-<suffix>` there and renaming it
  // into place. Only regular files of those names are read or removed; a symlink or directory holding a choice's name
  // is never replaced (store_tuned refuses), and anything else in tuned/ is left alone. list(), verify(), prune() and
  // clear() never touch tuned/; clear_tuned() removes the choices and stale temps.
  struct TunedFile {
    std::string name, path;  // <key16>.json
    std::string text;        // the document (empty when unreadable)
    int64_t bytes = 0, modified = 0;
  };
  static std::string tuned_name(const std::string& key) { return key.substr(0, 16) + ".json"; }
  Status store_tuned(const std::string& key, const std::string& text) const;
  std::optional<std::string> load_tuned(const std::string& key) const;
  std::vector<TunedFile> list_tuned() const;
  Result<int> clear_tuned() const;

  const std::string& dir() const { return dir_; }
  int64_t max_bytes() const { return max_bytes_; }
  static std::string entry_name(const std::string& engine, const std::string& key) {
    return engine + "." + key.substr(0, 16);
  }
  // Whether `name` has the form of an entry name: [a-z0-9_]{1,64} '.' 16 lowercase hex digits.
  static bool is_entry_name(const std::string& name);

 private:
  DiskCache(std::string dir, std::shared_ptr<const DirHandle> handle, int64_t max_bytes);
  int fd() const { return handle_->fd(); }
  EntryInfo inspect(const std::string& name, bool checksums) const;
  void remove_stale_temps(int64_t older_than) const;
  // Moves an entry out of the way (to a trash name) and removes what rime owns in it; what cannot be removed
  // (a directory planted in place of a file) goes to quarantine/.
  void remove_entry(const std::string& name) const;
  bool ensure_quarantine() const;

  // Each entry's name, stat size and last use, without reading any file.
  std::vector<EntryInfo> scan_sizes() const;

  // What the last size scan saw, shared by copies of this cache (so by every thread of a process).
  struct SizeState;

  std::string dir_;
  std::shared_ptr<const DirHandle> handle_;
  int64_t max_bytes_;
  std::shared_ptr<SizeState> sizes_;
};

}  // namespace rime::cache
