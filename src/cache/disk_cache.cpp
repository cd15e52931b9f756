#include "cache/disk_cache.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <mutex>

#include "cache/fs_at.hpp"
#include "digest/sha256.hpp"
#include "json/checked.hpp"
#include "log/log.hpp"
#include "rime/version.hpp"

namespace rime::cache {
namespace {

using nlohmann::json;

constexpr const char* kCubinFile = "kernel.cubin";
constexpr const char* kSourceFile = "kernel.cu";
constexpr const char* kMetaFile = "meta.json";
constexpr const char* kQuarantine = "quarantine";
constexpr const char* kEntryFiles[] = {kSourceFile, kCubinFile, kMetaFile};

constexpr const char* kLockPrefix = ".lock-";

// `.lock-<entry>`: a compile lock (CompileLock).
bool is_lock_name(const std::string& n) {
  return n.rfind(kLockPrefix, 0) == 0 && DiskCache::is_entry_name(n.substr(std::strlen(kLockPrefix)));
}

// rime's temp and trash names: ".tmp-<entry>-<suffix>" / ".trash-<entry>-<suffix>".
bool is_own_scratch_name(const std::string& n) {
  for (const char* prefix : {".tmp-", ".trash-"}) {
    const size_t p = std::strlen(prefix);
    if (n.compare(0, p, prefix) != 0) continue;
    const size_t dash = n.rfind('-');
    if (dash == std::string::npos || dash <= p) return false;
    return DiskCache::is_entry_name(n.substr(p, dash - p)) && dash + 1 < n.size();
  }
  return false;
}

// Removes, inside the directory `name` below `parent`, the files rime writes there (regular files or symlinks:
// a symlink is unlinked, never followed), then the directory if that left it empty. Returns whether it is gone.
bool remove_own_dir(int parent, const std::string& name) {
  {
    Fd d(open_dir_at(parent, name));
    if (!d.ok()) return false;
    for (const char* f : kEntryFiles) {
      struct stat st {};
      if (::fstatat(d.fd, f, &st, AT_SYMLINK_NOFOLLOW) == 0 && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)))
        ::unlinkat(d.fd, f, 0);
    }
  }
  return ::unlinkat(parent, name.c_str(), AT_REMOVEDIR) == 0;
}

// Every field of meta.json rime reads, type-checked. A problem is reported, never thrown.
struct Meta {
  int64_t format_version = 0;
  std::string key, engine, name_expression, lowered_name, arch, cubin_sha256;
  int64_t cubin_bytes = -1, created = 0;
  double compile_ms = 0;
};
std::string read_meta(const std::string& text, Meta& m) {
  namespace jc = json_checked;
  json j;
  Status s = jc::parse_object(text, j, StatusCode::CacheCorrupt);
  if (!s.ok()) return "meta.json " + s.message();
  for (const Status& st : {jc::get_int(j, "format_version", m.format_version, "", StatusCode::CacheCorrupt)}) {
    if (!st.ok()) return "meta.json: " + st.message();
  }
  if (m.format_version != kFormatVersion) return {};  // another format: its other fields are not ours to read
  for (const Status& st : {jc::get_string(j, "key", m.key, "", StatusCode::CacheCorrupt),
                           jc::get_string(j, "engine", m.engine, "", StatusCode::CacheCorrupt),
                           jc::get_string(j, "name_expression", m.name_expression, "", StatusCode::CacheCorrupt),
                           jc::get_string(j, "lowered_name", m.lowered_name, "", StatusCode::CacheCorrupt),
                           jc::get_string(j, "arch", m.arch, "", StatusCode::CacheCorrupt),
                           jc::get_string(j, "cubin_sha256", m.cubin_sha256, "", StatusCode::CacheCorrupt),
                           jc::get_int(j, "cubin_bytes", m.cubin_bytes, "", StatusCode::CacheCorrupt),
                           jc::get_int(j, "created", m.created, "", StatusCode::CacheCorrupt),
                           jc::get_number(j, "compile_ms", m.compile_ms, "", StatusCode::CacheCorrupt)})
    if (!st.ok()) return "meta.json: " + st.message() + (st.location().empty() ? "" : " (" + st.location() + ")");
  return {};
}

