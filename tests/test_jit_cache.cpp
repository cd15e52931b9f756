// JIT and plan cache (no GPU): every specialization compiles, and the disk cache survives races, corruption,
// foreign versions, unusable directories and killed compiles.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>

#include <cstdlib>
#include <fstream>
#include <future>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cache/disk_cache.hpp"
#include "cache/settings.hpp"
#include "catch.hpp"
#include "common/params.h"
#include "rime/inspect/config.hpp"
#include "cache/get_kernel.hpp"
#include "jit/kernel_spec.hpp"
#include "rime/json.hpp"
#include "rime/plan.hpp"
#include "example_plans.hpp"
#include "spec_graph.hpp"
#include "test_paths.hpp"

using namespace rime;
using test::h200_plan;
using test::plan_on;

namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/rime-test-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  return tmpl;
}

// A specialization by hand, for the cache tests (which need cheap, known kernels).
KernelSpec attention_spec(int in, int out, int d, int tile, int features, const std::string& arch, int kv = 64) {
  return KernelSpec{"sdpa_mma", "sdpa_mma/kernel.cuh",
                    fmt::format("rime_dev::sdpa_mma_fwd<{}, {}, {}, {}, {}, {}, {}>", in, out, d, d, tile, kv, features),
                    "SdpaParams", arch};
}

KernelSpec combine(int out, int d, int features, const std::string& arch, int warps = 4) {
  return KernelSpec{"combine", "combine/kernel.cuh",
                    fmt::format("rime_dev::combine_splits<{}, {}, {}, {}>", out, d, features, warps), "CombineParams",
                    arch};
}

// Compiles on two threads (this machine has two cores) and reports every failure with its log.
void compile_all(const std::vector<KernelSpec>& specs) {
  std::vector<std::future<Result<CompiledKernel>>> running;
  for (size_t i = 0; i < specs.size(); i += 2) {
    running.clear();
    for (size_t j = i; j < std::min(specs.size(), i + 2); ++j)
      running.push_back(std::async(std::launch::async, [&specs, j] { return compile_uncached(specs[j]); }));
    for (size_t j = 0; j < running.size(); ++j) {
      Result<CompiledKernel> k = running[j].get();
      INFO(specs[i + j].name_expression << " for " << specs[i + j].arch << ": " << k.status().to_string());
      CHECK(k.ok());
      if (k.ok()) CHECK(k->cubin.size() > 1000);
    }
  }
}

}  // namespace

