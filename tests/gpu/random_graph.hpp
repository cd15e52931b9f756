// Random sdpa graphs for the GPU sweep: every feature the mma engines serve, drawn from a seed.
#pragma once

#include <fmt/format.h>

#include <random>
#include <string>

#include <optional>

#include "block_scaled_graph.hpp"
#include "rime/graph.hpp"
#include "rime/inspect/rows.hpp"

namespace rime::test {

// The tile the Hopper engine's row (sdpa_sm90_fp8 or sdpa_sm90_f16) lists for these head dims on n consumer
// warpgroups, or none: what a test pins comes from the rows the matcher and the engine read, never from a copy.
inline std::optional<TileShape> sm90_tile(bool fp8, int64_t d_qk, int64_t d_v, int n) {
  for (const CapabilityRow& row : capability_rows())
    if (row.id == (fp8 ? "sdpa_sm90_fp8" : "sdpa_sm90_f16"))
      for (const RowTile& t : row.tiles_for(d_qk, d_v))
        if (t.consumer_warpgroups == n) return t.tile;
  return std::nullopt;
}

// The head dims of the models people run beside 64 / 128 / 256, on a quarter of a suite's draws each: 96 (Phi-3),
// which both engines serve in every type, and, where `with_80` (16-bit draws), 80 (Phi-2), which both serve in 16
// bits only. Decided by a generator of its own seeded by the draw's seed, so that the draw's other fields stay
// what they were.
inline int64_t model_head_dim(uint64_t seed, int64_t d, bool with_80) {
  const uint64_t pick = std::mt19937_64(seed ^ 0x96805a5ULL)() % 4;
  if (pick == 1) return 96;
  if (pick == 2 && with_80) return 80;
  return d;
}

struct GraphDraw {
  Graph graph;
  std::string description;
};

// kSm90Ws draws what the warp-specialized engine (sdpa_sm90) serves: FP8 (E4M3/E5M2) or BF16/FP16 inputs, D
// 64/80 (16-bit)/96/128/256 and D_qk 192 with D_v 128, at least 64 packed rows (a quarter of the draws: decodes of
// 1-8 query tokens), tiles pinned from the row, every mask and output, S_q up to 700 and S_kv up to 1000 (tails in
// rows and keys, several tiles, fully masked row tiles).
enum class Draw { kAll, kSm90Ws };

inline GraphDraw random_graph(uint64_t seed, Draw draw = Draw::kAll) {
  std::mt19937_64 rng(seed);
  auto pick = [&](std::initializer_list<int64_t> v) {
    return *(v.begin() + std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng));
  };
  auto coin = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  const bool ws = draw == Draw::kSm90Ws;
  const bool prefill_only = ws;  // S_q from the prefill list (decodes: below)
  const bool fp8 = coin(0.6);
  const DataType in = fp8 ? (coin(0.75) ? DataType::FP8_E4M3 : DataType::FP8_E5M2)
                          : (coin(0.5) ? DataType::BF16 : DataType::FP16);
  DataType out;
  if (fp8) {
    out = static_cast<DataType>(pick({int64_t(DataType::FP8_E4M3), int64_t(DataType::FP8_E5M2),
                                      int64_t(DataType::BF16), int64_t(DataType::FP16)}));
  } else {
    out = coin(0.5) ? DataType::BF16 : DataType::FP16;
  }
  // D is D_qk; D_v equals it except for the MLA-style D_qk 192 / D_v 128, which only sdpa_sm90 serves.
  int64_t D = ws ? pick({64, 128, 128, 192, 256}) : pick({64, 128, 128, 256});
  // Half of the other suite's 16-bit draws take head dim 80 (Phi-2) or 96 (Phi-3), which the mma.sync engine serves
  // in 16 bits, on a generator of their own (each seed's other fields stay what they were).
  if (!ws && !fp8) {
    const uint64_t d_pick = std::mt19937_64(seed ^ 0xd96d80ULL)() % 4;
    if (d_pick == 1) D = 80;
    if (d_pick == 2) D = 96;
  }
  if (ws) D = model_head_dim(seed, D, !fp8);
  const int64_t D_v = D == 192 ? 128 : D;
  const int64_t group = pick({1, 1, 2, 4, 8});
  const int64_t H_kv = pick({1, 2, 3});
  const int64_t H_q = H_kv * group;
  const int64_t B = pick({1, 2, 3});
  const bool decode = !prefill_only && coin(0.25);
  int64_t S_q = decode ? 1 : prefill_only ? pick({64, 100, 128, 300, 700}) : pick({1, 17, 64, 100, 128, 300});
  if (prefill_only && S_q * group < 64) S_q = 64;
  // kSm90Ws: a quarter of the draws are decodes of 1, 2, 4 or 8 query tokens, which the engine's one-consumer tile
  // serves at any packed-row count (16-bit D 256 at one CTA per SM; FP8 D 256 runs them on two consumers); a
  // generator of their own keeps the other fields of each seed's draw.
  if (ws) {
    std::mt19937_64 decode_rng(seed ^ 0x5a5a5a5aULL);
    if (decode_rng() % 4 == 0) S_q = int64_t{1} << (decode_rng() % 4);
  }
  const int64_t S_kv = prefill_only ? pick({1, 50, 129, 300, 513, 1000}) : pick({1, 50, 64, 129, 256, 300, 513});
  const int layout = static_cast<int>(pick({0, 0, 1, 2}));  // bhsd, bshd, strided (padded rows)

