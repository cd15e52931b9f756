#include "cache/disk_cache.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "digest/sha256.hpp"
#include "log/log.hpp"
#include "rime/version.hpp"

namespace rime::cache {
namespace {

using nlohmann::json;

constexpr const char* kCubinFile = "kernel.cubin";
constexpr const char* kSourceFile = "kernel.cu";
constexpr const char* kMetaFile = "meta.json";
// A temp directory this old belongs to a compile that was killed; it is removed.
constexpr int64_t kStaleTempSeconds = 600;

int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::optional<std::string> read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Status write_file_synced(const std::string& path, const std::string& data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status(StatusCode::CacheCorrupt, fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return Status(StatusCode::CacheCorrupt, fmt::format("cannot write {}: {}", path, std::strerror(e)));
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0)
    return Status(StatusCode::CacheCorrupt, fmt::format("cannot sync {}: {}", path, std::strerror(errno)));
  return Status::success();
}

void fsync_dir(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

std::vector<std::string> dir_names(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// Entries are flat directories: unlink the files, then the directory.
void remove_tree(const std::string& path) {
  for (const std::string& n : dir_names(path)) {
    const std::string p = path + "/" + n;
    struct stat st {};
    if (::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) remove_tree(p);
    else ::unlink(p.c_str());
  }
  ::rmdir(path.c_str());
}

// Removes an entry: first renamed to a hidden name (readers then simply miss), then deleted.
void remove_entry(const std::string& dir, const std::string& name) {
  const std::string trash = fmt::format("{}/.trash-{}-{}", dir, name, ::getpid());
  if (::rename((dir + "/" + name).c_str(), trash.c_str()) == 0) remove_tree(trash);
}

void remove_stale_temps(const std::string& dir) {
  const int64_t now = now_seconds();
  for (const std::string& n : dir_names(dir)) {
    if (n.rfind(".tmp-", 0) != 0 && n.rfind(".trash-", 0) != 0) continue;
    struct stat st {};
    const std::string p = dir + "/" + n;
    if (::lstat(p.c_str(), &st) == 0 && now - st.st_mtime > kStaleTempSeconds) remove_tree(p);
  }
}

Status mkdir_parents(const std::string& path) {
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    cur = path.substr(0, pos);
    if (cur.empty()) continue;
    if (::mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST)
      return Status(StatusCode::CacheCorrupt, fmt::format("cannot create {}: {}", cur, std::strerror(errno)));
  }
  return Status::success();
}

}  // namespace

Settings resolve_settings() {
  Settings s;
  if (const char* m = std::getenv("RIME_CACHE_MAX_BYTES")) {
    char* end = nullptr;
    long long v = std::strtoll(m, &end, 10);
    if (end && *end == '\0' && v > 0) s.max_bytes = v;
    else log::warn("RIME_CACHE_MAX_BYTES='{}' is not a positive integer; using {}", m, s.max_bytes);
  }
  if (const char* d = std::getenv("RIME_CACHE_DISABLE"); d && *d && std::strcmp(d, "0") != 0) {
    s.disabled_why = "RIME_CACHE_DISABLE is set";
    return s;
  }
  std::string dir;
  if (const char* d = std::getenv("RIME_CACHE_DIR"); d && *d) dir = d;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = std::string(x) + "/rime";
  else if (const char* h = std::getenv("HOME"); h && *h) dir = std::string(h) + "/.cache/rime";
  if (dir.empty()) {
    s.disabled_why = "no RIME_CACHE_DIR, XDG_CACHE_HOME or HOME to put the cache in";
    return s;
  }
  Status made = mkdir_parents(dir);
  struct stat st {};
  if (!made.ok() || ::stat(dir.c_str(), &st) != 0) {
    s.disabled_why = made.ok() ? fmt::format("cannot stat {}: {}", dir, std::strerror(errno)) : made.message();
    return s;
  }
  if (!S_ISDIR(st.st_mode)) {
    s.disabled_why = fmt::format("{} is not a directory", dir);
    return s;
  }
  // A cubin loaded from a directory another user can write is code execution on the GPU.
  if (st.st_uid != ::geteuid()) {
    s.disabled_why = fmt::format("refusing cache directory {}: owned by uid {}, not by this user (uid {})", dir,
                                 st.st_uid, ::geteuid());
    return s;
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    s.disabled_why = fmt::format("refusing cache directory {}: mode {:04o} lets other users write it "
                                 "(chmod 700 {} to use it)",
                                 dir, st.st_mode & 07777, dir);
    return s;
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    s.disabled_why = fmt::format("cache directory {} is not writable", dir);
    return s;
  }
  s.dir = dir;
  return s;
}

const Settings& settings() {
  static const Settings s = [] {
    Settings r = resolve_settings();
    if (r.dir.empty() && r.disabled_why != "RIME_CACHE_DISABLE is set")
      log::warn("plan cache on disk disabled, compiling into memory only: {}", r.disabled_why);
    return r;
  }();
  return s;
}

EntryInfo DiskCache::inspect(const std::string& name) const {
  EntryInfo e;
  e.name = name;
  e.path = dir_ + "/" + name;
  struct stat st {};
  if (::stat(e.path.c_str(), &st) == 0) e.last_used = st.st_mtime;
  for (const std::string& f : dir_names(e.path)) {
    struct stat fs {};
    if (::stat((e.path + "/" + f).c_str(), &fs) == 0) e.bytes += fs.st_size;
  }
  auto meta_text = read_file(e.path + "/" + kMetaFile);
  if (!meta_text) {
    e.problem = "no meta.json";
    return e;
  }
  json meta = json::parse(*meta_text, nullptr, false);
  if (meta.is_discarded() || !meta.is_object()) {
    e.problem = "meta.json does not parse";
    return e;
  }
  e.format_version = meta.value("format_version", 0);
  e.key = meta.value("key", "");
  e.engine = meta.value("engine", "");
  e.name_expression = meta.value("name_expression", "");
  e.lowered_name = meta.value("lowered_name", "");
  e.arch = meta.value("arch", "");
  e.compile_ms = meta.value("compile_ms", 0.0);
  e.created = meta.value("created", int64_t{0});
  e.cubin_bytes = meta.value("cubin_bytes", int64_t{0});
  if (e.format_version != kFormatVersion) {
    e.problem = fmt::format("format version {} (this rime reads {})", e.format_version, kFormatVersion);
    return e;
  }
  if (e.key.size() != 64 || entry_name(e.engine, e.key) != name) {
    e.problem = "meta.json names another key";
    return e;
  }
  auto cubin = read_file(e.path + "/" + kCubinFile);
  if (!cubin) {
    e.problem = "no kernel.cubin";
    return e;
  }
  if (static_cast<int64_t>(cubin->size()) != e.cubin_bytes) {
    e.problem = fmt::format("kernel.cubin has {} bytes, meta.json says {}", cubin->size(), e.cubin_bytes);
    return e;
  }
  if (sha256_hex(*cubin) != meta.value("cubin_sha256", "")) {
    e.problem = "kernel.cubin fails its sha256";
    return e;
  }
  e.valid = true;
  return e;
}

std::optional<CompiledKernel> DiskCache::load(const KernelSpec& spec, const std::string& key) const {
  const std::string path = dir_ + "/" + entry_name(spec.engine, key);
  auto meta_text = read_file(path + "/" + kMetaFile);
  if (!meta_text) return std::nullopt;  // the ordinary miss
  json meta = json::parse(*meta_text, nullptr, false);
  auto cubin = read_file(path + "/" + kCubinFile);
  std::string problem;
  if (meta.is_discarded() || !meta.is_object()) problem = "meta.json does not parse";
  else if (meta.value("format_version", 0) != kFormatVersion)
    problem = fmt::format("format version {}", meta.value("format_version", 0));
  else if (meta.value("key", "") != key) problem = "meta.json names another key";
  else if (!cubin) problem = "no kernel.cubin";
  else if (static_cast<int64_t>(cubin->size()) != meta.value("cubin_bytes", int64_t{-1}))
    problem = fmt::format("kernel.cubin truncated ({} bytes)", cubin->size());
  else if (sha256_hex(*cubin) != meta.value("cubin_sha256", "")) problem = "kernel.cubin fails its sha256";
  if (!problem.empty()) {
    log::warn("cache entry {} is unusable ({}); recompiling", path, problem);
    return std::nullopt;
  }
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // last used: now
  CompiledKernel k;
  k.spec = spec;
  k.key = key;
  k.lowered_name = meta.value("lowered_name", "");
  k.cubin = std::move(*cubin);
  k.compile_ms = meta.value("compile_ms", 0.0);
  return k;
}

Status DiskCache::store(const CompiledKernel& k) const {
  remove_stale_temps(dir_);
  const std::string name = entry_name(k.spec.engine, k.key);
  const std::string final_path = dir_ + "/" + name;
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
  std::string tmpl = fmt::format("{}/.tmp-{}-XXXXXX", dir_, name);
  if (!::mkdtemp(tmpl.data()))
    return Status(StatusCode::CacheCorrupt, fmt::format("cannot create a temp directory in {}: {}", dir_,
                                                        std::strerror(errno)));
  const std::string tmp = tmpl;
  const std::pair<const char*, std::string> files[] = {
      {kSourceFile, generated_source(k.spec)}, {kCubinFile, k.cubin}, {kMetaFile, meta.dump(2) + "\n"}};
  for (const auto& [file, data] : files) {
    Status s = write_file_synced(tmp + "/" + file, data);
    if (!s.ok()) {
      remove_tree(tmp);
      return s;
    }
  }
  fsync_dir(tmp);
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    const int e = errno;
    if (e != EEXIST && e != ENOTEMPTY) {
      remove_tree(tmp);
      return Status(StatusCode::CacheCorrupt, fmt::format("cannot publish {}: {}", final_path, std::strerror(e)));
    }
    // Someone published this key first. Keep theirs if it is sound; if it is corrupt, repair it file by file
    // (each rename is atomic, so readers see old or new files and verify the checksum either way).
    if (!inspect(name).valid) {
      log::warn("repairing cache entry {}", final_path);
      for (const char* file : {kSourceFile, kCubinFile, kMetaFile})
        ::rename((tmp + "/" + file).c_str(), (final_path + "/" + file).c_str());
    }
    remove_tree(tmp);
  }
  fsync_dir(dir_);
  prune(max_bytes_);
  return Status::success();
}

std::vector<EntryInfo> DiskCache::list() const {
  std::vector<EntryInfo> out;
  for (const std::string& n : dir_names(dir_)) {
    if (n[0] == '.' || n == "quarantine") continue;
    out.push_back(inspect(n));
  }
  return out;
}

std::vector<EntryInfo> DiskCache::verify() const {
  std::vector<EntryInfo> bad;
  for (EntryInfo& e : list()) {
    if (e.valid) continue;
    const std::string q = dir_ + "/quarantine";
    ::mkdir(q.c_str(), 0700);
    const std::string dest = fmt::format("{}/{}.{}", q, e.name, now_seconds());
    if (::rename(e.path.c_str(), dest.c_str()) == 0) e.path = dest;
    bad.push_back(e);
  }
  return bad;
}

std::vector<EntryInfo> DiskCache::prune(int64_t max_bytes) const {
  remove_stale_temps(dir_);
  std::vector<EntryInfo> entries = list();
  int64_t total = 0;
  for (const EntryInfo& e : entries) total += e.bytes;
  std::sort(entries.begin(), entries.end(), [](const EntryInfo& a, const EntryInfo& b) {
    return a.last_used != b.last_used ? a.last_used < b.last_used : a.name < b.name;
  });
  std::vector<EntryInfo> evicted;
  for (const EntryInfo& e : entries) {
    if (total <= max_bytes) break;
    remove_entry(dir_, e.name);
    total -= e.bytes;
    evicted.push_back(e);
  }
  return evicted;
}

Result<int> DiskCache::clear() const {
  int n = 0;
  for (const std::string& name : dir_names(dir_)) {
    if (name == "quarantine") {
      remove_tree(dir_ + "/" + name);
      continue;
    }
    if (name[0] == '.') {
      remove_tree(dir_ + "/" + name);
      continue;
    }
    remove_entry(dir_, name);
    ++n;
  }
  return n;
}

}  // namespace rime::cache