namespace {

// The specializations of every plan the rows can make on `arch`, derived (not listed by hand): for each attention
// row, input dtype, head dims and tile, the unsplit form with every feature the row serves and the split form
// (with the combine); for each O format, the plain form. `sampled` keeps one tile, dtype and head-dim pair per
// row (for the other archs).
// A row that serves only a 16-bit Q over FP8 K/V gets one: BF16 over E4M3, FP16 over E5M2 (both widenings).
std::optional<DataType> q16_of(const CapabilityRow& row, DataType in) {
  if (!row.only_q16_over_fp8_kv) return std::nullopt;
  return in == DataType::FP8_E5M2 ? DataType::FP16 : DataType::BF16;
}

std::vector<KernelSpec> derived_specializations(const DeviceDesc& device, bool sampled) {
  std::vector<KernelSpec> specs;
  // Adds the plan's kernels. Every tile a row lists for a head dim must derive (the rows are what the engines
  // serve).
  auto add_plan = [&](const CapabilityRow& row, const test::SpecCase& c, const RowTile& tile, int split) {
    INFO("row " << row.id << ": " << c.describe() << " tile " << tile.tile.q << "x" << tile.tile.kv << " ("
                << tile.consumer_warpgroups << " consumer warpgroups) split " << split << " on " << device.arch_name());
    Result<Facts> f = analyze(test::spec_graph(c), device);
    REQUIRE(f.ok());
    REQUIRE(match_row(row, f.value()).accepted);
    Decision d;
    d.row_id = row.id;
    d.tile = tile.tile;
    d.consumer_warpgroups = tile.consumer_warpgroups;
    d.split_kv = split;
    Result<Derived> derived = derive(f.value(), d);
    INFO(derived.status().to_string());
    REQUIRE(derived.ok());
    for (const KernelStage& s : derived->stages)
      if (std::find(specs.begin(), specs.end(), s.spec) == specs.end()) specs.push_back(s.spec);
    return true;
  };
  for (const CapabilityRow& row : capability_rows()) {
    if (row.kind != "attention" || device.arch < row.sm_lo || device.arch > row.sm_hi) continue;
    if (row.needs_arch_specific && !device.arch_specific) continue;
    // The O format each input dtype gets in the feature-complete forms: the first of the row's O formats that the
    // op takes with it (an sdpa O is 16-bit, an FP8 op's may be anything the row lists).
    for (DataType in : row.input_dtypes) {
      for (const auto& [d_qk, d_v] : row.head_dims) {
        int derived_tiles = 0;
        for (const RowTile& tile : row.tiles_for(d_qk, d_v)) {
          test::SpecCase c;
          c.op = row.ops.front();
          c.in = in;
          c.q = q16_of(row, in);
          c.q_quantization = row.q_quantization;
          c.d_qk = d_qk;
          c.d_v = d_v;
          c.o_format = row.o_formats.front();
          c.features = true;
          c.amax_s = row.amax_s;
          if (!add_plan(row, c, tile, 1)) continue;
          ++derived_tiles;
          if (row.writes_split_partials(d_qk, d_v)) {
            c.amax_s = false;  // Amax_S makes split ineligible
            for (int s : row.split_counts)
              if (s > 1) {
                add_plan(row, c, tile, s);
                break;
              }
          }
          // Per-sequence starts and soft-capping: specializations of their own, unsplit and split.
          auto add_variant = [&](bool starts, bool softcap) {
            test::SpecCase v = c;
            v.starts = starts;
            v.softcap = softcap;
            v.amax_s = row.amax_s;
            add_plan(row, v, tile, 1);
            if (!row.writes_split_partials(d_qk, d_v)) return;
            v.amax_s = false;
            for (int s : row.split_counts)
              if (s > 1) {
                add_plan(row, v, tile, s);
                break;
              }
          };
          if (row.seq_start) add_variant(true, false);
          if (row.softcap) add_variant(false, true);
          if (sampled) break;
        }
        INFO("row " << row.id << " " << to_string(in) << " D " << d_qk);
        CHECK(derived_tiles > 0);  // some tile of the row serves every dtype and head dim it lists
        if (sampled) break;
      }
      if (sampled) break;
    }
    for (const std::string& o : row.o_formats) {
      test::SpecCase c;
      c.op = row.ops.front();
      c.in = row.input_dtypes.front();
      c.q = q16_of(row, c.in);
      c.q_quantization = row.q_quantization;
      c.d_qk = row.head_dims.front().first;
      c.d_v = row.head_dims.front().second;
      c.o_format = o;
      for (const RowTile& tile : row.tiles_for(c.d_qk, c.d_v))
        if (add_plan(row, c, tile, 1)) break;
      if (sampled) break;
    }
  }
  return specs;
}

}  // namespace

TEST_CASE("every specialization the rows can choose compiles for sm_90a", "[jit][slow]") {
  const std::vector<KernelSpec> specs = derived_specializations(DeviceDesc::h200(), false);
  // Every engine and role appears: the list is derived, so check it is not empty of any of them.
  for (const char* header : {"sdpa_mma/kernel.cuh", "sdpa_sm90/kernel.cuh", "combine/kernel.cuh"})
    CHECK(std::any_of(specs.begin(), specs.end(), [&](const KernelSpec& s) { return s.header == header; }));
  fmt::print("compiling {} specializations derived from the rows for sm_90a\n", specs.size());
  compile_all(specs);
}

// Hidden (run by name): the list tools/sass/compare.py --specs reads, one `SPEC HEADER<tab>NAME<tab>PARAMS` line each.
TEST_CASE("the specializations the rows can choose for sm_90a, listed", "[.specializations]") {
  for (const KernelSpec& s : derived_specializations(DeviceDesc::h200(), false))
    fmt::print("SPEC {}\t{}\t{}\n", s.header, s.name_expression, s.params_type);
}