  Graph g(fmt::format("sweep_{}", seed));
  auto strides_for = [&](std::vector<int64_t> dims) {
    if (layout == 1) return TensorDesc::bshd_strides(dims);
    if (layout == 2) {  // rows padded by 64 elements: a slice of a wider tensor
      const int64_t row = dims[3] + 64;
      return std::vector<int64_t>{dims[1] * dims[2] * row, dims[2] * row, row, 1};
    }
    return TensorDesc::packed_strides(dims);
  };
  int64_t uid = 0;
  auto add = [&](const char* name, std::vector<int64_t> dims, DataType t, bool output = false) {
    std::vector<int64_t> strides = dims.size() == 4 && dims[3] > 1 ? strides_for(dims) : TensorDesc::packed_strides(dims);
    return g.add_tensor({name, ++uid, dims, strides, t, output});
  };
  SdpaAttributes a;
  std::string mask;
  const int mask_kind = static_cast<int>(pick({0, 1, 2, 3, 4}));
  if (mask_kind == 1 || mask_kind == 3) {
    a.causal = true;
    mask += "causal ";
  }
  if (mask_kind == 2) {
    a.band_right = pick({0, 5, 40});
    mask += fmt::format("band{} ", *a.band_right);
  }
  if (mask_kind == 3 || (mask_kind == 4 && coin(0.5))) {
    a.window_left = pick({1, 16, 100});
    mask += fmt::format("window{} ", *a.window_left);
  }
  if (mask_kind != 0 && coin(0.5)) {
    a.alignment = DiagonalAlignment::BottomRight;
    mask += "br ";
  }
  const bool padding = coin(0.25);
  const bool sink = coin(0.3);
  const bool stats = coin(0.5);
  a.stats_log2 = stats && coin(0.3);
  // A negative scale too: the largest raw score is then the smallest scaled one (sdpa_sm90 takes the row max
  // on raw scores only when the scale is positive).
  if (coin(0.2)) a.attn_scale = coin(0.5) ? 0.05f : -0.08f;
  const int split = static_cast<int>(pick({0, 0, 1, 2, 4, 16}));  // 0: the heuristic; 16: often > KV tiles
  if (split) a.split_kv = split;
  const int tile = prefill_only ? 0 : static_cast<int>(pick({0, 0, 16, 64, 128}));
  if (tile) a.tile = TileShape{tile, 64};
  // kSm90Ws: a third of the draws pin the engine's three-consumer tile where its row lists one (D_v <= 128), which
  // its heuristic gives only to large unmasked or causal grids, and a third its one-consumer tile where listed
  // (D_v <= 128), which it gives only to at most 64 packed rows. A generator of its own keeps the other fields of
  // each seed's draw what they were.
  const uint64_t tile_pick = std::mt19937_64(seed ^ 0x3c3c3c3cULL)() % 3;
  if (ws && tile_pick == 1) a.tile = sm90_tile(fp8, D, D_v, 3);
  if (ws && tile_pick == 2) a.tile = sm90_tile(fp8, D, D_v, 1);
  a.padding_mask = padding;
  a.generate_stats = stats;
  // A quarter of the draws cap their logits at 5 or 30 (Gemma 2 uses 50, Grok 30), on a generator of their own.
  const unsigned softcap_pick = static_cast<unsigned>(std::mt19937_64(seed ^ 0x50f7ca9ULL)() % 8);
  if (softcap_pick == 1) a.logit_softcap = 5.0f;
  if (softcap_pick == 2) a.logit_softcap = 30.0f;

