// The plan cache on hostile ground (issue 13, STYLE lesson 15): symlinks planted anywhere in the cache directory,
// a user's own files in it, a re-pointed RIME_CACHE_DIR, every field of meta.json mistyped, a directory in place
// of an entry's file. Nothing outside rime's own entries is ever removed, moved or read through a link, and bad
// entries are misses that are repaired or quarantined.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "cache/disk_cache.hpp"
#include "cache/get_kernel.hpp"
#include "catch.hpp"
#include "common/params.h"
#include "jit/kernel_spec.hpp"

using namespace rime;

namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/rime-hostile-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  return tmpl;
}

KernelSpec small_kernel(int d = 64) {
  return KernelSpec{"combine", "combine/kernel.cuh",
                    "rime_dev::combine_splits<" + std::to_string(RIME_T_BF16) + ", " + std::to_string(d) + ", 0, 4>",
                    "CombineParams", "sm_90a"};
}

// A directory of the user's with files in it: the thing that must survive.
std::string user_data(const std::string& base, const std::string& name) {
  const std::string d = base + "/" + name;
  REQUIRE(::mkdir(d.c_str(), 0700) == 0);
  std::ofstream(d + "/precious.txt") << "do not delete";
  REQUIRE(::mkdir((d + "/sub").c_str(), 0700) == 0);
  std::ofstream(d + "/sub/also.txt") << "nor this";
  return d;
}

bool user_data_intact(const std::string& d) {
  std::ifstream a(d + "/precious.txt"), b(d + "/sub/also.txt");
  std::string x, y;
  std::getline(a, x);
  std::getline(b, y);
  return x == "do not delete" && y == "nor this";
}

void set_old_mtime_nofollow(const std::string& path) {
  struct timespec times[2] = {{1000, 0}, {1000, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) == 0);
}

std::set<std::string> names(const std::string& dir) {
  std::set<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") out.insert(e->d_name);
    ::closedir(d);
  }
  return out;
}

// Every way the cache deletes or moves: a publish (with its stale-temp sweep and eviction), prune to zero,
// verify, clear.
void every_destructive_operation(const cache::DiskCache& disk) {
  clear_memory_cache();
  REQUIRE(get_kernel(small_kernel(64), &disk).ok());
  (void)disk.prune(0);
  (void)disk.verify();
  REQUIRE(disk.clear().ok());
  clear_memory_cache();
  REQUIRE(get_kernel(small_kernel(128), &disk).ok());
}

}  // namespace

TEST_CASE("symlinks planted in the cache directory are never followed", "[cache][hostile]") {
  const std::string base = temp_dir();
  const std::string dir = base + "/cache";
  REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  const std::string victim = user_data(base, "victim");
  // As a stale temp directory, a stale trash directory, an entry, quarantine/, and any hidden name.
  for (const char* name : {".tmp-combine.0123456789abcdef-x", ".trash-combine.0123456789abcdef-y",
                           "combine.0123456789abcdef", ".hidden", "quarantine"}) {
    const std::string link = dir + "/" + name;
    REQUIRE(::symlink(victim.c_str(), link.c_str()) == 0);
    set_old_mtime_nofollow(link);
  }
  cache::DiskCache disk = cache::DiskCache::open(dir).value();
  every_destructive_operation(disk);
  CHECK(user_data_intact(victim));
  CHECK(names(victim) == std::set<std::string>{"precious.txt", "sub"});
  // The links are still there, listed as foreign (the entry-named one never loaded).
  for (const char* name : {".tmp-combine.0123456789abcdef-x", "combine.0123456789abcdef", "quarantine"}) {
    struct stat st {};
    CHECK(::lstat((dir + "/" + name).c_str(), &st) == 0);
    CHECK(S_ISLNK(st.st_mode));
  }
  bool listed = false;
  for (const cache::EntryInfo& e : disk.list())
    if (e.name == "combine.0123456789abcdef") listed = e.kind == cache::EntryKind::Foreign && !e.valid;
  CHECK(listed);
}