TEST_CASE("the portable engines compile for sm_80, sm_89, sm_100a and sm_120a", "[jit][slow]") {
  std::vector<KernelSpec> specs;
  for (const char* arch : {"sm_80", "sm_89", "sm_100a", "sm_120a"}) {
    std::vector<KernelSpec> more = derived_specializations(DeviceDesc::from_arch(arch, 132).value(), true);
    CHECK_FALSE(more.empty());
    specs.insert(specs.end(), more.begin(), more.end());
  }
  compile_all(specs);
}

TEST_CASE("the checked-indices kernel compiles for sm_80 and sm_90a", "[jit]") {
  for (const char* arch : {"sm_80", "sm_90a"})
    for (int paged : {0, 1}) {
      KernelSpec spec{"index_check", "common/index_check.cuh", fmt::format("rime_dev::check_indices<{}>", paged),
                      "IndexCheckParams", arch};
      Result<CompiledKernel> k = compile_uncached(spec);
      INFO(arch << " paged " << paged << ": " << (k.ok() ? "" : k.status().message()));
      REQUIRE(k.ok());
      CHECK_FALSE(k->cubin.empty());
    }
}

TEST_CASE("the padding-mask kernel compiles for sm_80 and sm_90a at every element size", "[jit]") {
  for (const char* arch : {"sm_80", "sm_90a"})
    for (int bytes : {1, 2, 4, 8}) {
      KernelSpec spec{"padding_mask", "common/padding_mask.cuh",
                      fmt::format("rime_dev::padding_mask_sequences<{}>", bytes), "PaddingMaskParams", arch};
      Result<CompiledKernel> k = compile_uncached(spec);
      INFO(arch << " bytes " << bytes << ": " << (k.ok() ? "" : k.status().message()));
      REQUIRE(k.ok());
      CHECK_FALSE(k->cubin.empty());
    }
}

TEST_CASE("the kernels' ragged specializations compile", "[jit][ragged]") {
  // Ragged Q and K/V with padding, causal, split (and paged K/V under a ragged Q) on the mma.sync engine, the
  // warp-specialized engine and the combine: a sample of what the rows with `ragged` select.
  constexpr int kRagged = RIME_F_PADDING | RIME_F_RAGGED_Q | RIME_F_RAGGED_KV | RIME_F_MASK | RIME_F_STATS;
  const std::vector<KernelSpec> specs = {
      attention_spec(RIME_T_E4M3, RIME_T_BF16, 128, 16, kRagged | RIME_F_SPLIT, "sm_90a", 32),
      attention_spec(RIME_T_BF16, RIME_T_BF16, 64, 64, kRagged, "sm_90a"),
      attention_spec(RIME_T_E4M3, RIME_T_BF16, 128, 16,
                     RIME_F_PADDING | RIME_F_RAGGED_Q | RIME_F_PAGED | RIME_F_SPLIT | RIME_F_STATS, "sm_90a", 32),
      // Balanced split-KV (the persistent FP8 decode over per-sequence lengths; sdpa_mma's derive selects it for
      // FP8 only), ragged and padded, the one- and two-warp decode tiles, on both arches.
      attention_spec(RIME_T_E4M3, RIME_T_BF16, 128, 16,
                     RIME_F_PADDING | RIME_F_RAGGED_Q | RIME_F_PAGED | RIME_F_SPLIT | RIME_F_STATS | RIME_F_BALANCED,
                     "sm_90a", 32),
      attention_spec(RIME_T_E5M2, RIME_T_BF16, 128, 32,
                     RIME_F_PADDING | RIME_F_MASK | RIME_F_SPLIT | RIME_F_STATS | RIME_F_BALANCED, "sm_89", 32),
      KernelSpec{"sdpa_sm90", "sdpa_sm90/kernel.cuh",
                 fmt::format("rime_dev::sdpa_sm90_fwd<{}, {}, 128, 128, {}, 2>", RIME_T_E4M3, RIME_T_E4M3, kRagged),
                 "__grid_constant__ SdpaSm90Params", "sm_90a"},
      // Three consumer warpgroups (the engine gives them to unmasked FP8 graphs; padding and ragged are features
      // of the same kernel).
      KernelSpec{"sdpa_sm90", "sdpa_sm90/kernel.cuh",
                 fmt::format("rime_dev::sdpa_sm90_fwd<{}, {}, 128, 128, {}, 3>", RIME_T_E4M3, RIME_T_E4M3,
                             kRagged & ~RIME_F_MASK),
                 "__grid_constant__ SdpaSm90Params", "sm_90a"},
      KernelSpec{"sdpa_sm90", "sdpa_sm90/kernel.cuh",
                 fmt::format("rime_dev::sdpa_sm90_fwd<{}, {}, 128, 128, {}, 2>", RIME_T_BF16, RIME_T_BF16, kRagged),
                 "__grid_constant__ SdpaSm90Params", "sm_90a"},
      combine(RIME_T_BF16, 128, RIME_F_PADDING | RIME_F_RAGGED_Q | RIME_F_STATS, "sm_90a"),
  };
  for (const KernelSpec& spec : specs) {
    Result<CompiledKernel> k = compile_uncached(spec);
    INFO(spec.name_expression << ": " << (k.ok() ? "" : k.status().message()));
    CHECK(k.ok());
  }
}

