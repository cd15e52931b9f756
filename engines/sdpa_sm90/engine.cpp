// Host side of the sdpa_sm90_ws engine (engines/sdpa_sm90/kernel.cuh): rows sdpa_fp8_sm90 and sdpa_f16_sm90.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "common/sdpa_params.hpp"
#include "engine.hpp"
#include "runtime/driver.hpp"
#include "sdpa_sm90/layout.h"

namespace rime::engines {
namespace {

int elem_bytes(const Facts& f) { return f.is_fp8 || f.is_mxfp8 ? 1 : 2; }
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

rime_ws::Smem smem_of(const Facts& f, bool split) {
  return rime_ws::smem(elem_bytes(f), static_cast<int>(f.D_qk), static_cast<int>(f.D_v), f.is_fp8,
                       f.o_block_scale != 0 && !split, rime_ws::kSmemLimit);
}

TileShape tile_of(const Facts& f) {
  return {rime_ws::kTileQ, rime_ws::tile_kv(elem_bytes(f), static_cast<int>(f.D_qk))};
}

// A 4-D TMA map over a [B, H, S, D] operand with logical strides (elements): (d, s, h, b), boxes of one
// sub-tile row width by `rows` rows, the sub-tile's swizzle.
Status encode_map(RimeTensorMap& out, const TensorFacts& t, void* base, int rows, const char* what) {
  const driver::Api* api = driver::api();
  if (!api) return driver::load_status();
  if (!api->cuTensorMapEncodeTiled)
    return Status(StatusCode::CudaError, "the CUDA driver has no cuTensorMapEncodeTiled (CUDA 12 or newer needed)");
  const int eb = bits_of(t.dtype) / 8;
  const int row = rime_ws::row_bytes(static_cast<int>(t.dims[3]) * eb);
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(t.dims[3]), static_cast<cuuint64_t>(t.dims[2]),
                              static_cast<cuuint64_t>(t.dims[1]), static_cast<cuuint64_t>(t.dims[0])};
  // Strides of dims of extent 1 are never stepped; TMA still wants them multiples of 16 bytes.
  cuuint64_t strides[3];
  for (int i = 0; i < 3; ++i) {
    const int dim = 2 - i;  // s, h, b
    strides[i] = t.dims[static_cast<size_t>(dim)] > 1 ? static_cast<cuuint64_t>(t.strides[static_cast<size_t>(dim)] * eb) : 16;
  }
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(row / eb), static_cast<cuuint32_t>(rows), 1, 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  const CUtensorMapDataType type = eb == 1 ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                   : t.dtype == DataType::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                               : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  CUtensorMap map;
  Status s = driver::check(
      api->cuTensorMapEncodeTiled(&map, type, 4, base, dims, strides, box, element_strides,
                                  CU_TENSOR_MAP_INTERLEAVE_NONE,
                                  row == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
      what);
  if (!s.ok()) return s;
  static_assert(sizeof(CUtensorMap) == sizeof(RimeTensorMap), "the kernels' view of a tensor map is 128 bytes");
  std::memcpy(&out, &map, sizeof(out));
  return Status::success();
}

class SdpaSm90Ws final : public Engine {
 public:
  Result<TileChoice> choose_tile(const Facts& f, const CapabilityRow& row) const override {
    const TileShape t = tile_of(f);
    if (f.pinned_tile && *f.pinned_tile != t)
      return Status(StatusCode::NotSupported,
                    fmt::format("row {}: the pinned tile {}x{} is not this engine's {}x{} for {} D {}", row.id,
                                f.pinned_tile->q, f.pinned_tile->kv, t.q, t.kv, to_string(f.q().dtype), f.D_qk));
    const int64_t need = smem_of(f, false).total;
    if (need > f.device.smem_per_block)
      return Status(StatusCode::NotSupported, fmt::format("row {}: needs {} bytes of shared memory per block, the "
                                                          "device has {}",
                                                          row.id, need, f.device.smem_per_block));
    return TileChoice{t, f.pinned_tile ? "pinned by the graph"
                                       : fmt::format("the warp-specialized engine's tile for {} D {}: two consumer "
                                                     "warpgroups of 64 rows, {} keys",
                                                     to_string(f.q().dtype), f.D_qk, t.kv)};
  }

  TileGeometry geometry(const Facts& f, TileShape t) const override {
    TileGeometry g;
    g.packed_rows = f.S_q * f.group;
    g.q_tiles = ceil_div(g.packed_rows, t.q);
    g.kv_tiles = ceil_div(f.S_kv, t.kv);
    g.threads = rime_ws::kThreads;
    g.smem_bytes = smem_of(f, false).total;
    return g;
  }

  Result<Derived> derive(const Facts& f, const CapabilityRow& row, const Decision& d) const override {
    if (d.tile != tile_of(f))
      return Status(StatusCode::NotSupported, fmt::format("row {}: tile {}x{} is not this engine's {}x{} for D {}",
                                                          row.id, d.tile.q, d.tile.kv, tile_of(f).q, tile_of(f).kv,
                                                          f.D_qk));
    const bool split = d.split_kv > 1;
    const TileGeometry g = geometry(f, d.tile);
    Derived out = sdpa_derived(f, row, g, d.split_kv);
    out.smem_bytes = smem_of(f, split).total;
    const KernelSpec spec{row.engine, "sdpa_sm90/kernel.cuh",
                          fmt::format("rime_dev::sdpa_ws_fwd<{}, {}, {}, {}, {}>", type_code(f.q().dtype),
                                      split ? RIME_T_FP32 : sdpa_o_type_code(f), f.D_qk, f.D_v,
                                      sdpa_features(f, split)),
                          "__grid_constant__ SdpaWsParams", f.device.arch_name()};
    if (Status s = add_attention_stages(out, f, row, d, g, spec, out.smem_bytes); !s.ok()) return s;
    return out;
  }

  Status fill_params(const Facts& f, const Config& c, const Bindings& b, StageParams& out) const override {
    SdpaWsParams w{};
    w.p = sdpa_params(f, c, b);
    // Paged K/V: the maps span the pools, (d, slot, h, page), and a box is one page (or one tile of a page larger
    // than a tile); the kernel issues a tile's boxes from its page ids.
    const int rows = f.paged ? static_cast<int>(std::min<int64_t>(f.page_size, c.decision.tile.kv)) : c.decision.tile.kv;
    Status s = encode_map(w.k_map, f.k(), b.of(f, Role::K), rows, "cuTensorMapEncodeTiled(K)");
    if (!s.ok()) return s;
    s = encode_map(w.v_map, f.v(), b.of(f, Role::V), rows, "cuTensorMapEncodeTiled(V)");
    if (!s.ok()) return s;
    static_assert(sizeof(SdpaWsParams) <= kMaxParamBytes, "the parameter block fits its ParamBlock");
    std::memcpy(out[0].bytes, &w, sizeof(w));
    fill_combine_params(f, c, b, out, 1);
    return Status::success();
  }
};

}  // namespace

const Engine& sdpa_sm90_ws_engine() {
  static const SdpaSm90Ws engine;
  return engine;
}

}  // namespace rime::engines
