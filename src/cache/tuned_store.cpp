// DiskCache's tuned/ store: the choices `rime tune` records, one JSON document per tuning key (src/plan/tuned.hpp).
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cache/disk_cache.hpp"
#include "cache/fs_at.hpp"

namespace rime::cache {

namespace {

// <16 lowercase hex digits>.json: a tuned choice's file (tuned_name).
bool is_tuned_name(const std::string& n) {
  if (n.size() != 21 || n.compare(16, 5, ".json") != 0) return false;
  return std::all_of(n.begin(), n.begin() + 16,
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// .tmp-<tuned name>-<suffix>: store_tuned's temp file.
bool is_tuned_temp_name(const std::string& n) {
  const size_t dash = n.rfind('-');
  return n.rfind(".tmp-", 0) == 0 && dash != std::string::npos && dash > 5 && dash + 1 < n.size() &&
         is_tuned_name(n.substr(5, dash - 5));
}

// tuned/ below the cache directory, created (0700) when `create`; -1 when it is missing or not a real directory.
int open_tuned_dir(int cache_fd, bool create) {
  if (create) ::mkdirat(cache_fd, kTunedDir, 0700);
  return open_dir_at(cache_fd, kTunedDir);
}

}  // namespace

Status DiskCache::store_tuned(const std::string& key, const std::string& text) const {
  const std::string name = tuned_name(key);
  Fd dir(open_tuned_dir(fd(), true));
  if (!dir.ok())
    return Status(StatusCode::CacheCorrupt, fmt::format("cannot open {}/{}/: {}", dir_, kTunedDir, std::strerror(errno)));
  const std::string shown = fmt::format("{}/{}/{}", dir_, kTunedDir, name);
  // A thing other than a regular file under the name (a symlink, a directory) is not rime's: it is never replaced.
  struct stat st {};
  if (::fstatat(dir.fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode))
    return Status(StatusCode::CacheCorrupt,
                  fmt::format("{} is not a file rime wrote; it is left alone and the choice is not recorded", shown));
  const std::string temp = ".tmp-" + name + "-" + random_suffix();
  Status written = write_file_synced_at(dir.fd, temp.c_str(), text, shown);
  if (written.ok() && ::renameat(dir.fd, temp.c_str(), dir.fd, name.c_str()) != 0)
    written = Status(StatusCode::CacheCorrupt, fmt::format("cannot publish {}: {}", shown, std::strerror(errno)));
  if (!written.ok()) ::unlinkat(dir.fd, temp.c_str(), 0);
  return written;
}

std::optional<std::string> DiskCache::load_tuned(const std::string& key) const {
  Fd dir(open_tuned_dir(fd(), false));
  if (!dir.ok()) return std::nullopt;
  return read_file_at(dir.fd, tuned_name(key).c_str());
}

std::vector<DiskCache::TunedFile> DiskCache::list_tuned() const {
  std::vector<TunedFile> out;
  Fd dir(open_tuned_dir(fd(), false));
  if (!dir.ok()) return out;
  for (const std::string& n : names_in(dir.fd)) {
    if (!is_tuned_name(n)) continue;
    TunedFile t;
    t.name = n;
    t.path = fmt::format("{}/{}/{}", dir_, kTunedDir, n);
    struct stat st {};
    if (::fstatat(dir.fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    t.bytes = static_cast<int64_t>(st.st_size);
    t.modified = static_cast<int64_t>(st.st_mtime);
    t.text = read_file_at(dir.fd, n.c_str()).value_or("");
    out.push_back(std::move(t));
  }
  return out;
}

Result<int> DiskCache::clear_tuned() const {
  Fd dir(open_tuned_dir(fd(), false));
  if (!dir.ok()) return 0;
  int removed = 0;
  for (const std::string& n : names_in(dir.fd)) {
    struct stat st {};
    const bool temp = is_tuned_temp_name(n);  // a killed store's; a live one's is younger than kStaleTempSeconds
    if ((!is_tuned_name(n) && !temp) || ::fstatat(dir.fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode) || (temp && now_seconds() - st.st_mtime < kStaleTempSeconds))
      continue;
    if (::unlinkat(dir.fd, n.c_str(), 0) == 0 && !temp) ++removed;
  }
  return removed;
}

}  // namespace rime::cache
