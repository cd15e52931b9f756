#include "cache/fs_at.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>

namespace rime::cache {

int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Fd::~Fd() {
  if (fd >= 0) ::close(fd);
}

int open_dir_at(int parent, const std::string& name) {
  return ::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

std::optional<std::string> read_file_at(int dir_fd, const char* name) {
  Fd fd(::openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd.ok()) return std::nullopt;
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd.fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

Status write_file_synced_at(int dir_fd, const char* name, const std::string& data, const std::string& shown) {
  Fd fd(::openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.ok()) return Status(StatusCode::CacheCorrupt, fmt::format("cannot create {}: {}", shown, std::strerror(errno)));
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd.fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status(StatusCode::CacheCorrupt, fmt::format("cannot write {}: {}", shown, std::strerror(errno)));
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd.fd) != 0) return Status(StatusCode::CacheCorrupt, fmt::format("cannot sync {}: {}", shown, std::strerror(errno)));
  return Status::success();
}

std::vector<std::string> names_in(int dir_fd) {
  std::vector<std::string> out;
  int dup_fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dup_fd < 0) return out;
  DIR* d = ::fdopendir(dup_fd);
  if (!d) {
    ::close(dup_fd);
    return out;
  }
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::string random_suffix() {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^ static_cast<uint64_t>(::getpid()));
  return fmt::format("{:x}-{:012x}", ::getpid(), rng() & 0xFFFFFFFFFFFFull);
}

void mkdir_parents(const std::string& path) {
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    const std::string cur = path.substr(0, pos);
    if (!cur.empty()) ::mkdir(cur.c_str(), 0700);
  }
}

}  // namespace rime::cache
