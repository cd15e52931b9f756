#include "gpu/tier.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <mutex>

#include "rime/inspect/config.hpp"
#include "rime/inspect/rows.hpp"

namespace rime::test {
namespace {

std::mutex& coverage_mutex() {
  static std::mutex m;
  return m;
}
std::set<std::string>& coverage() {
  static std::set<std::string> items;
  return items;
}

const char* const kDtypeFamilies[] = {"Q/K/V FP8_E4M3", "Q/K/V FP8_E5M2", "Q/K/V BF16", "Q/K/V FP16"};
const char* const kOFormats[] = {"O FP8_E4M3", "O FP8_E5M2", "O BF16", "O FP16", "O NVFP4", "O MXFP8"};
const char* const kFeatures[] = {"split (combine)", "paged K/V", "ragged", "mask", "padding", "sink", "Stats",
                                 "Amax_O", "Amax_S"};

}  // namespace

Tier gpu_tier() {
  const char* t = std::getenv("RIME_GPU_TIER");
  return t && std::string(t) == "quick" ? Tier::Quick : Tier::Full;
}

const char* tier_name(Tier tier) { return tier == Tier::Quick ? "quick" : "full"; }

int tier_draws(const char* env, int full, int quick) {
  if (const char* v = std::getenv(env)) return std::max(1, std::atoi(v));
  return gpu_tier() == Tier::Quick ? quick : full;
}

void record_coverage(const Plan& plan) {
  const Facts& f = plan.facts();
  const Decision& d = plan.config().decision;
  std::vector<std::string> items = {"row " + d.row_id, "engine " + plan.config().derived.engine,
                                    "O " + f.o_format()};
  if (f.is_mxfp8) items.push_back("MXFP8 inputs");
  else if (f.q16_over_fp8_kv()) items.push_back("16-bit Q over FP8 K/V");
  else items.push_back(fmt::format("Q/K/V {}", to_string(f.q().dtype)));
  if (d.consumer_warpgroups) items.push_back(fmt::format("consumer warpgroups {}", d.consumer_warpgroups));
  if (d.split_kv > 1) items.push_back("split (combine)"), items.push_back("row combine");
  if (f.paged) items.push_back("paged K/V");
  if (f.ragged_q || f.ragged_kv) items.push_back("ragged");
  if (f.mask.causal || f.mask.window_left || f.mask.band_right) items.push_back("mask");
  if (f.mask.padding) items.push_back("padding");
  if (f.has_sink) items.push_back("sink");
  if (f.wants_stats) items.push_back("Stats");
  if (f.wants_amax_o) items.push_back("Amax_O");
  if (f.wants_amax_s) items.push_back("Amax_S");
  if (f.per_head_descales) items.push_back("per-head descales on " + plan.config().derived.engine);
  if (f.seq_start_q || f.seq_start_kv) items.push_back("per-sequence starts on " + plan.config().derived.engine);
  if (f.logit_softcap > 0) items.push_back("soft-capping on " + plan.config().derived.engine);
  if (f.D_qk == 80 || f.D_qk == 96) items.push_back(fmt::format("head dim {} on {}", f.D_qk, plan.config().derived.engine));
  std::lock_guard<std::mutex> lock(coverage_mutex());
  const char* file = std::getenv("RIME_GPU_COVERAGE_FILE");
  std::ofstream out;
  if (file) out.open(file, std::ios::app);
  for (const std::string& item : items)
    if (coverage().insert(item).second && out) out << item << "\n";
}

const std::set<std::string>& covered_so_far() { return coverage(); }

std::set<std::string> required_coverage(const DeviceDesc& device) {
  std::set<std::string> need(std::begin(kDtypeFamilies), std::end(kDtypeFamilies));
  need.insert(std::begin(kOFormats), std::end(kOFormats));
  need.insert(std::begin(kFeatures), std::end(kFeatures));
  for (const CapabilityRow& row : capability_rows()) {
    if (device.arch < row.sm_lo || device.arch > row.sm_hi) continue;
    if (row.needs_arch_specific && !device.arch_specific) continue;
    need.insert("row " + row.id);
    if (row.kind != "attention") continue;
    need.insert("engine " + row.engine);
    if (row.q16_over_fp8_kv) need.insert("16-bit Q over FP8 K/V");
    if (row.seq_start) need.insert("per-sequence starts on " + row.engine);
    if (row.softcap) need.insert("soft-capping on " + row.engine);
    for (const auto& [d_qk, d_v] : row.head_dims)
      if (d_qk == 80 || d_qk == 96) need.insert(fmt::format("head dim {} on {}", d_qk, row.engine));
    for (OpKind op : row.ops) {
      if (op == OpKind::SdpaMxfp8) need.insert("MXFP8 inputs");
      if (op == OpKind::SdpaFp8) need.insert("per-head descales on " + row.engine);
    }
    for (const RowTile& t : row.tiles)
      if (t.consumer_warpgroups) need.insert(fmt::format("consumer warpgroups {}", t.consumer_warpgroups));
  }
  return need;
}

bool report_coverage(const std::set<std::string>& covered, const DeviceDesc& device) {
  std::vector<std::string> missing;
  for (const std::string& item : required_coverage(device))
    if (!covered.count(item)) missing.push_back(item);
  std::string list;
  for (const std::string& item : covered) list += (list.empty() ? "" : "; ") + item;
  fmt::print("coverage on {}: {} items ran: {}\n", device.arch_name(), covered.size(), list);
  if (missing.empty()) {
    fmt::print("coverage: every row, engine, dtype family, output kind and feature the rows serve here ran\n");
    return true;
  }
  std::string m;
  for (const std::string& item : missing) m += (m.empty() ? "" : "; ") + item;
  fmt::print("coverage: MISSING {}\n", m);
  return false;
}

std::set<std::string> read_coverage_file(const std::string& path) {
  std::set<std::string> items;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) items.insert(line);
  return items;
}

}  // namespace rime::test
