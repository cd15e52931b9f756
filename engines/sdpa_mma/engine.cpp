#include "engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "common/sdpa_params.hpp"
#include "heuristics/tile.hpp"
#include "sdpa_mma/layout.h"

namespace rime::engines {
namespace {

// Bytes of the type the kernel computes in: FP16 for a 16-bit Q over FP8 K/V (K/V widened in shared memory).
int elem_bytes(const Facts& f) { return (f.is_fp8 && !f.q16_over_fp8_kv()) || f.is_mxfp8 ? 1 : 2; }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

rime_mma::Smem smem_of(const Facts& f, TileShape t) {
  return rime_mma::smem(t.q, t.kv, static_cast<int>(f.D_qk), static_cast<int>(f.D_v), elem_bytes(f), f.is_mxfp8,
                        f.q16_over_fp8_kv());
}

class SdpaMma final : public Engine {
 public:
  Result<TileChoice> choose_tile(const Facts& f, const CapabilityRow& row) const override {
    heuristics::TileProblem tp;
    tp.packed_rows = f.S_q * f.group;
    tp.batch_heads = f.B * f.H_kv;
    tp.sm_count = f.device.sm_count;
    tp.smem_per_block = f.device.smem_per_block;
    tp.smem_per_sm = f.device.smem_per_sm;
    for (const RowTile& rt : row.tiles_for(f.D_qk, f.D_v))
      if (!f.pinned_tile || rt.tile == *f.pinned_tile)
        tp.options.push_back({rt.tile.q, rt.tile.kv, smem_of(f, rt.tile).total, rime_mma::threads(rt.tile.q)});
    heuristics::TileOptionChoice tc = heuristics::choose_tile(tp);
    if (!tc.tile)
      return Status(StatusCode::NotSupported,
                    fmt::format("row {}: {}{}", row.id, f.pinned_tile ? "the pinned tile: " : "", tc.reason));
    RowTile chosen;
    chosen.tile = {tc.tile->q, tc.tile->kv};
    return TileChoice{chosen, f.pinned_tile ? "pinned by the graph" : tc.reason};
  }

  TileGeometry geometry(const Facts& f, const RowTile& rt) const override {
    const TileShape t = rt.tile;
    TileGeometry g;
    g.packed_rows = f.S_q * f.group;
    g.q_tiles = ceil_div(g.packed_rows, t.q);
    g.kv_tiles = ceil_div(f.S_kv, t.kv);
    g.threads = rime_mma::threads(t.q);
    g.smem_bytes = smem_of(f, t).total;
    return g;
  }

  Result<Derived> derive(const Facts& f, const CapabilityRow& row, const Decision& d) const override {
    RowTile rt;
    rt.tile = d.tile;
    const TileGeometry g = geometry(f, rt);
    const bool split = writes_partials(f, d);
    // An FP8 split decode over per-sequence lengths (one row tile per pair) runs balanced: a persistent grid sharing
    // all pairs' KV tiles evenly (RIME_F_BALANCED, common/attention.cuh), where the grid of per-sequence chunks left a
    // long-tailed batch's last wave to its longest sequences (docs/perf-history.md, "Session 10: paged K/V on the
    // Hopper engine, balanced split-KV decode": paged decode 3-9% faster; and "Session 13": with the walk in slices
    // of every kv head, 1 token 0.6278 -> 0.6023 ms, 4 tokens 0.6389 -> 0.6241,
    // against the walk in (batch, kv head) order). Measured on the H200, side by side, where it was not kept: a 16-bit
    // Q over FP8 K/V 11% slower (1.30 against 1.17 ms), BF16 decode 18-34% slower (dense rows; the balanced kernels
    // reach 255 registers), and FP8 decode at one length -4%..+2% (no spread to balance). MXFP8 inputs: not measured,
    // left as they were.
    const bool balanced =
        d.split_kv > 1 && f.mask.padding && g.q_tiles == 1 && f.is_fp8 && !f.q16_over_fp8_kv() &&
        balanced_walk_fits(f, g);
    Derived out = sdpa_derived(f, row, g, d);
    // Under split the attention kernel writes fp32 partials; its O type argument is unused and fixed to FP32 so
    // that one specialization serves every O dtype.
    const KernelSpec spec{row.engine, "sdpa_mma/kernel.cuh",
                          fmt::format("rime_dev::sdpa_mma_fwd<{}, {}, {}, {}, {}, {}, {}>",
                                      kernel_type_name(f.q16_over_fp8_kv() ? RIME_T_FP16 : type_code(f.q().dtype)),
                                      kernel_type_name(split ? RIME_T_FP32 : sdpa_o_type_code(f)), f.D_qk, f.D_v,
                                      d.tile.q, d.tile.kv,
                                      kernel_feature_names(sdpa_features(f, split) | (balanced ? RIME_F_BALANCED : 0))),
                          "SdpaParams", f.device.arch_name()};
    if (Status s = add_attention_stages(out, f, row, d, g, spec, g.smem_bytes); !s.ok()) return s;
    if (balanced)
      make_persistent_grid(out.stages[0], f,
                         heuristics::ctas_per_sm(g.smem_bytes, static_cast<int>(g.threads), f.device.smem_per_sm));
    return out;
  }

  Status fill_params(const Facts& f, const Config& c, const Bindings& b, StageParams& out) const override {
    const SdpaParams attention = sdpa_params(f, c, b);
    std::memcpy(out[0].bytes, &attention, sizeof(attention));
    fill_combine_params(f, c, b, out, 1);
    return Status::success();
  }
};

}  // namespace

const Engine& sdpa_mma_engine() {
  static const SdpaMma engine;
  return engine;
}

}  // namespace rime::engines
