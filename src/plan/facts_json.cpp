#include "plan/facts_json.hpp"

#include <fmt/format.h>

#include "json/checked.hpp"
#include "status_macros.hpp"

namespace rime {

nlohmann::json facts_to_json(const Facts& f) {
  nlohmann::json j{{"op", to_string(f.op)},
                   {"B", f.B}, {"H_q", f.H_q}, {"H_kv", f.H_kv}, {"group", f.group},
                   {"S_q", f.S_q}, {"S_kv", f.S_kv}, {"D_qk", f.D_qk}, {"D_v", f.D_v},
                   {"qkv_dtype", to_string(f.q().dtype)}, {"o_dtype", to_string(f.o().dtype)},
                   {"o_format", f.o_format()},
                   {"layouts", {to_string(f.q().layout), to_string(f.k().layout), to_string(f.v().layout),
                                to_string(f.o().layout)}},
                   {"mask", f.mask.describe()},
                   {"has_sink", f.has_sink}, {"wants_stats", f.wants_stats}, {"stats_log2", f.stats_log2},
                   {"seq_start_q", f.seq_start_q}, {"seq_start_kv", f.seq_start_kv},
                   {"wants_amax_s", f.wants_amax_s}, {"wants_amax_o", f.wants_amax_o},
                   {"o_block_scale", f.o_block_scale}, {"has_scale_o", f.has_scale_o},
                   {"per_head_descales", f.per_head_descales}, {"decode", f.decode},
                   {"split_eligible", f.split_eligible}, {"split_ineligible_reason", f.split_ineligible_reason},
                   {"attn_scale", f.attn_scale},
                   {"arch", f.device.arch_name()}, {"sm_count", f.device.sm_count},
                   {"smem_per_block", f.device.smem_per_block}};
  if (f.sf_o_layout) j["sf_o_layout"] = to_string(*f.sf_o_layout);
  if (f.logit_softcap > 0) j["logit_softcap"] = f.logit_softcap;
  if (f.q_quantization != QQuantization::None) j["q_quantization"] = to_string(f.q_quantization);
  if (f.context_parallel.world > 0)
    j["context_parallel"] = {{"rank", f.context_parallel.rank}, {"world", f.context_parallel.world}};
  // A 16-bit Q over FP8 K/V: qkv_dtype is Q's, and K/V's is its own field.
  if (f.k().dtype != f.q().dtype) j["kv_dtype"] = to_string(f.k().dtype);
  return j;
}

nlohmann::json decision_to_json(const Decision& d) {
  nlohmann::json j{{"row", d.row_id},
                   {"tile", {{"q", d.tile.q}, {"kv", d.tile.kv}}},
                   {"consumer_warpgroups", d.consumer_warpgroups},
                   {"split_kv", d.split_kv},
                   {"tile_reason", d.tile_reason},
                   {"split_reason", d.split_reason}};
  j["split_candidates"] = nlohmann::json::array();
  for (const SplitCandidate& s : d.split_candidates)
    j["split_candidates"].push_back({{"split", s.split}, {"waves", s.waves}, {"cost", s.cost}});
  return j;
}

nlohmann::json derived_to_json(const Derived& d) {
  nlohmann::json j{{"engine", d.engine},          {"packed_rows", d.packed_rows},
                   {"q_tiles", d.q_tiles},        {"kv_tiles", d.kv_tiles},
                   {"threads", d.threads},        {"smem_bytes", d.smem_bytes},
                   {"workspace_bytes", d.workspace_bytes}};
  j["workspace"] = nlohmann::json::array();
  for (const WorkspaceRegion& r : d.workspace)
    j["workspace"].push_back({{"name", r.name}, {"offset", r.offset}, {"bytes", r.bytes}});
  j["stages"] = nlohmann::json::array();
  for (const KernelStage& s : d.stages) {
    j["stages"].push_back({{"role", s.role},
                           {"engine", s.spec.engine},
                           {"header", s.spec.header},
                           {"name_expression", s.spec.name_expression},
                           {"params_type", s.spec.params_type},
                           {"arch", s.spec.arch},
                           {"grid", s.grid},
                           {"block", s.block},
                           {"smem_bytes", s.smem_bytes}});
    // Only when set: plans without a persistent stage keep the artifacts they had.
    if (s.persistent) j["stages"].back()["persistent"] = true;
  }
  return j;
}

Result<Decision> decision_from_json(const nlohmann::json& j, const std::string& ptr) {
  namespace jc = json_checked;
  Decision d;
  RIME_RETURN_IF_ERROR(jc::get_string(j, "row", d.row_id, ptr));
  const nlohmann::json* tile = nullptr;
  RIME_RETURN_IF_ERROR(jc::get_object(j, "tile", tile, ptr));
  RIME_RETURN_IF_ERROR(jc::get_int32(*tile, "q", d.tile.q, ptr + "/tile"));
  RIME_RETURN_IF_ERROR(jc::get_int32(*tile, "kv", d.tile.kv, ptr + "/tile"));
  RIME_RETURN_IF_ERROR(jc::get_int32(j, "consumer_warpgroups", d.consumer_warpgroups, ptr));
  RIME_RETURN_IF_ERROR(jc::get_int32(j, "split_kv", d.split_kv, ptr));
  RIME_RETURN_IF_ERROR(jc::get_string(j, "tile_reason", d.tile_reason, ptr));
  RIME_RETURN_IF_ERROR(jc::get_string(j, "split_reason", d.split_reason, ptr));
  const nlohmann::json* candidates = nullptr;
  RIME_RETURN_IF_ERROR(jc::get_array(j, "split_candidates", candidates, ptr));
  for (size_t i = 0; i < candidates->size(); ++i) {
    const std::string at = fmt::format("{}/split_candidates/{}", ptr, i);
    SplitCandidate c;
    RIME_RETURN_IF_ERROR(jc::get_int32((*candidates)[i], "split", c.split, at));
    RIME_RETURN_IF_ERROR(jc::get_int((*candidates)[i], "waves", c.waves, at));
    RIME_RETURN_IF_ERROR(jc::get_number((*candidates)[i], "cost", c.cost, at));
    d.split_candidates.push_back(c);
  }
  return d;
}

}  // namespace rime
