// Host side of the sdpa_sm90 engine (engines/sdpa_sm90/kernel.cuh): rows sdpa_sm90_fp8 and sdpa_sm90_f16.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "common/sdpa_params.hpp"
#include "engine.hpp"
#include "heuristics/tile.hpp"
#include "runtime/driver.hpp"
#include "sdpa_sm90/layout.h"

namespace rime::engines {
namespace {

// The kernel's element type (its template's kIn): Q's, except for a 16-bit Q over FP8 K/V (row
// sdpa_sm90_q16_fp8kv), which runs the FP8 kernel with Q split into two E4M3 terms (config.cuh, kQSplit) where
// layout.h's q_split_fits says Q's second term fits the registers, and elsewhere the 16-bit kernel, its K and V
// widened in the kernel (widen.cuh).
// A 16-bit Q rounded to E4M3 per row (q_quantization e4m3_per_row, row sdpa_sm90_q16_fp8kv_e4m3q) always runs the
// FP8 kernel: its one term takes no registers past the FP8 Q's.
bool fp8_q(const Facts& f) { return f.is_fp8 && !f.q16_over_fp8_kv(); }
bool q_rounded(const Facts& f) { return f.q16_over_fp8_kv() && f.q_quantization == QQuantization::E4M3PerRow; }
bool fp8_kernel(const Facts& f, int n_consumers) {
  return fp8_q(f) || q_rounded(f) ||
         (f.q16_over_fp8_kv() && rime_sm90::q_split_fits(static_cast<int>(f.D_qk), n_consumers));
}
int elem_bytes(const Facts& f, int n_consumers) { return fp8_kernel(f, n_consumers) ? 1 : 2; }
// The FP8 kernel with a 16-bit Q in two E4M3 terms (config.cuh, kQSplit).
bool q_split(const Facts& f, int n_consumers) {
  return f.q16_over_fp8_kv() && !q_rounded(f) && fp8_kernel(f, n_consumers);
}
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
// The inputs and head dim, for the tile's explanation; a 16-bit Q over FP8 K/V also says which of its two kernels
// runs on n consumers.
std::string inputs_of(const Facts& f, int n_consumers) {
  if (!f.q16_over_fp8_kv()) return fmt::format("{} D {}", to_string(f.q().dtype), f.D_qk);
  return fmt::format("a {} Q over {} K/V at D {} ({})", to_string(f.q().dtype), to_string(f.k().dtype), f.D_qk,
                     q_rounded(f)               ? "the FP8 kernel, Q rounded to E4M3 per row"
                     : fp8_kernel(f, n_consumers) ? "the FP8 kernel, Q in two E4M3 terms"
                                                : "the 16-bit kernel, K and V widened in shared memory");
}

// The row's tile for these head dims on n consumer warpgroups, if it lists one.
std::optional<RowTile> row_tile(const Facts& f, const CapabilityRow& row, int n) {
  for (const RowTile& t : row.tiles_for(f.D_qk, f.D_v))
    if (t.consumer_warpgroups == n) return t;
  return std::nullopt;
}

// Consumer warpgroups per CTA (one, two or three, rime_sm90 layout.h), among those the row lists a tile of for the
// head dims, and why. One for graphs of at most 64 packed rows (below). Three where the graph has no mask, when the
// row tiles' waves say the grid of 192-row CTAs (one per SM) finishes sooner than that of 128-row ones (causal
// graphs: below). The time per row of a 192-row CTA relative to a 128-row one's, measured on the H200 (every
// prefill bench row pinned to both tiles in one run, each time ratio divided by the rows' wave ratio):
//   FP8:    0.80 at D 64 (three consumers on 128-key tiles, two on 256), 0.90-0.93 at D 128 (taken as 0.92),
//           0.95 at D_qk 192;
//   16-bit: 0.76 at D 64 (three consumers on 128-key tiles, which their 160 registers hold beside a producer of 32;
//           B2 H32 S8192 1.9588 ms against 2.6193 on two), 0.94 at D 128, 0.96 at D_qk 192.
// Causal graphs (no window, the same lengths in every batch) take three where their causal grid's cost
// (heuristics::causal_row_tile_cost, with the partial row tile first as the kernel runs it) says so, at the time per
// (row, key) pair of the grids' KV tiles relative to two consumers', measured on the H200 in one run each:
//   FP8:    0.80 at D 64 (B2 H32 S8192: 0.795x the time), 0.95 at D 128 (B4 H32 S4096: 0.968x), 0.96 at D_qk 192;
//   16-bit: 0.78 at D 64 (128-key tiles on both: 0.790x the time, the grid cost's ratio 1.015), 0.92 at D 128
//           (0.937x), 0.92 at D_qk 192 (0.932x).
// Rows of one consumer warpgroup: of three consumers, a warpgroup whose rows all lie past the graph's rows skips the
// tile, and under a causal mask each walks only the KV tiles up to its own rows' diagonal (ghost turns,
// consumer.cuh), so the cost models count a 192-row tile by its live warpgroups; two consumers run their padding
// rows and the CTA's whole diagonal (their code predates ghost turns), so a 128-row tile counts whole. Measured on
// the H200 (docs/bench/oracle/h200.csv): at S 512 (192-row tiles of 192 + 192 + 128 live rows) three consumers take
// 0.88x the time of two at FP8 D 128 causal, 0.89x at BF16 D 128 causal and 0.91x without the mask, where counting
// whole 192-row tiles had chosen two.
constexpr int kConsumerRows = 64;

struct ConsumerChoice {
  int n = 2;
  std::string reason;
};
ConsumerChoice consumers_of(const Facts& f, const CapabilityRow& row) {
  // At most 64 packed rows (a decode's S_q x group, one token or several): one 64-row consumer, two CTAs per SM
  // (rime_sm90::ctas_per_sm; one at 16-bit D_v 256, whose consumer takes the register file), where the row lists it.
  // A decode is memory-bound, so the tile's empty rows cost only tensor work: one FP8 token of a GQA group of 4 (4
  // rows of 64) measured 0.90x-0.97x the time of the mma.sync engine's 16-row tile.
  const int one_consumer_ctas = rime_sm90::ctas_per_sm(1, static_cast<int>(f.D_v));
  if (f.S_q * f.group <= 64 && row_tile(f, row, 1))
    return {1, fmt::format("one consumer warpgroup: at most 64 packed rows ({} per SM)",
                           one_consumer_ctas == 2 ? "two CTAs" : "one CTA")};
  // Short keys: where a CTA of the largest tile walks at most two KV tiles, its fixed cost (the Q load, the first
  // K/V stages, the epilogue) is most of its time, and one consumer (two CTAs per SM) overlaps one CTA's fixed cost
  // with the other's tiles. Measured on the H200 (docs/bench/oracle/h200.csv): B128 S128 FP8 prefill, one consumer
  // 0.137 ms at D 64 against 0.207 on two and 0.166 on three, 0.203 at D 128 against 0.236 and 0.239; at S 512
  // (four 128-key tiles of the D 64 three-consumer tile) three are ahead again (0.224 against 0.236).
  const std::optional<RowTile> largest = row_tile(f, row, 3) ? row_tile(f, row, 3) : row_tile(f, row, 2);
  if (row_tile(f, row, 1) && one_consumer_ctas == 2 && largest && ceil_div(f.S_kv, largest->tile.kv) <= 2)
    return {1, fmt::format("one consumer warpgroup: {} keys are at most two KV tiles of the {}-row tile, so a CTA's "
                           "fixed cost dominates and two CTAs per SM overlap it",
                           f.S_kv, largest->tile.q)};
  if (!row_tile(f, row, 3))
    return {2, fmt::format("two consumer warpgroups (the row lists no three-consumer tile for head dims ({}, {}))",
                           f.D_qk, f.D_v)};
  // A 16-bit Q over FP8 K/V on the FP8 kernel (two Q.K^T terms) takes the FP8 kernel's measured times: not measured
  // on its own yet. Head dims 80 and 96 take D_qk 192's (the head dims other than 64 and 128): not measured yet.
  const bool d128 = f.D_qk == 128 && f.D_v == 128, d64 = f.D_qk == 64, fp8 = fp8_kernel(f, 3);
  if (f.mask.window_left || f.mask.band_right)
    return {2, "two consumer warpgroups (a window or band mask: three not measured)"};
  // A causal mask with per-batch lengths (padded, ragged or paged prefill) takes the causal grid's model on the
  // graph's largest lengths at FP8 D 128: three consumers measured 0.931x (padded B16, lengths 128-8192), 0.940x
  // (ragged, the same lengths) and 0.946x (paged B4 S4096, pages of 64) the time of two on the H200 (3 interleaved
  // rounds each; docs/perf-history.md, "Measured: three consumers under a causal mask with per-batch lengths"),
  // where the model predicts 0.95x, 0.95x and 0.94x. Other types and head dims
  // keep two until measured.
  if (f.mask.causal && f.mask.padding && !(fp8 && d128))
    return {2, "two consumer warpgroups (a causal mask with per-batch lengths: three measured only at FP8 D 128)"};
  if (f.mask.causal) {
    const heuristics::CausalGrid grid{f.S_q, f.S_kv, f.group, f.B * f.H_kv, f.mask.bottom_right};
    const double time_per_pair = fp8 ? (d64 ? 0.80 : d128 ? 0.95 : 0.96) : (d64 ? 0.78 : 0.92);
    const double two = heuristics::causal_row_tile_cost(grid, f.device.sm_count, {rime_sm90::tile_q(2), 1, 1.0},
                                                        row_tile(f, row, 2)->tile.kv);
    const double three =
        heuristics::causal_row_tile_cost(grid, f.device.sm_count, {rime_sm90::tile_q(3), 1, time_per_pair},
                                         row_tile(f, row, 3)->tile.kv, kConsumerRows);
    const std::string costs = fmt::format("causal grid cost {:.3g} on 192-row tiles against {:.3g} on 128-row ones",
                                          three, two);
    if (three < two) return {3, "three consumer warpgroups: " + costs};
    return {2, "two consumer warpgroups: " + costs};
  }
  const double time_per_row = fp8 ? (d64 ? 0.80 : d128 ? 0.92 : 0.95) : (d64 ? 0.76 : d128 ? 0.94 : 0.96);
  const int64_t packed_rows = f.S_q * f.group, batch_heads = f.B * f.H_kv;
  const heuristics::RowTileCost two = heuristics::row_tile_cost(packed_rows, batch_heads, f.device.sm_count,
                                                                {rime_sm90::tile_q(2), 1, 1.0});
  const heuristics::RowTileCost three = heuristics::row_tile_cost(
      packed_rows, batch_heads, f.device.sm_count, {rime_sm90::tile_q(3), 1, time_per_row}, kConsumerRows);
  const std::string costs = fmt::format("{} CTAs of 192 rows in {} waves, cost {:.0f}, against {} of 128 rows in {} "
                                        "waves, cost {:.0f}",
                                        three.ctas, three.waves, three.cost, two.ctas, two.waves, two.cost);
  if (three.cost < two.cost) return {3, "three consumer warpgroups: " + costs};
  return {2, "two consumer warpgroups: " + costs};
}

rime_sm90::Smem smem_of(const Facts& f, int n_consumers, bool split) {
  return rime_sm90::smem(elem_bytes(f, n_consumers), static_cast<int>(f.D_qk), static_cast<int>(f.D_v), n_consumers,
                         fp8_kernel(f, n_consumers), f.o_block_scale != 0 && !split, rime_sm90::kSmemLimit,
                         q_split(f, n_consumers));
}

// The tile the kernel runs on n consumer warpgroups (layout.h): what the rows list must be this.
TileShape layout_tile(const Facts& f, int n_consumers) {
  return {rime_sm90::tile_q(n_consumers),
          rime_sm90::tile_kv(elem_bytes(f, n_consumers), static_cast<int>(f.D_qk), n_consumers,
                             q_split(f, n_consumers))};
}

// A 4-D TMA map over a [B, H, S, D] operand with logical strides (elements): (d, s, h, b), boxes of one
// sub-tile row width by `rows` rows, the sub-tile's swizzle.
// L2 promotion: 256 bytes for dense operands; 128 for page pools, whose key rows of one kv head (128 bytes at
// FP8 D 128) lie H_kv rows apart ([pages][page_size][H_kv][D]): a 256-byte promotion also fetches the next kv
// head's row, which another CTA reads, often after L2 has dropped it. ncu of the 8-token paged decode: DRAM moved
// 3.80 TB/s where the K/V bytes it needs came to 3.23; with 128 bytes it ran 4.5% faster (docs/perf-history.md,
// "Session 14: the paged producer of the Hopper kernel"), and
// the paged prefill the same (0.993x).
// `kv`: this execute's K/V extent (its length replaces dims[2], its strides the graph's), or nullptr.
Status encode_map(RimeTensorMap& out, const TensorFacts& t, const KvExtent* kv, bool is_v, void* base, int rows,
                  bool page_pool, const char* what) {
  const driver::Api* api = driver::api();
  if (!api) return driver::load_status();
  if (!api->cuTensorMapEncodeTiled)
    return Status(StatusCode::CudaError, "the CUDA driver has no cuTensorMapEncodeTiled (CUDA 12 or newer needed)");
  const int eb = bits_of(t.dtype) / 8;
  const int row = rime_sm90::row_bytes(static_cast<int>(t.dims[3]) * eb);
  int64_t extent[4] = {t.dims[0], t.dims[1], t.dims[2], t.dims[3]}, stride[4] = {t.strides[0], t.strides[1],
                                                                               t.strides[2], t.strides[3]};
  if (kv) {
    extent[2] = kv->length;
    for (size_t i = 0; i < 4; ++i) stride[i] = is_v ? kv->v_strides[i] : kv->k_strides[i];
  }
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(extent[3]), static_cast<cuuint64_t>(extent[2]),
                              static_cast<cuuint64_t>(extent[1]), static_cast<cuuint64_t>(extent[0])};
  // Strides of dims of extent 1 are never stepped; TMA still wants them multiples of 16 bytes.
  cuuint64_t strides[3];
  for (int i = 0; i < 3; ++i) {
    const int dim = 2 - i;  // s, h, b
    strides[i] = extent[dim] > 1 ? static_cast<cuuint64_t>(stride[dim] * eb) : 16;
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
                                  row == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                  : row == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                              : CU_TENSOR_MAP_SWIZZLE_32B,
                                  page_pool ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B : CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
      what);
  if (!s.ok()) return s;
  static_assert(sizeof(CUtensorMap) == sizeof(RimeTensorMap), "the kernels' view of a tensor map is 128 bytes");
  std::memcpy(&out, &map, sizeof(out));
  return Status::success();
}

class SdpaSm90 final : public Engine {
 public:
  Result<TileChoice> choose_tile(const Facts& f, const CapabilityRow& row) const override {
    const ConsumerChoice c = consumers_of(f, row);
    std::optional<RowTile> t = row_tile(f, row, c.n);
    if (!t)
      return Status(StatusCode::NotSupported, fmt::format("row {}: no tile on {} consumer warpgroups for head dims "
                                                          "({}, {})",
                                                          row.id, c.n, f.D_qk, f.D_v));
    std::string reason =
        fmt::format("the Hopper engine's tile for {}: {}, {} keys", inputs_of(f, c.n), c.reason, t->tile.kv);
    if (f.pinned_tile) {  // the matcher has checked that the row lists it for these head dims
      for (const RowTile& listed : row.tiles_for(f.D_qk, f.D_v))
        if (listed.tile == *f.pinned_tile) t = listed;
      reason = "pinned by the graph";
    }
    const int64_t need = smem_of(f, t->consumer_warpgroups, false).total;
    if (need > f.device.smem_per_block)
      return Status(StatusCode::NotSupported, fmt::format("row {}: needs {} bytes of shared memory per block, the "
                                                          "device has {}",
                                                          row.id, need, f.device.smem_per_block));
    return TileChoice{*t, reason};
  }