TEST_CASE("the 16-bit-Q-over-FP8-K/V specializations compile", "[jit]") {
  // Computed in FP16 (kIn = FP16) with RIME_F_KV_FP8: E4M3 and E5M2 K/V, FP16 and BF16 Q; decode (16x32, paged,
  // split) and prefill (64x64, 128x64, causal) tiles, sm_89 and sm_90a. Row sdpa_mma_fp8 selects them; the GPU
  // runs them in [q16], [paged] and [ragged] (docs/testing.md).
  constexpr int kMixed = RIME_F_KV_FP8 | RIME_F_STATS;
  const std::vector<KernelSpec> specs = {
      attention_spec(RIME_T_FP16, RIME_T_BF16, 128, 16, kMixed | RIME_F_Q_BF16 | RIME_F_PADDING | RIME_F_PAGED |
                                                            RIME_F_SPLIT, "sm_90a", 32),
      attention_spec(RIME_T_FP16, RIME_T_FP16, 128, 16, kMixed | RIME_F_KV_E5M2, "sm_89", 32),
      attention_spec(RIME_T_FP16, RIME_T_BF16, 128, 64, kMixed | RIME_F_Q_BF16 | RIME_F_MASK, "sm_90a"),
      attention_spec(RIME_T_FP16, RIME_T_E4M3, 64, 128, kMixed | RIME_F_Q_BF16 | RIME_F_SCALE_O, "sm_90a"),
      attention_spec(RIME_T_FP16, RIME_T_BF16, 256, 16, kMixed | RIME_F_Q_BF16 | RIME_F_KV_E5M2, "sm_90a", 64),
  };
  for (const KernelSpec& spec : specs) {
    Result<CompiledKernel> k = compile_uncached(spec);
    INFO(spec.name_expression << ": " << (k.ok() ? "" : k.status().message()));
    CHECK(k.ok());
  }
}

TEST_CASE("a compile error returns CompileFailed with the log and the kernel name", "[jit]") {
  KernelSpec bad = attention_spec(RIME_T_E4M3, RIME_T_E4M3, 80, 64, 0, "sm_90a");  // FP8 head dim 80: static_assert
  Result<CompiledKernel> k = compile_uncached(bad);
  REQUIRE_FALSE(k.ok());
  CHECK(k.status().code() == StatusCode::CompileFailed);
  CHECK(k.status().message().find("rime_dev::sdpa_mma_fwd<2, 2, 80, 80, 64, 64, 0>") != std::string::npos);
  CHECK(k.status().message().find("head dims must be whole 32-byte k steps") != std::string::npos);
}