  const int64_t q = add("Q", {B, H_q, S_q, D}, in), k = add("K", {B, H_kv, S_kv, D}, in),
                v = add("V", {B, H_kv, S_kv, D_v}, in), o = add("O", {B, H_q, S_q, D_v}, out, true);
  std::optional<int64_t> sink_uid, lq, lkv, stats_uid, amax_o, amax_s;
  if (sink) sink_uid = add("sink", {1, H_q, 1, 1}, DataType::FP32);
  std::optional<int64_t> start_q, start_kv;
  if (padding) {
    lq = add("seq_len_q", {B}, DataType::INT32);
    lkv = add("seq_len_kv", {B}, DataType::INT32);
  }
  // Half of the padded draws place their sequences by per-sequence starts (left padding; SPEC section 2): both
  // sides, or one, chosen on a generator of their own (each seed's other fields stay what they were).
  const unsigned starts = padding ? static_cast<unsigned>(std::mt19937_64(seed ^ 0x5eed5a17ULL)() % 6) : 0u;
  if (starts == 1 || starts == 3) start_q = add("seq_start_q", {B}, DataType::INT32);
  if (starts == 2 || starts == 3) start_kv = add("seq_start_kv", {B}, DataType::INT32);
  const char* starts_text = starts == 3 ? " starts" : starts == 1 ? " starts_q" : starts == 2 ? " starts_kv" : "";
  if (stats) stats_uid = add("Stats", {B, H_q, S_q, 1}, DataType::FP32, true);
  bool want_amax_s = false;
  // A third of the FP8 draws take some of their descales per (batch, kv head), chosen on a generator of their own
  // (each seed's other fields stay what they were).
  std::mt19937_64 scale_rng(seed ^ 0x69696969ULL);
  const unsigned per_head = fp8 && scale_rng() % 3 == 0 ? static_cast<unsigned>(1 + scale_rng() % 7) : 0u;
  if (fp8) {
    SdpaFp8Operands io;
    io.q = q, io.k = k, io.v = v, io.o = o;
    add_fp8_scalars(add, io, per_head, B, H_kv);
    io.sink = sink_uid, io.seq_len_q = lq, io.seq_len_kv = lkv, io.stats = stats_uid;
    io.seq_start_q = start_q, io.seq_start_kv = start_kv;
    if (coin(0.5)) io.amax_o = add("Amax_O", {1, 1, 1, 1}, DataType::FP32, true);
    // Amax_S makes split ineligible; only draw it without a pinned split.
    want_amax_s = !split && coin(0.3);
    if (want_amax_s) io.amax_s = add("Amax_S", {1, 1, 1, 1}, DataType::FP32, true);
    (void)g.sdpa_fp8(io, a, "attn");
  } else {
    SdpaOperands io;
    io.q = q, io.k = k, io.v = v, io.o = o;
    io.sink = sink_uid, io.seq_len_q = lq, io.seq_len_kv = lkv, io.stats = stats_uid;
    io.seq_start_q = start_q, io.seq_start_kv = start_kv;
    (void)g.sdpa(io, a, "attn");
  }
  GraphDraw d;
  d.graph = g;
  d.description = fmt::format("seed {}: {} -> {} B{} H{}/{} S_q {} S_kv {} D{} layout {} mask [{}]{}{}{}{}{}{}{} "
                              "split {} tile {}",
                              seed, to_string(in), to_string(out), B, H_q, H_kv, S_q, S_kv, D, layout, mask,
                              padding ? " padding" : "", starts_text,
                              a.logit_softcap ? fmt::format(" softcap {}", *a.logit_softcap) : std::string(),
                              sink ? " sink" : "", stats ? " stats" : "",
                              want_amax_s ? " amax_s" : "", per_head_text(per_head), split,
                              a.tile ? fmt::format("{}x{}", a.tile->q, a.tile->kv) : std::string("0"));
  return d;
}

}  // namespace rime::test