  TileGeometry geometry(const Facts& f, const RowTile& t) const override {
    TileGeometry g;
    const int n = std::max(t.consumer_warpgroups, 1);
    g.packed_rows = f.S_q * f.group;
    g.q_tiles = ceil_div(g.packed_rows, t.tile.q);
    g.kv_tiles = ceil_div(f.S_kv, t.tile.kv);
    g.threads = rime_sm90::threads(n);
    g.smem_bytes = smem_of(f, n, false).total;
    g.ctas_per_sm = rime_sm90::ctas_per_sm(n, static_cast<int>(f.D_v));  // the kernel's launch bounds
    // A split decode is memory-bound, and what a second CTA on an SM adds is the K/V bytes its stages keep in
    // flight. From 48 KB a CTA (16-bit D 64 to 128, FP8 D 96 and 128), one CTA per SM already keeps the SM's share
    // of DRAM busy, and the split model counts a wave as one CTA per SM. Measured on the H200
    // (docs/bench/oracle/h200.csv): BF16 B1 S_kv 128k split 16 (128 CTAs) 0.134 ms against 0.143 at split 32 (256,
    // two per SM), which counting two per SM had chosen; FP8 B8 S_kv 32k split 2 against 4 alike. On an H100
    // (`rime tune`, B8 H32/8 S_kv 32k): BF16 D 80 and 96 (80 and 96 KB) split 2 fastest of every candidate, FP8 D 96
    // (48 KB) split 2 0.1500 ms against split 4's 0.1559. At 32 KB (FP8 K/V at D 64, under an FP8 or a 16-bit Q) a
    // wave counts both CTAs an SM holds: split 4 (256 CTAs) took 0.858x (FP8 Q) and 0.786x (BF16 Q) the time of
    // split 2 (A/B, 3 rounds; docs/bench/h100_decode_split_waves.txt).
    const int64_t kv_bytes_in_flight =
        int64_t{rime_sm90::kStages} * t.tile.kv * (f.D_qk + f.D_v) * (bits_of(f.k().dtype) / 8);
    g.split_ctas_per_sm = n == 1 && kv_bytes_in_flight <= 32 * 1024 ? g.ctas_per_sm : 1;
    return g;
  }