TEST_CASE("the cache key depends on content, never on location", "[jit]") {
  KernelSpec a = attention_spec(RIME_T_BF16, RIME_T_BF16, 128, 64, 0, "sm_90a");
  KernelSpec b = a;
  b.arch = "sm_89";
  CHECK(cache_key(a).value() != cache_key(b).value());
  CHECK(cache_key(a).value() == cache_key(a).value());
  CHECK(cache_key(a).value().size() == 64);
  CHECK(generated_source(a).find('/') == generated_source(a).find("// "));  // the only '/' are comment slashes
  CHECK(generated_source(a).find("#include \"sdpa_mma/kernel.cuh\"") != std::string::npos);
}

TEST_CASE("disk cache: store, hit, truncated or bit-flipped cubin, foreign format version", "[cache]") {
  const std::string dir = temp_dir();
  cache::DiskCache disk = cache::DiskCache::open(dir).value();
  clear_memory_cache();
  const KernelSpec spec = combine(RIME_T_BF16, 64, 0, "sm_90a");
  auto first = get_kernel(spec, &disk);
  REQUIRE(first.ok());
  CHECK(first->origin == "compiled");
  const std::string entry = dir + "/" + cache::DiskCache::entry_name(spec.engine, first->kernel->key);
  struct stat st {};
  REQUIRE(::stat((entry + "/kernel.cubin").c_str(), &st) == 0);
  CHECK(::stat((entry + "/kernel.cu").c_str(), &st) == 0);
  CHECK(::stat((entry + "/meta.json").c_str(), &st) == 0);

  clear_memory_cache();
  auto hit = get_kernel(spec, &disk);
  REQUIRE(hit.ok());
  CHECK(hit->origin == "disk");
  CHECK(hit->kernel->cubin == first->kernel->cubin);
  CHECK(get_kernel(spec, &disk)->origin == "memory");

  SECTION("truncated") { REQUIRE(::truncate((entry + "/kernel.cubin").c_str(), 64) == 0); }
  SECTION("bit-flipped") {
    std::fstream f(entry + "/kernel.cubin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    char c = 0;
    f.read(&c, 1);
    f.seekp(200);
    c ^= 0x10;
    f.write(&c, 1);
  }
  SECTION("another format version") {
    std::ifstream in(entry + "/meta.json");
    nlohmann::json meta = nlohmann::json::parse(in);
    meta["format_version"] = 99;
    std::ofstream(entry + "/meta.json") << meta.dump();
  }
  clear_memory_cache();
  CHECK_FALSE(disk.load(spec, first->kernel->key).has_value());  // a miss, never a misread
  auto again = get_kernel(spec, &disk);
  REQUIRE(again.ok());
  CHECK(again->origin == "compiled");
  CHECK(again->kernel->cubin.size() > 1000);
  // The entry was repaired in place: the next process gets a disk hit.
  clear_memory_cache();
  CHECK(get_kernel(spec, &disk)->origin == "disk");
  CHECK(disk.verify().empty());
}

TEST_CASE("8 processes compiling the same key at once leave exactly one valid entry", "[cache]") {
  const std::string dir = temp_dir();
  const KernelSpec spec = combine(RIME_T_FP16, 128, RIME_F_STATS, "sm_90a");
  std::vector<pid_t> children;
  for (int i = 0; i < 8; ++i) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      cache::DiskCache disk = cache::DiskCache::open(dir).value();
      clear_memory_cache();
      auto k = get_kernel(spec, &disk);
      ::_exit(k.ok() && !k->kernel->cubin.empty() ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  cache::DiskCache disk = cache::DiskCache::open(dir).value();
  auto entries = disk.list();
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].valid);
  int temps = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) temps += std::string(e->d_name).rfind(".tmp-", 0) == 0;
    ::closedir(d);
  }
  CHECK(temps == 0);
}