// The checks a load makes of an entry's meta and cubin, in order; empty when it is sound.
std::string check_entry(const Meta& m, const std::string& name, const std::optional<std::string>& cubin) {
  if (m.key.size() != 64 || DiskCache::entry_name(m.engine, m.key) != name) return "meta.json names another key";
  if (!cubin) return "no kernel.cubin (or not a regular file)";
  if (static_cast<int64_t>(cubin->size()) != m.cubin_bytes)
    return fmt::format("kernel.cubin has {} bytes, meta.json says {}", cubin->size(), m.cubin_bytes);
  if (sha256_hex(*cubin) != m.cubin_sha256) return "kernel.cubin fails its sha256";
  return {};
}

Status refuse(const std::string& message) { return Status(StatusCode::InvalidArgument, message); }

}  // namespace

DirHandle::~DirHandle() {
  if (fd_ >= 0) ::close(fd_);
}

struct DiskCache::SizeState {
  std::mutex mu;
  int64_t scanned_at = 0;       // unix seconds; 0: never
  int64_t scanned_bytes = 0;    // the total then
  int64_t published_since = 0;  // bytes this process published after that scan
};

DiskCache::DiskCache(std::string dir, std::shared_ptr<const DirHandle> handle, int64_t max_bytes)
    : dir_(std::move(dir)), handle_(std::move(handle)), max_bytes_(max_bytes), sizes_(std::make_shared<SizeState>()) {}

bool DiskCache::is_entry_name(const std::string& n) {
  const size_t dot = n.rfind('.');
  if (dot == std::string::npos || dot == 0 || dot > 64 || n.size() - dot - 1 != 16) return false;
  for (size_t i = 0; i < dot; ++i)
    if (!((n[i] >= 'a' && n[i] <= 'z') || (n[i] >= '0' && n[i] <= '9') || n[i] == '_')) return false;
  for (size_t i = dot + 1; i < n.size(); ++i)
    if (!((n[i] >= '0' && n[i] <= '9') || (n[i] >= 'a' && n[i] <= 'f'))) return false;
  return true;
}

Result<DiskCache> DiskCache::open(const std::string& dir, int64_t max_bytes) {
  struct stat lst {};
  if (::lstat(dir.c_str(), &lst) != 0) {
    mkdir_parents(dir);
    if (::lstat(dir.c_str(), &lst) != 0) return refuse(fmt::format("cannot create {}: {}", dir, std::strerror(errno)));
  }
  const uid_t me = ::geteuid();
  // The path is resolved once, here. A symlink is followed only when only this user (or root) can re-point it.
  if (S_ISLNK(lst.st_mode) && lst.st_uid != me && lst.st_uid != 0)
    return refuse(fmt::format("refusing cache directory {}: it is a symlink owned by uid {}, not by this user (uid {}) "
                              "or root",
                              dir, lst.st_uid, me));
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return refuse(fmt::format("{} is not a directory we can open: {}", dir, std::strerror(errno)));
  auto handle = std::make_shared<const DirHandle>(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) return refuse(fmt::format("{} is not a directory", dir));
  // A cubin loaded from a directory another user can write is code execution on the GPU.
  if (st.st_uid != me)
    return refuse(fmt::format("refusing cache directory {}: owned by uid {}, not by this user (uid {})", dir,
                              st.st_uid, me));
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return refuse(fmt::format("refusing cache directory {}: mode {:04o} lets other users write it (chmod 700 {} to "
                              "use it)",
                              dir, st.st_mode & 07777, dir));
  if ((st.st_mode & S_IRWXU) != S_IRWXU) return refuse(fmt::format("cache directory {} is not writable", dir));
  return DiskCache(dir, std::move(handle), max_bytes);
}