  Result<Derived> derive(const Facts& f, const CapabilityRow& row, const Decision& d) const override {
    const int n_consumers = d.consumer_warpgroups;
    // derive() has checked that the row lists (tile, consumers) for these head dims; the row must say what the
    // kernel's layout computes, or the kernel would run another tile than the plan records.
    if (n_consumers < 1 || n_consumers > 3 || d.tile != layout_tile(f, n_consumers) ||
        (n_consumers == 3 && !rime_sm90::three_consumers_fit(static_cast<int>(f.D_qk), static_cast<int>(f.D_v))))
      return Status(StatusCode::Internal,
                    fmt::format("row {} lists tile {}x{} on {} consumer warpgroups for head dims ({}, {}), which is "
                                "not the kernel's layout",
                                row.id, d.tile.q, d.tile.kv, n_consumers, f.D_qk, f.D_v));
    const bool split = writes_partials(f, d);
    RowTile rt;
    rt.tile = d.tile;
    rt.consumer_warpgroups = n_consumers;
    const TileGeometry g = geometry(f, rt);
    // A one-consumer split decode over per-sequence lengths (one row tile per pair) whose chunk grid takes more
    // than one wave runs balanced, as the mma.sync engine's (engines/sdpa_mma/engine.cpp): a persistent grid of as
    // many CTAs as the GPU holds at once sharing all pairs' KV tiles evenly (common/kv_tiles.cuh,
    // for_each_balanced_item), where the grid of per-sequence chunks leaves the last wave to the longest sequences'
    // chunks. Measured on the H200: the 8-token paged decode (B64, 4096 CTAs of chunks) 0.7825 -> 0.7601 ms. A chunk
    // grid the GPU holds at once gives each CTA one piece of at most ceil(longest / split) tiles (cut from the
    // batch's longest sequence, kv_tile_range), where the walk's pieces hold up to ceil(longest / (split - 1)) and
    // cross sequences: generate's B8 decode step on its capacity plan (256 CTAs at split 4) ran 0.0360 ms against
    // the walk's 0.0384 (H100, docs/perf-history.md, "the chunk grid cut from the longest sequence").
    const bool one_wave = f.B * f.H_kv * d.split_kv <= g.ctas_per_sm * f.device.sm_count;
    const bool balanced = d.split_kv > 1 && n_consumers == 1 && f.mask.padding && g.q_tiles == 1 && !one_wave &&
                          balanced_walk_fits(f, g);
    Derived out = sdpa_derived(f, row, g, d);
    out.smem_bytes = smem_of(f, n_consumers, split).total;
    const KernelSpec spec{
        row.engine, "sdpa_sm90/kernel.cuh",
        fmt::format("rime_dev::sdpa_sm90_fwd<{}, {}, {}, {}, {}, {}>",
                    kernel_type_name(type_code(fp8_kernel(f, n_consumers) ? f.k().dtype : f.q().dtype)),
                    kernel_type_name(split ? RIME_T_FP32 : sdpa_o_type_code(f)), f.D_qk, f.D_v,
                    kernel_feature_names(sdpa_features(f, split) | (balanced ? RIME_F_BALANCED : 0)),
                    kernel_consumers_name(n_consumers)),
        "__grid_constant__ SdpaSm90Params", f.device.arch_name()};
    if (Status s = add_attention_stages(out, f, row, d, g, spec, out.smem_bytes); !s.ok()) return s;
    if (balanced) make_persistent_grid(out.stages[0], f, g.ctas_per_sm);
    // Masked three-consumer grids take their row tiles from a counter on a persistent grid (layout.h,
    // dynamic_row_tiles; Config::kDynamic decides the same from the kernel's features).
    const int features = sdpa_features(f, split);
    const bool masked_row_order = (features & RIME_F_MASK) != 0 && (features & RIME_F_PADDING) == 0;
    const int lengths_pages_or_starts = RIME_F_PAGED | RIME_F_RAGGED_Q | RIME_F_RAGGED_KV | RIME_F_STARTS;
    if (rime_sm90::dynamic_row_tiles(n_consumers, masked_row_order, split, (features & lengths_pages_or_starts) != 0,
                                     q_split(f, n_consumers))) {
      make_persistent_grid(out.stages[0], f, g.ctas_per_sm);
      add_workspace_region(out, "row_tile_counter", 4);
    }
    return out;
  }

