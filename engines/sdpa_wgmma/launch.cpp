#include "sdpa_wgmma/launch.hpp"

#include <fmt/format.h>

#include "graph/geometry.hpp"
#include "heuristics/tile.hpp"

namespace rime::engines {

KernelSpec sdpa_wgmma_spec(const Facts& f, const Config& c, const std::string& arch) {
  KernelSpec s;
  s.engine = c.engine;
  s.header = "sdpa_wgmma/kernel.cuh";
  s.params_type = "SdpaParams";
  s.arch = arch;
  const bool split = c.split_kv > 1;
  s.name_expression = fmt::format("rime_dev::sdpa_wgmma_fwd<{}, {}>", split ? RIME_T_FP32 : sdpa_o_type_code(f),
                                  sdpa_features(f, split));
  return s;
}

KernelSpec vt_prepass_spec(const Facts& f, const std::string& arch) {
  KernelSpec s;
  s.engine = heuristics::kWgmmaEngine;
  s.header = "sdpa_wgmma/kernel.cuh";
  s.params_type = "SdpaParams";
  s.arch = arch;
  s.name_expression = fmt::format("rime_dev::vt_fp8<{}>", sdpa_features(f, false) & RIME_F_PADDING);
  return s;
}

Launch sdpa_wgmma_launch(const Facts& f, const Config& c) {
  Launch l;
  l.grid[0] = static_cast<unsigned>(c.q_tiles);
  l.grid[1] = static_cast<unsigned>(f.H_kv);
  l.grid[2] = static_cast<unsigned>(f.B * c.split_kv);
  l.block = heuristics::kWgmmaThreads;
  l.smem = static_cast<unsigned>(heuristics::sdpa_wgmma_smem_bytes());
  return l;
}

Launch vt_prepass_launch(const Facts& f) {
  return Launch{{static_cast<unsigned>(heuristics::wgmma_vt_keys(f.S_kv) / heuristics::kWgmmaTileKv),
                 static_cast<unsigned>(f.H_kv), static_cast<unsigned>(f.B)},
                256, 0};
}

SdpaParams sdpa_wgmma_params(const Graph& g, const Facts& f, const Config& c,
                             const std::unordered_map<int64_t, void*>& buffers, void* workspace) {
  SdpaParams p = sdpa_mma_params(g, f, c, buffers, workspace);
  p.vt = static_cast<unsigned char*>(workspace) + split_workspace_bytes(f, c.split_kv);
  p.vt_keys = static_cast<int>(heuristics::wgmma_vt_keys(f.S_kv));
  return p;
}

}  // namespace rime::engines