TEST_CASE("a symlink with a kernel's own entry name is a miss, never loaded or replaced", "[cache][hostile]") {
  const std::string base = temp_dir();
  const std::string dir = base + "/cache";
  REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  // A real entry elsewhere (say another user's cache) and a link to it under our key's name.
  const std::string elsewhere = base + "/elsewhere";
  REQUIRE(::mkdir(elsewhere.c_str(), 0700) == 0);
  cache::DiskCache other = cache::DiskCache::open(elsewhere).value();
  clear_memory_cache();
  auto k = get_kernel(small_kernel(), &other);
  REQUIRE(k.ok());
  const std::string name = cache::DiskCache::entry_name("combine", k->kernel->key);
  REQUIRE(::symlink((elsewhere + "/" + name).c_str(), (dir + "/" + name).c_str()) == 0);
  cache::DiskCache disk = cache::DiskCache::open(dir).value();
  CHECK_FALSE(disk.load(small_kernel(), k->kernel->key).has_value());
  clear_memory_cache();
  auto again = get_kernel(small_kernel(), &disk);
  REQUIRE(again.ok());
  CHECK(again->origin == "compiled");
  struct stat st {};
  REQUIRE(::lstat((dir + "/" + name).c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));                           // left alone
  CHECK(other.list().size() == 1);                      // the real entry is untouched
  CHECK(other.list()[0].valid);
}

TEST_CASE("files that are not entries are never deleted", "[cache][hostile]") {
  const std::string dir = temp_dir();
  const std::string notes = user_data(dir, "notes");
  const std::string photos = user_data(dir, "photos");
  std::ofstream(dir + "/todo.txt") << "mine";
  const std::string lookalike = user_data(dir, "combine.0123456789abcdeg");  // 'g': not a hex digest
  cache::DiskCache disk = cache::DiskCache::open(dir).value();
  every_destructive_operation(disk);
  CHECK(user_data_intact(notes));
  CHECK(user_data_intact(photos));
  CHECK(user_data_intact(lookalike));
  std::ifstream todo(dir + "/todo.txt");
  std::string line;
  std::getline(todo, line);
  CHECK(line == "mine");
  int foreign = 0;
  for (const cache::EntryInfo& e : disk.list()) foreign += e.kind == cache::EntryKind::Foreign;
  CHECK(foreign == 4);
}

TEST_CASE("the cache directory is resolved once and its handle held", "[cache][hostile]") {
  const std::string base = temp_dir();
  const std::string a = base + "/a", b = base + "/b", link = base + "/link";
  REQUIRE(::mkdir(a.c_str(), 0700) == 0);
  const std::string b_data = user_data(base, "b");
  REQUIRE(::symlink(a.c_str(), link.c_str()) == 0);
  cache::DiskCache disk = cache::DiskCache::open(link).value();
  // Re-pointed after the check: every later operation still works in a.
  REQUIRE(::unlink(link.c_str()) == 0);
  REQUIRE(::symlink(b.c_str(), link.c_str()) == 0);
  clear_memory_cache();
  REQUIRE(get_kernel(small_kernel(), &disk).ok());
  REQUIRE(disk.clear().ok());
  CHECK(user_data_intact(b_data));
  CHECK(names(a).empty());  // the entry was published in a, then cleared there

  if (::geteuid() == 0) {  // only root can give a symlink to another user
    const std::string theirs = base + "/theirs";
    REQUIRE(::symlink(a.c_str(), theirs.c_str()) == 0);
    REQUIRE(::lchown(theirs.c_str(), 65534, 65534) == 0);
    Result<cache::DiskCache> refused = cache::DiskCache::open(theirs);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().message().find("is a symlink owned by uid 65534") != std::string::npos);
  }
}

