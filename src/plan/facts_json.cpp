#include "plan/facts_json.hpp"

namespace rime {

nlohmann::json facts_to_json(const Facts& f) {
  nlohmann::json j{{"op", to_string(f.op)},
                   {"B", f.B}, {"H_q", f.H_q}, {"H_kv", f.H_kv}, {"group", f.group},
                   {"S_q", f.S_q}, {"S_kv", f.S_kv}, {"D_qk", f.D_qk}, {"D_v", f.D_v},
                   {"qkv_dtype", to_string(f.q.dtype)}, {"o_dtype", to_string(f.o.dtype)},
                   {"o_format", f.o_format()},
                   {"layouts", {to_string(f.q.layout), to_string(f.k.layout), to_string(f.v.layout),
                                to_string(f.o.layout)}},
                   {"mask", f.mask.describe()},
                   {"has_sink", f.has_sink}, {"wants_stats", f.wants_stats}, {"stats_log2", f.stats_log2},
                   {"wants_amax_s", f.wants_amax_s}, {"wants_amax_o", f.wants_amax_o},
                   {"o_block_scale", f.o_block_scale}, {"has_scale_o", f.has_scale_o}, {"decode", f.decode},
                   {"split_eligible", f.split_eligible}, {"split_ineligible_reason", f.split_ineligible_reason},
                   {"attn_scale", f.attn_scale},
                   {"arch", f.device.arch_name()}, {"sm_count", f.device.sm_count},
                   {"smem_per_block", f.device.smem_per_block}};
  if (f.sf_o_layout) j["sf_o_layout"] = to_string(*f.sf_o_layout);
  return j;
}

nlohmann::json config_to_json(const Config& c) {
  nlohmann::json j{{"row", c.row_id},
                   {"engine", c.engine},
                   {"tile", {{"q", c.tile.q}, {"kv", c.tile.kv}}},
                   {"split_kv", c.split_kv},
                   {"packed_rows", c.packed_rows},
                   {"q_tiles", c.q_tiles},
                   {"kv_tiles", c.kv_tiles},
                   {"tile_reason", c.tile_reason},
                   {"split_reason", c.split_reason},
                   {"workspace_bytes", c.workspace_bytes},
                   {"smem_bytes", c.smem_bytes}};
  j["split_candidates"] = nlohmann::json::array();
  for (const SplitCandidate& s : c.split_candidates)
    j["split_candidates"].push_back({{"split", s.split}, {"waves", s.waves}, {"cost", s.cost}});
  return j;
}

Config config_from_json(const nlohmann::json& j) {
  Config c;
  c.row_id = j.at("row").get<std::string>();
  c.engine = j.at("engine").get<std::string>();
  c.tile = {j.at("tile").at("q").get<int>(), j.at("tile").at("kv").get<int>()};
  c.split_kv = j.at("split_kv").get<int>();
  c.packed_rows = j.at("packed_rows").get<int64_t>();
  c.q_tiles = j.at("q_tiles").get<int64_t>();
  c.kv_tiles = j.at("kv_tiles").get<int64_t>();
  c.tile_reason = j.at("tile_reason").get<std::string>();
  c.split_reason = j.at("split_reason").get<std::string>();
  c.workspace_bytes = j.at("workspace_bytes").get<int64_t>();
  c.smem_bytes = j.at("smem_bytes").get<int64_t>();
  for (const auto& s : j.at("split_candidates"))
    c.split_candidates.push_back({s.at("split").get<int>(), s.at("waves").get<int64_t>(), s.at("cost").get<double>()});
  return c;
}

}  // namespace rime