TEST_CASE("4 processes warming the same kernel compile it once: the others wait on its lock and load it", "[cache]") {
  const std::string dir = temp_dir();
  const KernelSpec spec = attention_spec(RIME_T_E4M3, RIME_T_BF16, 128, 64, RIME_F_STATS | RIME_F_MASK, "sm_90a");
  std::vector<pid_t> children;
  for (int i = 0; i < 4; ++i) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      cache::DiskCache disk = cache::DiskCache::open(dir).value();
      clear_memory_cache();
      auto k = get_kernel(spec, &disk);
      ::_exit(!k.ok() ? 1 : k->origin == "compiled" ? 10 : k->origin == "disk" ? 11 : 2);
    }
    children.push_back(pid);
  }
  int compiled = 0, loaded = 0;
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    compiled += WEXITSTATUS(status) == 10;
    loaded += WEXITSTATUS(status) == 11;
  }
  CHECK(compiled == 1);
  CHECK(loaded == 3);
  // The lock file is rime's: not listed as foreign, removed by clear.
  cache::DiskCache disk = cache::DiskCache::open(dir).value();
  REQUIRE(disk.list().size() == 1);
  CHECK(disk.list()[0].kind == cache::EntryKind::Entry);
  CHECK(disk.clear().value() == 1);
  int left = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) left += e->d_name[0] != '.' || std::string(e->d_name).rfind(".lock-", 0) == 0;
    ::closedir(d);
  }
  CHECK(left == 0);
}

TEST_CASE("a compile killed midway leaves nothing that blocks or corrupts the next run", "[cache]") {
  const std::string dir = temp_dir();
  const KernelSpec spec = attention_spec(RIME_T_BF16, RIME_T_BF16, 64, 64, RIME_F_STATS, "sm_90a");
  // What a process killed while publishing leaves: a half-written temp directory.
  const std::string key = cache_key(spec).value();
  const std::string temp = dir + "/.tmp-" + cache::DiskCache::entry_name(spec.engine, key) + "-dead01";
  REQUIRE(::mkdir(temp.c_str(), 0700) == 0);
  std::ofstream(temp + "/kernel.cubin") << "partial";
  // And a process killed during the NVRTC compile itself.
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    cache::DiskCache disk = cache::DiskCache::open(dir).value();
    (void)get_kernel(spec, &disk);
    ::_exit(0);
  }
  ::usleep(150 * 1000);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);

  cache::DiskCache disk = cache::DiskCache::open(dir).value();
  clear_memory_cache();
  auto k = get_kernel(spec, &disk);
  REQUIRE(k.ok());
  auto entries = disk.list();
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].valid);
  clear_memory_cache();
  CHECK(get_kernel(spec, &disk)->origin == "disk");
}

TEST_CASE("an unusable cache directory is refused with a reason", "[cache]") {
  const std::string base = temp_dir();
  auto resolve_with = [](const std::string& d) {
    ::setenv("RIME_CACHE_DIR", d.c_str(), 1);
    cache::Settings s = cache::resolve_settings();
    ::unsetenv("RIME_CACHE_DIR");
    return s;
  };
  const std::string open_dir = base + "/world";
  REQUIRE(::mkdir(open_dir.c_str(), 0700) == 0);
  REQUIRE(::chmod(open_dir.c_str(), 0777) == 0);
  cache::Settings s = resolve_with(open_dir);
  CHECK(s.dir.empty());
  CHECK(s.disabled_why.find("lets other users write it") != std::string::npos);

  const std::string file = base + "/file";
  std::ofstream(file) << "x";
  s = resolve_with(file + "/cache");
  CHECK(s.dir.empty());
  CHECK(s.disabled_why.find("cannot create") != std::string::npos);

  if (::geteuid() == 0) {  // only root can give a directory away
    const std::string foreign = base + "/foreign";
    REQUIRE(::mkdir(foreign.c_str(), 0700) == 0);
    REQUIRE(::chown(foreign.c_str(), 65534, 65534) == 0);
    s = resolve_with(foreign);
    CHECK(s.disabled_why.find("not by this user") != std::string::npos);
  }
  ::setenv("RIME_CACHE_DISABLE", "1", 1);
  s = cache::resolve_settings();
  ::unsetenv("RIME_CACHE_DISABLE");
  CHECK(s.dir.empty());

  s = resolve_with(base + "/fresh/nested");
  CHECK(s.dir == base + "/fresh/nested");
  struct stat st {};
  REQUIRE(::stat(s.dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
}

TEST_CASE("an unusable cache directory degrades to memory with one warning", "[cache]") {
  const std::string base = temp_dir();
  const std::string open_dir = base + "/world";
  REQUIRE(::mkdir(open_dir.c_str(), 0777) == 0);
  REQUIRE(::chmod(open_dir.c_str(), 0777) == 0);
  const std::string log = base + "/stderr";
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setenv("RIME_CACHE_DIR", open_dir.c_str(), 1);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 2);
    clear_memory_cache();
    bool ok = get_kernel(combine(RIME_T_BF16, 64, 0, "sm_89")).ok() &&
              get_kernel(combine(RIME_T_FP16, 64, 0, "sm_89")).ok();
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WEXITSTATUS(status) == 0);
  std::ifstream in(log);
  std::string line;
  int warnings = 0;
  while (std::getline(in, line)) warnings += line.find("warning") != std::string::npos;
  CHECK(warnings == 1);
  DIR* d = ::opendir(open_dir.c_str());
  int entries = 0;
  while (dirent* e = ::readdir(d)) entries += e->d_name[0] != '.';
  ::closedir(d);
  CHECK(entries == 0);  // nothing was written into the refused directory
}