EntryInfo DiskCache::inspect(const std::string& name, bool checksums) const {
  EntryInfo e;
  e.name = name;
  e.path = dir_ + "/" + name;
  struct stat st {};
  if (::fstatat(fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    e.kind = EntryKind::Foreign;
    e.problem = "vanished";
    return e;
  }
  if (!is_entry_name(name) || !S_ISDIR(st.st_mode)) {
    e.kind = EntryKind::Foreign;
    e.problem = S_ISLNK(st.st_mode)  ? "a symlink (never followed)"
                : S_ISDIR(st.st_mode) ? "not a cache entry name"
                : S_ISREG(st.st_mode) ? "a regular file, not an entry directory"
                                      : "not a directory";
    e.blocks_entry = is_entry_name(name);
    return e;
  }
  e.last_used = st.st_mtime;
  Fd d(open_dir_at(fd(), name));
  if (!d.ok()) {
    e.problem = "cannot open the entry directory";
    return e;
  }
  for (const char* f : kEntryFiles) {
    struct stat fs {};
    if (::fstatat(d.fd, f, &fs, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(fs.st_mode)) e.bytes += fs.st_size;
  }
  const std::optional<std::string> meta_text = read_file_at(d.fd, kMetaFile);
  if (!meta_text) {
    e.problem = "no meta.json (or not a regular file)";
    return e;
  }
  Meta m;
  std::string problem = read_meta(*meta_text, m);
  e.format_version = static_cast<int>(std::clamp<int64_t>(m.format_version, INT32_MIN, INT32_MAX));
  if (!problem.empty()) {
    e.problem = problem;
    return e;
  }
  if (m.format_version != kFormatVersion) {
    e.kind = EntryKind::OtherFormat;
    e.problem = fmt::format("cache format version {} (this rime reads {})", m.format_version, kFormatVersion);
    return e;
  }
  e.key = m.key;
  e.engine = m.engine;
  e.name_expression = m.name_expression;
  e.lowered_name = m.lowered_name;
  e.arch = m.arch;
  e.compile_ms = m.compile_ms;
  e.created = m.created;
  e.cubin_bytes = m.cubin_bytes;
  if (!checksums) {
    e.valid = true;  // not verified: prune needs only names, sizes and times
    return e;
  }
  e.problem = check_entry(m, name, read_file_at(d.fd, kCubinFile));
  e.valid = e.problem.empty();
  return e;
}

std::optional<CompiledKernel> DiskCache::load(const KernelSpec& spec, const std::string& key) const {
  const std::string name = entry_name(spec.engine, key);
  if (!is_entry_name(name)) return std::nullopt;
  Fd d(open_dir_at(fd(), name));  // a symlink with the entry's name is not an entry: a miss
  if (!d.ok()) return std::nullopt;  // the ordinary miss
  const std::optional<std::string> meta_text = read_file_at(d.fd, kMetaFile);
  std::string problem;
  Meta m;
  if (!meta_text) problem = "no meta.json (or not a regular file)";
  else problem = read_meta(*meta_text, m);
  std::optional<std::string> cubin;
  if (problem.empty() && m.format_version != kFormatVersion)
    problem = fmt::format("cache format version {}", m.format_version);
  if (problem.empty() && m.key != key) problem = "meta.json names another key";
  if (problem.empty()) {
    cubin = read_file_at(d.fd, kCubinFile);
    problem = check_entry(m, name, cubin);
  }
  if (!problem.empty()) {
    log::warn("cache entry {}/{} is unusable ({}); recompiling", dir_, name, problem);
    return std::nullopt;
  }
  ::futimens(d.fd, nullptr);  // last used: now
  CompiledKernel k;
  k.spec = spec;
  k.key = key;
  k.lowered_name = m.lowered_name;
  k.cubin = std::move(*cubin);
  k.compile_ms = m.compile_ms;
  return k;
}

bool DiskCache::ensure_quarantine() const {
  ::mkdirat(fd(), kQuarantine, 0700);
  struct stat st {};
  return ::fstatat(fd(), kQuarantine, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
         st.st_uid == ::geteuid();
}

void DiskCache::remove_entry(const std::string& name) const {
  // First a hidden name (readers then simply miss), then what rime wrote in it.
  const std::string trash = fmt::format(".trash-{}-{}", name, random_suffix());
  if (::renameat(fd(), name.c_str(), fd(), trash.c_str()) != 0) return;
  if (remove_own_dir(fd(), trash)) return;
  // Something rime did not write is in it (e.g. a directory in place of a file): not ours to delete.
  if (ensure_quarantine()) {
    Fd q(open_dir_at(fd(), kQuarantine));
    if (q.ok() && ::renameat(fd(), trash.c_str(), q.fd, fmt::format("{}.{}", name, now_seconds()).c_str()) == 0) {
      log::warn("cache entry {}/{} held files rime did not write; moved to {}/{}/", dir_, name, dir_, kQuarantine);
      return;
    }
  }
  log::warn("cache entry {}/{} held files rime did not write; left as {}/{}", dir_, name, dir_, trash);
}

void DiskCache::remove_stale_temps(int64_t older_than) const {
  const int64_t now = now_seconds();
  for (const std::string& n : names_in(fd())) {
    if (!is_own_scratch_name(n)) continue;
    struct stat st {};
    if (::fstatat(fd(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) continue;  // a symlink: foreign
    if (now - st.st_mtime > older_than) remove_own_dir(fd(), n);
  }
}

Status DiskCache::store(const CompiledKernel& k) const {
  remove_stale_temps(kStaleTempSeconds);
  const std::string name = entry_name(k.spec.engine, k.key);
  if (!is_entry_name(name))
    return Status(StatusCode::Internal, fmt::format("engine name '{}' does not make a cache entry name", k.spec.engine));
  json meta{{"format_version", kFormatVersion},
            {"key", k.key},
            {"engine", k.spec.engine},
            {"header", k.spec.header},
            {"name_expression", k.spec.name_expression},
            {"params_type", k.spec.params_type},
            {"lowered_name", k.lowered_name},
            {"arch", k.spec.arch},
            {"rime_version", kVersion},
            {"nvrtc_version", nvrtc_version()},
            {"nvrtc_options", nvrtc_options(k.spec)},
            {"cubin_sha256", sha256_hex(k.cubin)},
            {"cubin_bytes", static_cast<int64_t>(k.cubin.size())},
            {"compile_ms", k.compile_ms},
            {"created", now_seconds()}};
  std::string tmp;
  for (int attempt = 0; attempt < 8 && tmp.empty(); ++attempt) {
    const std::string candidate = fmt::format(".tmp-{}-{}", name, random_suffix());
    if (::mkdirat(fd(), candidate.c_str(), 0700) == 0) tmp = candidate;
    else if (errno != EEXIST)
      return Status(StatusCode::CacheCorrupt, fmt::format("cannot create a temp directory in {}: {}", dir_, std::strerror(errno)));
  }
  if (tmp.empty()) return Status(StatusCode::CacheCorrupt, fmt::format("cannot create a temp directory in {}", dir_));
  {
    Fd t(open_dir_at(fd(), tmp));
    if (!t.ok()) return Status(StatusCode::CacheCorrupt, fmt::format("cannot open {}/{}", dir_, tmp));
    const std::pair<const char*, std::string> files[] = {
        {kSourceFile, generated_source(k.spec)}, {kCubinFile, k.cubin}, {kMetaFile, meta.dump(2) + "\n"}};
    for (const auto& [file, data] : files) {
      Status s = write_file_synced_at(t.fd, file, data, dir_ + "/" + tmp + "/" + file);
      if (!s.ok()) {
        remove_own_dir(fd(), tmp);
        return s;
      }
    }
    ::fsync(t.fd);
  }
  if (::renameat(fd(), tmp.c_str(), fd(), name.c_str()) != 0) {
    const int e = errno;
    if (e != EEXIST && e != ENOTEMPTY && e != ENOTDIR) {
      remove_own_dir(fd(), tmp);
      return Status(StatusCode::CacheCorrupt, fmt::format("cannot publish {}/{}: {}", dir_, name, std::strerror(e)));
    }
    // Something holds the name. A sound entry (another writer won the race) stays and ours goes. A corrupt
    // entry of ours is moved aside whole (also a directory in place of one of its files) and ours takes its
    // place. A foreign thing with the name (a symlink, a file) is left alone: we stay memory-only for this key.
    const EntryInfo existing = inspect(name, true);
    // (Another format version under this key's name cannot be another rime's entry: the format version is part
    // of the key. It is replaced like a corrupt one.)
    if ((existing.kind == EntryKind::Entry && !existing.valid) || existing.kind == EntryKind::OtherFormat) {
      log::warn("repairing cache entry {}/{} ({})", dir_, name, existing.problem);
      remove_entry(name);
      if (::renameat(fd(), tmp.c_str(), fd(), name.c_str()) == 0) tmp.clear();
    } else if (existing.kind == EntryKind::Foreign) {
      log::warn("cache name {}/{} is taken by {}; not publishing there, so this kernel is compiled again by every "
                "process (rime removes only what it wrote: `rime cache verify` names the command that removes it)",
                dir_, name, existing.problem);
    }
    if (!tmp.empty()) remove_own_dir(fd(), tmp);
  }
  ::fsync(fd());
  // The size cap, without a scan per publish: rescan when the last scan is old or this process's publishes
  // since may have crossed the cap.
  const int64_t published = static_cast<int64_t>(k.cubin.size() + meta.dump(2).size());
  bool rescan = false;
  {
    std::lock_guard<std::mutex> lock(sizes_->mu);
    sizes_->published_since += published;
    rescan = now_seconds() - sizes_->scanned_at >= kSizeRescanSeconds ||
             sizes_->scanned_bytes + sizes_->published_since > max_bytes_;
  }
  if (rescan) prune(max_bytes_);
  return Status::success();
}

std::vector<EntryInfo> DiskCache::scan_sizes() const {
  std::vector<EntryInfo> out;
  for (const std::string& n : names_in(fd())) {
    if (!is_entry_name(n)) continue;
    struct stat st {};
    if (::fstatat(fd(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) continue;  // foreign
    EntryInfo e;
    e.name = n;
    e.path = dir_ + "/" + n;
    e.last_used = st.st_mtime;
    // Sizes only: a stat through the entry's path cannot modify or load anything.
    for (const char* f : kEntryFiles) {
      struct stat fs {};
      if (::fstatat(fd(), (n + "/" + f).c_str(), &fs, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(fs.st_mode))
        e.bytes += fs.st_size;
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<EntryInfo> DiskCache::list(bool checksums) const {
  std::vector<EntryInfo> entries, foreign;
  for (const std::string& n : names_in(fd())) {
    if (n == kQuarantine || n == kTunedDir || is_own_scratch_name(n) || is_lock_name(n)) continue;
    EntryInfo e = inspect(n, checksums);
    (e.kind == EntryKind::Foreign ? foreign : entries).push_back(std::move(e));
  }
  entries.insert(entries.end(), foreign.begin(), foreign.end());
  return entries;
}

std::vector<EntryInfo> DiskCache::verify() const {
  std::vector<EntryInfo> bad;
  for (EntryInfo& e : list(true)) {
    if (e.kind != EntryKind::Entry || e.valid) continue;
    if (ensure_quarantine()) {
      Fd q(open_dir_at(fd(), kQuarantine));
      const std::string dest = fmt::format("{}.{}", e.name, now_seconds());
      if (q.ok() && ::renameat(fd(), e.name.c_str(), q.fd, dest.c_str()) == 0)
        e.path = fmt::format("{}/{}/{}", dir_, kQuarantine, dest);
    }
    bad.push_back(e);
  }
  return bad;
}

std::vector<EntryInfo> DiskCache::prune(int64_t max_bytes) const {
  remove_stale_temps(kStaleTempSeconds);
  std::vector<EntryInfo> entries = scan_sizes();  // entries only: foreign names are never ours to evict
  int64_t total = 0;
  for (const EntryInfo& e : entries) total += e.bytes;
  auto record = [&](int64_t bytes) {
    std::lock_guard<std::mutex> lock(sizes_->mu);
    sizes_->scanned_at = now_seconds();
    sizes_->scanned_bytes = bytes;
    sizes_->published_since = 0;
  };
  if (total <= max_bytes) {
    record(total);
    return {};
  }
  std::sort(entries.begin(), entries.end(), [](const EntryInfo& a, const EntryInfo& b) {
    return a.last_used != b.last_used ? a.last_used < b.last_used : a.name < b.name;
  });
  std::vector<EntryInfo> evicted;
  for (const EntryInfo& e : entries) {
    if (total <= max_bytes) break;
    remove_entry(e.name);
    total -= e.bytes;
    evicted.push_back(e);
  }
  record(total);
  return evicted;
}

CompileLock::~CompileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

CompileLock& CompileLock::operator=(CompileLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

CompileLock DiskCache::lock_compile(const std::string& engine, const std::string& key) const {
  const std::string name = kLockPrefix + entry_name(engine, key);
  // Never through a symlink, and never blocking on something planted there (a FIFO); a lock file is empty and
  // rime never writes to it.
  const int lock_fd = ::openat(fd(), name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
  if (lock_fd < 0) return CompileLock();
  struct stat st {};
  if (::fstat(lock_fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    ::close(lock_fd);
    return CompileLock();
  }
  while (::flock(lock_fd, LOCK_EX) != 0) {
    if (errno != EINTR) {
      ::close(lock_fd);
      return CompileLock();
    }
  }
  return CompileLock(lock_fd);
}

Result<int> DiskCache::clear() const {
  int n = 0;
  for (const EntryInfo& e : list(false)) {
    if (e.kind == EntryKind::Foreign) continue;
    remove_entry(e.name);
    ++n;
  }
  // Quarantined entries (names rime gave them: <entry>.<seconds>) are rime's too.
  Fd q(open_dir_at(fd(), kQuarantine));
  if (q.ok()) {
    for (const std::string& qn : names_in(q.fd)) {
      const size_t dot = qn.rfind('.');
      if (dot == std::string::npos || !is_entry_name(qn.substr(0, dot))) continue;
      struct stat st {};
      if (::fstatat(q.fd, qn.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) remove_own_dir(q.fd, qn);
    }
  }
  remove_stale_temps(kStaleTempSeconds);  // a live writer's temp directory (younger) stays
  // Compile locks: unlinking one a process holds is harmless (a later compile takes a new file, the publish
  // protocol keeps a duplicate compile safe).
  for (const std::string& ln : names_in(fd())) {
    struct stat st {};
    if (is_lock_name(ln) && ::fstatat(fd(), ln.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
      ::unlinkat(fd(), ln.c_str(), 0);
  }
  return n;
}

namespace {
// A name or key of the cache, quoted for a message (a foreign name may hold any byte).
std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}
}  // namespace

Result<EntryInfo> DiskCache::find(const std::string& want) const {
  std::vector<EntryInfo> matches;
  for (const EntryInfo& e : list()) {
    if (e.kind == EntryKind::Foreign) continue;
    if (e.name == want) return e;
    if (want.size() >= 4 && !e.key.empty() && e.key.rfind(want, 0) == 0) matches.push_back(e);
  }
  if (want.size() < 4 && matches.empty())
    return Status(StatusCode::InvalidArgument,
                  fmt::format("cache show {}: give an entry name or a key prefix of at least 4 hex digits", quoted(want)));
  if (matches.empty()) return Status(StatusCode::InvalidArgument, fmt::format("no cache entry matches {}", quoted(want)));
  if (matches.size() > 1) {
    std::string names;
    for (const EntryInfo& m : matches) names += "\n  " + m.name;
    return Status(StatusCode::InvalidArgument,
                  fmt::format("{} names {} entries; give more of the key:{}", quoted(want), matches.size(), names));
  }
  return matches[0];
}

DiskCache::Stats DiskCache::stats() const {
  Stats out;
  for (const EntryInfo& e : list()) {
    if (e.kind == EntryKind::Foreign) {
      ++out.foreign;
      continue;
    }
    ++out.entries;
    out.bytes += e.bytes;
    out.invalid += !e.valid;
    out.compile_ms += e.compile_ms;
  }
  return out;
}

}  // namespace rime::cache