  Status fill_params(const Facts& f, const Config& c, const Bindings& b, StageParams& out) const override {
    SdpaSm90Params w{};
    w.p = sdpa_params(f, c, b);
    // Paged K/V: the maps span the pools, (d, slot, h, page), and a box is one page, or the part of a page
    // (layout.h, paged_box_log2) that a tile is whole boxes of; the kernel issues a tile's boxes from its page ids.
    const int rows = f.paged ? 1 << rime_sm90::paged_box_log2(engines::page_size_log2(f.page_size),
                                                               c.decision.tile.kv)
                             : c.decision.tile.kv;
    Status s = encode_map(w.k_map, f.k(), b.kv, false, b.of(Role::K), rows, f.paged, "cuTensorMapEncodeTiled(K)");
    if (!s.ok()) return s;
    s = encode_map(w.v_map, f.v(), b.kv, true, b.of(Role::V), rows, f.paged, "cuTensorMapEncodeTiled(V)");
    if (!s.ok()) return s;
    static_assert(sizeof(SdpaSm90Params) <= kMaxParamBytes, "the parameter block fits its ParamBlock");
    std::memcpy(out[0].bytes, &w, sizeof(w));
    fill_combine_params(f, c, b, out, 1);
    return Status::success();
  }
};

}  // namespace

const Engine& sdpa_sm90_engine() {
  static const SdpaSm90 engine;
  return engine;
}

}  // namespace rime::engines