TEST_CASE("prune evicts least-recently-used entries", "[cache]") {
  const std::string dir = temp_dir();
  cache::DiskCache disk = cache::DiskCache::open(dir).value();
  clear_memory_cache();
  std::vector<KernelSpec> specs = {combine(RIME_T_BF16, 64, 0, "sm_90a"), combine(RIME_T_BF16, 128, 0, "sm_90a"),
                                   combine(RIME_T_BF16, 256, 0, "sm_90a")};
  int64_t t = 1000;
  for (const KernelSpec& s : specs) {
    auto k = get_kernel(s, &disk);
    REQUIRE(k.ok());
    // Fixed, increasing last-used times: the first is the oldest.
    const std::string path = dir + "/" + cache::DiskCache::entry_name(s.engine, k->kernel->key);
    struct timespec times[2] = {{t, 0}, {t, 0}};
    ::utimensat(AT_FDCWD, path.c_str(), times, 0);
    t += 100;
  }
  auto entries = disk.list();
  REQUIRE(entries.size() == 3);
  int64_t total = 0;
  for (const auto& e : entries) total += e.bytes;
  auto evicted = disk.prune(total - 1);
  REQUIRE(evicted.size() == 1);
  CHECK(evicted[0].last_used == 1000);
  CHECK(disk.list().size() == 2);
  CHECK(disk.clear().value() == 2);
  CHECK(disk.list().empty());
}

// Run by the test below in a process of its own, before anything has used the plan cache.
TEST_CASE("set_cache_dir in a fresh process (run by the next test)", "[.set_cache_dir_child]") {
  const char* dir = std::getenv("RIME_TEST_CHOSEN_CACHE_DIR");
  REQUIRE(dir);
  REQUIRE(set_cache_dir(dir).ok());
  Result<Plan> plan = h200_plan("fp8_decode_gqa");
  REQUIRE(plan.ok());
  // Too late now: the cache is in use.
  const Status again = set_cache_dir("/tmp");
  CHECK(again.code() == StatusCode::InvalidArgument);
  CHECK(again.message().find(std::string("already in use (at '") + dir + "')") != std::string::npos);
}

TEST_CASE("set_cache_dir refuses a path holding a NUL byte, which a C string would cut", "[cache]") {
  const Status s = set_cache_dir(std::string("cache\0dir", 9));
  CHECK(s.code() == StatusCode::InvalidArgument);
  CHECK(s.message().find("NUL byte at offset 5") != std::string::npos);
  CHECK(set_cache_dir("").code() == StatusCode::InvalidArgument);
}

TEST_CASE("set_cache_dir before the first plan puts the plan cache there and is refused after it", "[cache]") {
  const std::string dir = temp_dir() + "/chosen";
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setenv("RIME_TEST_CHOSEN_CACHE_DIR", dir.c_str(), 1);
    ::setenv("RIME_CACHE_DIR", "/nonexistent/not-this-one", 1);  // the chosen directory wins over the environment
    ::execl("/proc/self/exe", "rime_tests", "[.set_cache_dir_child]", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  cache::DiskCache disk = cache::DiskCache::open(dir).value();
  CHECK(disk.list().size() == 2);  // the decode plan's attention kernel and its combine
}
