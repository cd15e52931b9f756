#include "engine.hpp"

#include <fmt/format.h>

#include <cstring>

#include "common/sdpa_params.hpp"
#include "sdpa_wgmma/layout.h"

namespace rime::engines {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

class SdpaWgmma final : public Engine {
 public:
  Result<TileChoice> choose_tile(const Facts& f, const CapabilityRow& row) const override {
    // One shape (its row lists it; the matcher refused any other pin); the row's min_packed_rows keeps graphs
    // that would leave it empty away.
    const TileShape t{rime_wgmma::kTileQ, rime_wgmma::kTileKv};
    if (rime_wgmma::smem().total > f.device.smem_per_block)
      return Status(StatusCode::NotSupported, fmt::format("row {}: needs {} bytes of shared memory per block, the "
                                                          "device has {}",
                                                          row.id, rime_wgmma::smem().total, f.device.smem_per_block));
    return TileChoice{t, f.pinned_tile ? "pinned by the graph"
                                       : "the wgmma engine's one tile: one warpgroup of 64 rows, 128 keys"};
  }

  TileGeometry geometry(const Facts& f, TileShape t) const override {
    TileGeometry g;
    g.packed_rows = f.S_q * f.group;
    g.q_tiles = ceil_div(g.packed_rows, t.q);
    g.kv_tiles = ceil_div(f.S_kv, t.kv);
    g.threads = rime_wgmma::kThreads;
    g.smem_bytes = rime_wgmma::smem().total;
    return g;
  }

  Result<Derived> derive(const Facts& f, const CapabilityRow& row, const Decision& d) const override {
    const TileGeometry g = geometry(f, d.tile);
    const bool split = d.split_kv > 1;
    const std::string arch = f.device.arch_name();
    Derived out = sdpa_derived(f, row, g, d.split_kv);
    // V^T (FP8 wgmma takes B k-major only): B x H_kv x D_v rows of vt_keys bytes, after any split partials.
    const int64_t vt_keys = rime_wgmma::vt_keys(f.S_kv);
    add_workspace_region(out, "vt", f.B * f.H_kv * f.D_v * vt_keys);

    KernelStage vt;
    vt.role = "v_transpose";
    vt.spec = {row.engine, "sdpa_wgmma/kernel.cuh",
               fmt::format("rime_dev::vt_fp8<{}>", sdpa_features(f, false) & RIME_F_PADDING), "SdpaParams", arch};
    vt.grid = {vt_keys / rime_wgmma::kTileKv, f.H_kv, f.B};
    vt.block = 256;
    vt.smem_bytes = 0;
    for (const Status& s :
         {check_int32(row, "V^T keys (S_kv rounded up to 128)", vt_keys),
          check_grid_dim(row, "v_transpose", 'y', f.H_kv, "H_kv"), check_grid_dim(row, "v_transpose", 'z', f.B, "B")})
      if (!s.ok()) return s;
    const KernelSpec spec{row.engine, "sdpa_wgmma/kernel.cuh",
                          fmt::format("rime_dev::sdpa_wgmma_fwd<{}, {}>", split ? RIME_T_FP32 : sdpa_o_type_code(f),
                                      sdpa_features(f, split)),
                          "SdpaParams", arch};
    out.stages.push_back(vt);
    if (Status s = add_attention_stages(out, f, row, d, g, spec, g.smem_bytes); !s.ok()) return s;
    return out;
  }

  Status fill_params(const Facts& f, const Config& c, const Bindings& b, StageParams& out) const override {
    SdpaParams p = sdpa_params(f, c, b);
    p.vt = static_cast<unsigned char*>(b.region(c.derived, "vt"));
    p.vt_keys = static_cast<int>(rime_wgmma::vt_keys(f.S_kv));
    // The pre-pass and the attention kernel read the same block.
    std::memcpy(out[0].bytes, &p, sizeof(p));
    std::memcpy(out[1].bytes, &p, sizeof(p));
    fill_combine_params(f, c, b, out, 2);
    return Status::success();
  }
};

}  // namespace

const Engine& sdpa_wgmma_engine() {
  static const SdpaWgmma engine;
  return engine;
}

}  // namespace rime::engines
