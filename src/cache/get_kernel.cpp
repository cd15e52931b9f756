// get_kernel: memory -> disk -> NVRTC, with one compile per key across threads.
#include "cache/get_kernel.hpp"

#include <condition_variable>
#include <map>
#include <mutex>

#include "cache/disk_cache.hpp"
#include "cache/settings.hpp"
#include "log/log.hpp"

namespace rime {
namespace {

// One slot per key. The first thread to ask compiles; the others wait on the slot's condition variable. A
// failed compile is not cached: the next caller tries again.
struct Slot {
  bool busy = false;
  std::shared_ptr<const CompiledKernel> kernel;
  std::condition_variable done;
};

struct MemoryCache {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<Slot>> slots;
};

MemoryCache& memory() {
  static MemoryCache m;
  return m;
}

}  // namespace

void clear_memory_cache() {
  std::lock_guard<std::mutex> lock(memory().mu);
  memory().slots.clear();
}

Result<KernelLookup> get_kernel(const KernelSpec& spec) {
  return get_kernel(spec, cache::settings().cache.get());
}

Result<KernelLookup> get_kernel(const KernelSpec& spec, const cache::DiskCache* disk) {
  // The in-memory map is keyed by the specialization itself: within one process the embedded sources are fixed,
  // so the spec determines the key, and a hit costs a map lookup instead of hashing ~30 KB of sources.
  const std::string spec_id = spec.engine + '|' + spec.header + '|' + spec.name_expression + '|' +
                              spec.params_type + '|' + spec.arch;
  MemoryCache& m = memory();
  std::shared_ptr<Slot> slot;
  {
    std::unique_lock<std::mutex> lock(m.mu);
    auto& s = m.slots[spec_id];
    if (!s) s = std::make_shared<Slot>();
    slot = s;
    slot->done.wait(lock, [&] { return !slot->busy; });
    if (slot->kernel) return KernelLookup{slot->kernel, "memory"};
    slot->busy = true;
  }
  auto key = cache_key(spec);
  auto finish = [&](std::shared_ptr<const CompiledKernel> k) {
    std::lock_guard<std::mutex> lock(m.mu);
    slot->kernel = std::move(k);
    slot->busy = false;
    slot->done.notify_all();
  };

  if (!key.ok()) {
    finish(nullptr);
    return key.status();
  }
  auto disk_hit = [&]() -> std::shared_ptr<const CompiledKernel> {
    if (!disk) return nullptr;
    auto hit = disk->load(spec, key.value());
    if (!hit) return nullptr;
    log::debug("cache hit {} {} (disk)", spec.engine, key.value().substr(0, 16));
    return std::make_shared<const CompiledKernel>(std::move(*hit));
  };
  if (auto k = disk_hit()) {
    finish(k);
    return KernelLookup{k, "disk"};
  }
  // Across processes: the compile lock of this key, then the disk again (the process that held the lock may have
  // published it meanwhile), so that N processes warming the same graphs compile each kernel once.
  cache::CompileLock lock;
  if (disk) {
    lock = disk->lock_compile(spec.engine, key.value());
    if (auto k = disk_hit()) {
      finish(k);
      return KernelLookup{k, "disk"};
    }
  }
  // Logged before it starts, so that a cold start's compiles never look like a hang.
  log::info("compiling {} [{}] digest {} for {}", spec.engine, spec.name_expression, key.value().substr(0, 16),
            spec.arch);
  Result<CompiledKernel> compiled = compile_uncached(spec);
  if (!compiled.ok()) {
    finish(nullptr);
    return compiled.status();
  }
  log::info("compiled {} [{}] digest {} in {:.0f} ms for {}", spec.engine, spec.name_expression,
            key.value().substr(0, 16), compiled->compile_ms, spec.arch);
  if (disk) {
    Status s = disk->store(compiled.value());
    if (!s.ok()) log::warn("plan cache: {} (the kernel stays in memory)", s.message());
  }
  auto k = std::make_shared<const CompiledKernel>(std::move(compiled).value());
  finish(k);
  return KernelLookup{k, "compiled"};
}

}  // namespace rime
