// rime/cache.hpp: the plan cache's JSON reports, which `rime cache <action> --json` prints and rime.cache returns.
#include "rime/cache.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "cache/disk_cache.hpp"
#include "cache/settings.hpp"
#include "json/checked.hpp"
#include "units/bytes.hpp"

namespace rime::cache_report {
namespace {

using cache::DiskCache;
using cache::EntryInfo;
using cache::EntryKind;
using nlohmann::json;

const char* kind_name(EntryKind k) {
  switch (k) {
    case EntryKind::Entry: return "entry";
    case EntryKind::OtherFormat: return "other-format";
    case EntryKind::Foreign: return "foreign";
  }
  return "?";
}

json entry_json(const EntryInfo& e) {
  return {{"name", e.name},           {"kind", kind_name(e.kind)},   {"key", e.key},
          {"engine", e.engine},       {"kernel", e.name_expression}, {"lowered_name", e.lowered_name},
          {"arch", e.arch},           {"bytes", e.bytes},            {"cubin_bytes", e.cubin_bytes},
          {"compile_ms", e.compile_ms}, {"created", e.created},      {"last_used", e.last_used},
          {"valid", e.valid},         {"problem", e.problem},        {"path", e.path}};
}

// A tuned choice: kind "tuned", its name (tuned/<key16>.json), path, bytes, modified, and the document under
// "tuned" (or a "problem" when it is not one).
json tuned_json(const DiskCache::TunedFile& t) {
  json j{{"kind", "tuned"}, {"name", std::string("tuned/") + t.name}, {"path", t.path}, {"bytes", t.bytes},
         {"modified", t.modified}};
  json doc = json::parse(t.text, nullptr, false);
  if (doc.is_object()) j["tuned"] = std::move(doc);
  else j["problem"] = "not a tuned choice's JSON";
  return j;
}

json entries_json(const std::vector<EntryInfo>& entries) {
  json j = json::array();
  for (const EntryInfo& e : entries) j.push_back(entry_json(e));
  return j;
}

// A foreign name's bytes that are not UTF-8 are replaced, as the CLI prints them.
std::string text_of(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// A path as one POSIX shell word: single quotes, each ' written as '\''.
std::string shell_quoted(const std::string& path) {
  std::string out = "'";
  for (char c : path) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

Result<const DiskCache*> disk() {
  const cache::Settings& s = cache::settings();
  if (!s.cache) return Status(StatusCode::CacheCorrupt, "no usable cache directory: " + s.disabled_why);
  return s.cache.get();
}

}  // namespace

Result<std::string> list() {
  Result<const DiskCache*> d = disk();
  if (!d.ok()) return d.status();
  json j = entries_json(d.value()->list());
  for (const auto& t : d.value()->list_tuned()) j.push_back(tuned_json(t));
  return text_of(j);
}

Result<std::string> show(const std::string& name_or_key) {
  Result<const DiskCache*> d = disk();
  if (!d.ok()) return d.status();
  for (const auto& t : d.value()->list_tuned())
    if (t.name == name_or_key || "tuned/" + t.name == name_or_key) return text_of(tuned_json(t));
  Result<EntryInfo> found = d.value()->find(name_or_key);
  if (!found.ok()) return found.status();
  return text_of(entry_json(found.value()));
}

Result<std::string> stats() {
  Result<const DiskCache*> d = disk();
  if (!d.ok()) return d.status();
  const DiskCache& cache = *d.value();
  const DiskCache::Stats st = cache.stats();
  return text_of({{"dir", cache.dir()}, {"entries", st.entries}, {"foreign", st.foreign}, {"bytes", st.bytes},
                  {"max_bytes", cache.max_bytes()}, {"invalid", st.invalid},
                  {"compile_ms_saved_per_cold_start", st.compile_ms}});
}

Result<std::string> verify(bool* clean) {
  Result<const DiskCache*> d = disk();
  if (!d.ok()) return d.status();
  int64_t checked = 0;
  bool blocked = false;
  json foreign = json::array();
  for (const EntryInfo& e : d.value()->list(false)) {
    checked += e.kind == EntryKind::Entry;
    if (e.kind != EntryKind::Foreign) continue;
    json f = entry_json(e);
    f["blocks_entry"] = e.blocks_entry;
    // rm unlinks a symlink itself, never what it points to; rime prints the command and never runs it.
    if (e.blocks_entry) f["remove_with"] = "rm -- " + shell_quoted(e.path);
    blocked |= e.blocks_entry;
    foreign.push_back(std::move(f));
  }
  const std::vector<EntryInfo> bad = d.value()->verify();
  if (clean) *clean = bad.empty() && !blocked;
  return text_of({{"checked", checked}, {"quarantined", entries_json(bad)}, {"foreign", std::move(foreign)}});
}

Result<std::string> prune(std::optional<int64_t> max_bytes) {
  Result<const DiskCache*> d = disk();
  if (!d.ok()) return d.status();
  const int64_t cap = max_bytes.value_or(d.value()->max_bytes());
  if (cap < 0) return Status(StatusCode::InvalidArgument, fmt::format("cache prune: max_bytes {} is negative", cap));
  return text_of({{"max_bytes", cap}, {"evicted", entries_json(d.value()->prune(cap))}});
}

Result<std::string> clear(bool tuned) {
  Result<const DiskCache*> d = disk();
  if (!d.ok()) return d.status();
  Result<int> n = tuned ? d.value()->clear_tuned() : d.value()->clear();
  if (!n.ok()) return n.status();
  return text_of({{tuned ? "removed_tuned" : "removed", n.value()}});
}

Result<int64_t> parse_size(std::string_view text, std::string_view field) {
  const std::optional<int64_t> v = parse_bytes(text);
  if (!v)
    return Status(StatusCode::InvalidArgument, fmt::format("{} {}: digits, optionally followed by K, M, G or T", field,
                                                           json_checked::quoted(text)));
  return *v;
}

}  // namespace rime::cache_report
