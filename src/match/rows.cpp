// Reads the embedded capability rows. The rows are data; this file only parses them.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "embedded_files.hpp"
#include "rime/inspect/rows.hpp"

namespace rime {

namespace {
using nlohmann::json;

std::optional<Layout> parse_layout(const std::string& s) {
  for (Layout l : {Layout::Bhsd, Layout::Bshd, Layout::DenseOther, Layout::Strided})
    if (to_string(l) == s) return l;
  return std::nullopt;
}

std::vector<std::pair<int64_t, int64_t>> pairs(const json& j) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& p : j) out.emplace_back(p.at(0).get<int64_t>(), p.at(1).get<int64_t>());
  return out;
}

const std::vector<std::string> kMaskFeatures = {"causal", "bottom_right", "window", "band", "padding"};
const std::vector<std::string> kOFormats = {"FP8_E4M3", "FP8_E5M2", "BF16", "FP16", "FP32", "NVFP4", "MXFP8"};
}  // namespace

Result<CapabilityRow> parse_capability_row(const std::string& text) {
  try {
    json j = json::parse(text);
    CapabilityRow r;
    r.id = j.at("id").get<std::string>();
    r.engine = j.at("engine").get<std::string>();
    r.kind = j.at("kind").get<std::string>();
    if (r.kind != "attention" && r.kind != "combine")
      return Status(StatusCode::Internal, fmt::format("row {}: kind '{}'", r.id, r.kind));
    r.preference = j.at("preference").get<int>();
    r.description = j.at("description").get<std::string>();
    r.sm_lo = j.at("arch").at("lo").get<int>();
    r.sm_hi = j.at("arch").at("hi").get<int>();
    r.needs_arch_specific = j.at("arch").at("needs_arch_specific").get<bool>();
    for (const auto& s : j.at("ops")) {
      auto op = parse_op_kind(s.get<std::string>());
      if (!op) return Status(StatusCode::Internal, fmt::format("row {}: op '{}'", r.id, s.get<std::string>()));
      r.ops.push_back(*op);
    }
    for (const auto& s : j.at("input_dtypes")) {
      auto t = parse_data_type(s.get<std::string>());
      if (!t) return Status(StatusCode::Internal, fmt::format("row {}: dtype '{}'", r.id, s.get<std::string>()));
      r.input_dtypes.push_back(*t);
    }
    for (const auto& s : j.at("o_formats")) {
      r.o_formats.push_back(s.get<std::string>());
      if (std::find(kOFormats.begin(), kOFormats.end(), r.o_formats.back()) == kOFormats.end())
        return Status(StatusCode::Internal, fmt::format("row {}: O format '{}'", r.id, r.o_formats.back()));
    }
    r.head_dims = pairs(j.at("head_dims"));
    for (const auto& s : j.at("masks")) {
      r.masks.push_back(s.get<std::string>());
      if (std::find(kMaskFeatures.begin(), kMaskFeatures.end(), r.masks.back()) == kMaskFeatures.end())
        return Status(StatusCode::Internal, fmt::format("row {}: mask '{}'", r.id, r.masks.back()));
    }
    for (const auto& s : j.at("layouts")) {
      auto l = parse_layout(s.get<std::string>());
      if (!l) return Status(StatusCode::Internal, fmt::format("row {}: layout '{}'", r.id, s.get<std::string>()));
      r.layouts.push_back(*l);
    }
    r.needs_aligned16 = j.at("needs_aligned16").get<bool>();
    r.sink = j.at("sink").get<bool>();
    r.stats = j.at("stats").get<bool>();
    r.amax_s = j.at("amax_s").get<bool>();
    r.amax_o = j.at("amax_o").get<bool>();
    r.paged_kv = j.value("paged_kv", false);
    r.ragged = j.value("ragged", false);
    r.seq_start = j.value("seq_start", false);
    r.softcap = j.value("softcap", false);
    // true: also a 16-bit Q over FP8 K/V; "only": nothing else (a row whose kernel widens K/V to Q's type).
    if (j.contains("q16_over_fp8_kv") && j.at("q16_over_fp8_kv").is_string()) {
      if (j.at("q16_over_fp8_kv").get<std::string>() != "only")
        return Status(StatusCode::Internal, fmt::format("row {}: q16_over_fp8_kv is true, false or \"only\"", r.id));
      r.q16_over_fp8_kv = r.only_q16_over_fp8_kv = true;
    } else {
      r.q16_over_fp8_kv = j.value("q16_over_fp8_kv", false);
    }
    const std::string q_quantization = j.value("q_quantization", std::string("none"));
    if (auto q = parse_q_quantization(q_quantization)) r.q_quantization = *q;
    else return Status(StatusCode::Internal, fmt::format("row {}: q_quantization '{}'", r.id, q_quantization));
    const json& split = j.at("split_kv");
    r.split_kv_supported = split.at("supported").get<bool>();
    r.split_head_dims = pairs(split.at("head_dims"));
    r.split_counts = split.at("counts").get<std::vector<int>>();
    for (const auto& t : j.at("tiles")) {
      RowTile rt;
      rt.tile = {t.at("q").get<int>(), t.at("kv").get<int>()};
      rt.consumer_warpgroups = t.value("consumer_warpgroups", 0);
      if (t.contains("head_dims")) rt.head_dims = pairs(t.at("head_dims"));
      for (const auto& d : rt.head_dims)
        if (std::find(r.head_dims.begin(), r.head_dims.end(), d) == r.head_dims.end())
          return Status(StatusCode::Internal, fmt::format("row {}: tile {}x{} lists head dims ({}, {}), which the row "
                                                          "does not",
                                                          r.id, rt.tile.q, rt.tile.kv, d.first, d.second));
      r.tiles.push_back(std::move(rt));
    }
    r.min_packed_rows = j.value("min_packed_rows", int64_t{0});
    r.notes = j.at("notes").get<std::string>();
    return r;
  } catch (const std::exception& e) {
    return Status(StatusCode::Internal, fmt::format("capability row does not parse: {}", e.what()));
  }
}

bool RowTile::serves(int64_t d_qk, int64_t d_v) const {
  return head_dims.empty() ||
         std::find(head_dims.begin(), head_dims.end(), std::pair<int64_t, int64_t>{d_qk, d_v}) != head_dims.end();
}

std::vector<RowTile> CapabilityRow::tiles_for(int64_t d_qk, int64_t d_v) const {
  std::vector<RowTile> out;
  for (const RowTile& t : tiles)
    if (t.serves(d_qk, d_v)) out.push_back(t);
  return out;
}

bool CapabilityRow::writes_split_partials(int64_t d_qk, int64_t d_v) const {
  return split_kv_supported && std::find(split_head_dims.begin(), split_head_dims.end(),
                                         std::pair<int64_t, int64_t>{d_qk, d_v}) != split_head_dims.end();
}

const std::vector<CapabilityRow>& capability_rows() {
  static const std::vector<CapabilityRow> rows = [] {
    std::vector<CapabilityRow> out;
    for (const EmbeddedFile* doc = kEmbeddedRows; doc->path; ++doc) {
      Result<CapabilityRow> r = parse_capability_row(doc->text);
      // The rows are checked in and parsed by a unit test; a row that fails here is a build defect, and is
      // left out (the test names it) rather than aborting the process.
      if (r.ok()) out.push_back(std::move(r).value());
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    return out;
  }();
  return rows;
}

}  // namespace rime