TEST_CASE("every field of meta.json, mistyped, makes a miss that is repaired, never an exception", "[cache][hostile]") {
  const std::string dir = temp_dir();
  cache::DiskCache disk = cache::DiskCache::open(dir).value();
  clear_memory_cache();
  auto k = get_kernel(small_kernel(), &disk);
  REQUIRE(k.ok());
  const std::string meta_path = dir + "/" + cache::DiskCache::entry_name("combine", k->kernel->key) + "/meta.json";
  std::ifstream in(meta_path);
  const nlohmann::json original = nlohmann::json::parse(in);
  const std::vector<nlohmann::json> values = {nullptr, true, 1, 1.5, "1", nlohmann::json::array({1}),
                                              nlohmann::json::object({{"a", 1}})};
  int cases = 0;
  for (auto it = original.begin(); it != original.end(); ++it) {
    for (const nlohmann::json& v : values) {
      if (v.type() == it.value().type()) continue;
      if (it.value().is_number() && v.is_number()) continue;  // compile_ms may be written as an integer
      nlohmann::json meta = original;
      meta[it.key()] = v;
      std::ofstream(meta_path, std::ios::trunc) << meta.dump();
      INFO(it.key() << " = " << v.dump());
      // Fields rime does not read (header, nvrtc_options, ...) may hold anything; every field it reads must
      // make the entry unusable, and nothing may throw.
      const bool read_field = it.key() != "header" && it.key() != "params_type" && it.key() != "rime_version" &&
                              it.key() != "nvrtc_version" && it.key() != "nvrtc_options";
      CHECK(disk.load(small_kernel(), k->kernel->key).has_value() == !read_field);
      std::vector<cache::EntryInfo> listed = disk.list();
      REQUIRE(listed.size() == 1);
      CHECK(listed[0].valid == !read_field);
      if (read_field) CHECK_FALSE(listed[0].problem.empty());
      ++cases;
    }
  }
  CHECK(cases > 50);
  // The last mutation (a mistyped field) is repaired by the next compile of the key.
  nlohmann::json meta = original;
  meta["format_version"] = "1";
  std::ofstream(meta_path, std::ios::trunc) << meta.dump();
  clear_memory_cache();
  CHECK(get_kernel(small_kernel(), &disk)->origin == "compiled");
  clear_memory_cache();
  CHECK(get_kernel(small_kernel(), &disk)->origin == "disk");
  // A duplicated key in meta.json is refused too.
  std::ofstream(meta_path, std::ios::trunc) << "{\"format_version\": 1, \"format_version\": 1}";
  CHECK_FALSE(disk.load(small_kernel(), k->kernel->key).has_value());
}

TEST_CASE("a directory in place of an entry's file is repaired and quarantined", "[cache][hostile]") {
  const std::string dir = temp_dir();
  cache::DiskCache disk = cache::DiskCache::open(dir).value();
  clear_memory_cache();
  auto k = get_kernel(small_kernel(), &disk);
  REQUIRE(k.ok());
  const std::string entry = dir + "/" + cache::DiskCache::entry_name("combine", k->kernel->key);
  REQUIRE(::unlink((entry + "/kernel.cubin").c_str()) == 0);
  const std::string planted = user_data(entry, "kernel.cubin");
  clear_memory_cache();
  CHECK(get_kernel(small_kernel(), &disk)->origin == "compiled");
  clear_memory_cache();
  CHECK(get_kernel(small_kernel(), &disk)->origin == "disk");  // repaired
  // The planted directory was not deleted: it went to quarantine/ with its entry.
  bool kept = false;
  for (const std::string& q : names(dir + "/quarantine")) kept = kept || user_data_intact(dir + "/quarantine/" + q + "/kernel.cubin");
  CHECK(kept);
}

TEST_CASE("verify leaves other format versions alone, and clear a live writer's temp directory", "[cache][hostile]") {
  const std::string dir = temp_dir();
  cache::DiskCache disk = cache::DiskCache::open(dir).value();
  clear_memory_cache();
  auto k = get_kernel(small_kernel(), &disk);
  REQUIRE(k.ok());
  // Another format version's entry (as a future rime would write it, under its own key).
  const std::string other = dir + "/combine.ffffffffffffffff";
  REQUIRE(::mkdir(other.c_str(), 0700) == 0);
  std::ofstream(other + "/meta.json") << "{\"format_version\": 2, \"anything\": [1, 2]}";
  std::ofstream(other + "/kernel.cubin") << "future bytes";
  // A writer publishing right now.
  const std::string live = dir + "/.tmp-combine.eeeeeeeeeeeeeeee-live01";
  REQUIRE(::mkdir(live.c_str(), 0700) == 0);
  std::ofstream(live + "/kernel.cubin") << "half";
  CHECK(disk.verify().empty());
  bool listed = false;
  for (const cache::EntryInfo& e : disk.list())
    if (e.name == "combine.ffffffffffffffff") listed = e.kind == cache::EntryKind::OtherFormat;
  CHECK(listed);
  struct stat st {};
  CHECK(::stat((other + "/kernel.cubin").c_str(), &st) == 0);
  REQUIRE(disk.clear().ok());
  CHECK(::stat((live + "/kernel.cubin").c_str(), &st) == 0);  // younger than the stale limit: a live writer's
  set_old_mtime_nofollow(live);
  REQUIRE(disk.clear().ok());
  CHECK(::stat(live.c_str(), &st) != 0);  // stale now: removed
}
