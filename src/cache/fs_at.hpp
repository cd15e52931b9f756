// Internal: file operations relative to a directory handle, safe where others plant files and links (STYLE
// lesson 15). The plan cache's directory is hostile ground; every module of src/cache keeps these rules:
//   - the directory's path is resolved and checked once (DiskCache::open: owned by this user, not writable by
//     others, a symlink only when this user or root owns it); everything after works relative to the handle taken
//     then (openat, renameat, unlinkat, mkdirat), never a path resolved again;
//   - nothing is opened, renamed or removed through a symlink (O_NOFOLLOW, AT_SYMLINK_NOFOLLOW): a symlink met is
//     unlinked itself when it holds a name rime owns inside its own directory, else left alone;
//   - only names rime owns are touched: entry names, their temp, trash and lock names, quarantine/ and tuned/
//     (DiskCache). Anything else is foreign: listed, never loaded, moved or removed;
//   - files are published by writing a private temp name and renaming it into place, fsynced;
//   - what is read back is type-checked (json_checked) and verified (sha256) before use: a bad file is a miss.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rime/status.hpp"

namespace rime::cache {

// A descriptor closed on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd();
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  bool ok() const { return fd >= 0; }
};

int64_t now_seconds();
// A directory below `parent`, never through a symlink (-1 otherwise).
int open_dir_at(int parent, const std::string& name);
// A regular file below `dir_fd`, never through a symlink; nullopt for anything else.
std::optional<std::string> read_file_at(int dir_fd, const char* name);
// Creates `name` below `dir_fd` (it must not exist: O_EXCL, never through a symlink), writes and fsyncs it;
// CacheCorrupt naming `shown` when it cannot.
Status write_file_synced_at(int dir_fd, const char* name, const std::string& data, const std::string& shown);
// The names in a directory (sorted), read through a duplicate of its descriptor.
std::vector<std::string> names_in(int dir_fd);
// A suffix no other process or thread picks at the same time (the pid and 48 random bits), for temp names.
std::string random_suffix();
// Creates each missing component of `path` (0700). Existing components, symlinks included, are used as they are:
// only the final directory is checked (DiskCache::open).
void mkdir_parents(const std::string& path);

}  // namespace rime::cache
