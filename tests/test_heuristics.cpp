// The heuristics are pure functions: table-driven tests on the CPU.
#include <algorithm>

#include "catch.hpp"
#include "common/fast_div.h"
#include "heuristics/split_kv.hpp"
#include "heuristics/tile.hpp"
#include "sdpa_mma/layout.h"
#include "sdpa_sm90/layout.h"

using namespace rime::heuristics;

namespace {
const std::vector<int> kPow2 = {1, 2, 4, 8, 16, 32, 64, 128};
}

TEST_CASE("the upstream worked example picks split 8", "[heuristics]") {
  // 148 SMs, B=1, H=4, S_q=128, S_kv=2048 with 128-row and 128-key tiles: 4 CTAs, 16 KV tiles, 512 rows.
  SplitChoice c = choose_split_kv({4, 16, 512, 148, kPow2});
  CHECK(c.split == 8);
  REQUIRE(c.candidates.size() == 4);  // 1, 2, 4, 8: capped at kv_tiles / 2
  CHECK(c.candidates.back().split == 8);
  CHECK(c.candidates[0].cost == Approx(16 + 2 + 0));
  CHECK(c.candidates[3].cost == Approx(2 + 2 + 4 * 8 * 0.0625));
}

TEST_CASE("split-KV table", "[heuristics]") {
  struct Row {
    int64_t ctas, kv_tiles, rows;
    int sms;
    int expect;
  };
  const Row table[] = {
      // decode, 64-key tiles: B x H_kv CTAs, 1 row tile each
      {8, 2048, 32, 132, 16},     // B1 H32/8 S_kv 131072
      {64, 512, 256, 132, 2},     // B8 H32/8 S_kv 32768
      {1, 16, 1, 132, 8},         // B1 H1 S_kv 1024: capped by kv_tiles / 2
      {512, 4096, 2048, 132, 16}, // B64 H8 S_kv 262144: 3.9 waves -> 63 waves of 62.06 trims the tail
      {4, 2, 4, 132, 1},          // too few KV tiles to split
      {2112, 16, 65536, 132, 1},  // prefill: plenty of CTAs
  };
  for (const Row& r : table) {
    INFO("ctas " << r.ctas << " kv_tiles " << r.kv_tiles);
    SplitChoice c = choose_split_kv({r.ctas, r.kv_tiles, r.rows, r.sms, kPow2});
    CHECK(c.split == r.expect);
  }
}

TEST_CASE("split choices obey the candidate rules over a decode sweep", "[heuristics]") {
  for (int64_t B : {1, 2, 4, 8, 16, 32, 64})
    for (int64_t s_kv : {1024, 4096, 16384, 65536, 262144})
      for (int64_t group : {1, 2, 4, 8}) {
        const int64_t h_kv = 32 / group, kv_tiles = s_kv / 64;
        SplitChoice c = choose_split_kv({B * h_kv, kv_tiles, B * 32, 132, kPow2});
        INFO("B " << B << " S_kv " << s_kv << " group " << group);
        CHECK(c.split >= 1);
        CHECK((c.split & (c.split - 1)) == 0);
        CHECK((c.split == 1 || c.split <= kv_tiles / 2));
        double best = 1e300;
        int best_s = 0;
        for (const auto& s : c.candidates)
          if (s.cost < best) best = s.cost, best_s = s.split;
        CHECK(c.split == best_s);  // the minimum, ties to the smaller split
      }
}

TEST_CASE("split counts the row does not allow are not candidates", "[heuristics]") {
  SplitChoice c = choose_split_kv({8, 2048, 32, 132, {1, 4}});
  for (const auto& s : c.candidates) CHECK((s.split == 1 || s.split == 4));
  CHECK(c.split == 4);
}

TEST_CASE("split 1 is always a candidate, also where the row's counts do not list it", "[heuristics]") {
  // The unsplit launch needs no combine: a row wired for {4, 8} can still run unsplit, and a prefill of many CTAs
  // should (the worked example's S_kv with 512 CTAs a split: every split only adds waves).
  SplitChoice c = choose_split_kv({512, 16, 512 * 128, 132, {4, 8}});
  REQUIRE_FALSE(c.candidates.empty());
  CHECK(c.candidates.front().split == 1);
  CHECK(c.split == 1);
}

TEST_CASE("with per-sequence lengths the largest split within the slack wins", "[heuristics]") {
  // The paged decode bench row: B64 H32/8 S_kv 32768 in 32-key tiles, one-warp CTAs 8 per SM on 132 SMs.
  SplitProblem p{512, 1024, 64 * 32, 132, kPow2, 8};
  const SplitChoice fixed = choose_split_kv(p);
  CHECK(fixed.split == 2);  // at full lengths one wave of 512-tile CTAs is the minimum
  p.lengths_vary = true;
  const SplitChoice varying = choose_split_kv(p);
  const SplitCostModel model;
  double best = 1e300;
  for (const auto& s : varying.candidates) best = std::min(best, s.cost);
  for (const auto& s : varying.candidates) {
    INFO("split " << s.split << " cost " << s.cost << " best " << best);
    if (s.split > varying.split) CHECK(s.cost > best * (1 + model.varying_lengths_slack));
    if (s.split == varying.split) CHECK(s.cost <= best * (1 + model.varying_lengths_slack));
  }
  CHECK(varying.split == 32);  // 576 <= 516 x 1.15; split 64 costs 640
  // A split within the slack that saves the longest walk less than it costs is not taken: generate's decode step
  // at B64 H32/8 over a 1024-key capacity (16 tiles of 64 keys, one 64-row CTA per (batch, kv head)): split 2
  // costs 82 against 72 and shortens a full-length walk by 8 tiles.
  SplitProblem capacity{512, 16, 64 * 32, 132, kPow2, 1, true};
  const SplitChoice short_kv = choose_split_kv(capacity);
  REQUIRE(short_kv.candidates.size() >= 2);
  CHECK(short_kv.candidates[1].cost <= short_kv.candidates[0].cost * (1 + model.varying_lengths_slack));
  CHECK(short_kv.split == 1);
  // Without a second candidate within the slack the minimum stays: one KV tile pair, one split.
  SplitProblem tiny{4, 2, 4, 132, kPow2, 1, true};
  CHECK(choose_split_kv(tiny).split == 1);
}

namespace {
// The sdpa_mma engine's tiles (those of rows sdpa_mma_fp8 for 8-bit inputs, sdpa_mma_f16 for 16-bit) with the
// shared memory its layout header gives them (the heuristic itself sees only these numbers).
std::vector<TileOption> mma_options(int d, int elem, bool mx = false) {
  std::vector<TileOption> out;
  for (auto [q, kv] : {std::pair{16, 32}, {16, 64}, {32, 32}, {64, 64}, {128, 64}})
    if (q != 32 || elem == 1) out.push_back({q, kv, rime_mma::smem(q, kv, d, d, elem, mx).total, rime_mma::threads(q)});
  return out;
}
TileProblem problem(int64_t rows, int64_t bh, int smem_per_block, std::vector<TileOption> options) {
  TileProblem p;
  p.packed_rows = rows;
  p.batch_heads = bh;
  p.sm_count = 132;
  p.smem_per_block = smem_per_block;
  p.smem_per_sm = 233472;
  p.options = std::move(options);
  return p;
}
}  // namespace

TEST_CASE("tile table", "[heuristics]") {
  struct Row {
    int64_t rows, bh, d;
    int elem;
    int smem;
    int expect_q;
  };
  const Row table[] = {
      {4, 64, 128, 1, 232448, 16},       // decode with GQA 4
      {16, 512, 128, 1, 232448, 16},     // 4 query tokens, GQA 4
      {32, 512, 128, 1, 232448, 32},     // 8 query tokens, GQA 4: two warps share the K/V tile
      {33, 512, 128, 1, 232448, 128},    // past two warps: the prefill rule
      {8192, 64, 128, 1, 232448, 128},   // prefill B2 H32 S4096 (packed per kv head)
      {1024, 16, 128, 1, 232448, 64},    // 128-row tiles would leave SMs idle
      {8192, 64, 256, 2, 101376, 16},    // D 256 BF16 on sm_89 (99 KB): only 16x32 fits
      {8192, 64, 64, 2, 101376, 128},    // D 64 BF16 fits 128 rows in 99 KB
  };
  CHECK_FALSE(choose_tile(problem(8192, 64, 40000, mma_options(256, 2))).tile.has_value());
  for (const Row& r : table) {
    INFO("rows " << r.rows << " d " << r.d);
    TileOptionChoice c = choose_tile(problem(r.rows, r.bh, r.smem, mma_options(static_cast<int>(r.d), r.elem)));
    REQUIRE(c.tile.has_value());
    CHECK(c.tile->q == r.expect_q);
  }
  // Decode picks the KV tile that fits the most single-warp CTAs per SM.
  TileOptionChoice decode = choose_tile(problem(4, 64, 232448, mma_options(128, 1)));
  REQUIRE(decode.tile.has_value());
  CHECK(decode.tile->kv == 32);
  CHECK(ctas_per_sm(rime_mma::smem(16, 32, 128, 128, 1, false).total, 32, 233472) == 8);
  CHECK(ctas_per_sm(rime_mma::smem(16, 64, 128, 128, 1, false).total, 32, 233472) == 5);
  // FP8 tiles of 32 rows build V^T in registers like those of 16 (no V^T stage in shared memory); 64 rows do not.
  CHECK(rime_mma::smem(32, 32, 128, 128, 1, false).total == 32 * 144 + 2 * 32 * 144 + 2 * 32 * 144);
  CHECK(rime_mma::vt_in_smem(64, 1, false));
  CHECK_FALSE(rime_mma::vt_in_smem(32, 1, false));
  // The combine spreads a row's splits over 16 warps when rows are fewer than 4 per SM (B1 H32 decode: 32 rows).
  CHECK(combine_warps_per_row(32, 132) == 16);
  CHECK(combine_warps_per_row(527, 132) == 16);
  CHECK(combine_warps_per_row(528, 132) == 4);
}

TEST_CASE("the sdpa_mma layout header's shared memory", "[heuristics][engines]") {
  // Q, two K and two V stages (rows padded by 16 bytes), V^T for FP8.
  CHECK(rime_mma::smem(64, 64, 128, 128, 1, false).total == 64 * 144 + 2 * 64 * 288 + 128 * 80);
  // MXFP8 inputs add the KV tile's scales as fp32: K 64 keys x 4 k steps, V 128 d x 2 key blocks.
  CHECK(rime_mma::smem(64, 64, 128, 128, 1, true).total == 64 * 144 + 2 * 64 * 288 + 128 * 80 + 4 * (256 + 256));
  // 16-row FP8 tiles keep no V^T in shared memory (ldmatrix.trans builds its fragments), except for MXFP8 inputs.
  CHECK(rime_mma::smem(16, 32, 128, 128, 1, false).total == 16 * 144 + 2 * 32 * 288);
  CHECK(rime_mma::smem(16, 32, 128, 128, 1, true).total == 16 * 144 + 2 * 32 * 288 + 128 * 48 + 4 * (32 * 4 + 128 * 1));
  // BF16 has no V^T: Q, K, V only.
  CHECK(rime_mma::smem(128, 64, 64, 64, 2, false).total == 128 * 144 + 2 * 64 * 288);
  CHECK(rime_mma::threads(128) == 256);
}

TEST_CASE("row tiles in waves: a partial last wave costs a full one", "[heuristics]") {
  // B4 H32 S4096 on 132 SMs, one CTA per SM: 4096 CTAs of 128 rows are 32 waves (31.03 rounded up); 192-row
  // tiles are 22 per head (the last one a third full), 2816 CTAs, 22 waves.
  const RowTileCost two = row_tile_cost(4096, 128, 132, {128, 1, 1.0});
  CHECK(two.ctas == 4096);
  CHECK(two.waves == 32);
  CHECK(two.cost == Approx(32 * 128));
  const RowTileCost three = row_tile_cost(4096, 128, 132, {192, 1, 0.97});
  CHECK(three.ctas == 2816);
  CHECK(three.waves == 22);
  CHECK(three.cost == Approx(22 * 192 * 0.97));
  CHECK(three.cost > two.cost);  // 3% per row does not pay for the emptier tiles and the extra wave
  // B1 H32 S16384: 86 tiles of 192 rows per head, 2752 CTAs, 21 waves against 32.
  CHECK(row_tile_cost(16384, 32, 132, {192, 1, 0.97}).cost < row_tile_cost(16384, 32, 132, {128, 1, 1.0}).cost);
  // Two CTAs per SM halve the waves.
  CHECK(row_tile_cost(4096, 128, 132, {128, 2, 1.0}).waves == 16);
}

TEST_CASE("row tile cost counts a partial row tile by its live granules", "[heuristics]") {
  // S 512 in 192-row tiles: 192 + 192 + 128 live rows. Whole tiles: 3072 CTAs in 24 waves of 132; by 64-row
  // granules the third tile is two thirds of a CTA: 1024 x 2.667 = 2731 CTAs of work, 21 waves.
  CHECK(row_tile_cost(512, 1024, 132, {192, 1, 1.0}).waves == 24);
  const RowTileCost live = row_tile_cost(512, 1024, 132, {192, 1, 1.0}, 64);
  CHECK(live.ctas == 3072);
  CHECK(live.waves == 21);
  // Exact tiles are the same either way.
  CHECK(row_tile_cost(4096, 128, 132, {128, 1, 1.0}, 64).waves == row_tile_cost(4096, 128, 132, {128, 1, 1.0}).waves);
}

TEST_CASE("causal row tile cost: granules walk their own diagonal, and a grid of few waves is list-scheduled",
          "[heuristics]") {
  // One head of S 192 in one 192-row tile of 64-key tiles: by granules 64 x (64 + 128 + 192) pairs; whole, 192 x 192.
  const CausalGrid one{192, 192, 1, 1, false};
  CHECK(causal_row_tile_cost(one, 132, {192, 1, 1.0}, 64, 64) == Approx(64.0 * (64 + 128 + 192)));
  CHECK(causal_row_tile_cost(one, 132, {192, 1, 1.0}, 64) == Approx(192.0 * 192));
  // A granule wholly before the first row costs nothing: S 128 in one 192-row tile has two live granules.
  CHECK(causal_row_tile_cost({128, 128, 1, 1, false}, 132, {192, 1, 1.0}, 64, 64) == Approx(64.0 * (64 + 128)));
  // Four CTAs on three SMs (two heads of S_q 256 against 4096 keys, bottom-right: 3968 and 4096 keys per row tile):
  // list scheduling puts two on one SM (3968 + 3968), where the work over the SMs would say 5376 per SM.
  CHECK(causal_row_tile_cost({256, 4096, 1, 2, true}, 3, {128, 1, 1.0}, 128) == Approx(128.0 * (3968 + 3968)));
}

TEST_CASE("causal row tile cost: the partial row tile first, the heaviest CTA or the work over the SMs",
          "[heuristics]") {
  // B4 H32 S4096: 32 row tiles of 128 rows running 1 .. 32 KV tiles of 128 keys; 22 of 192 rows, the first with
  // 64 live rows, running 1, 4, .. 64 KV tiles of 64 keys (715 in all).
  const CausalGrid b4{4096, 4096, 1, 128, false};
  CHECK(causal_row_tile_cost(b4, 132, {128, 1, 1.0}, 128) == Approx(128.0 * 128 * 528 * 128 / 132));
  CHECK(causal_row_tile_cost(b4, 132, {192, 1, 0.95}, 64) == Approx(192.0 * 64 * 715 * 128 / 132 * 0.95));
  // One head of S 1024: the heaviest CTA (all 1024 keys) is the grid's time.
  const CausalGrid one{1024, 1024, 1, 1, false};
  CHECK(causal_row_tile_cost(one, 132, {128, 1, 1.0}, 128) == Approx(128.0 * 1024));
  CHECK(causal_row_tile_cost(one, 132, {192, 1, 0.95}, 64) == Approx(192.0 * 1024 * 0.95));
  // Bottom-right, S_q 128 < S_kv 1000: the one row tile sees every key (1000, in 8 tiles of 128); top-left it sees
  // the first 128.
  CHECK(causal_row_tile_cost({128, 1000, 1, 1, true}, 132, {128, 1, 1.0}, 128) == Approx(128.0 * 1024));
  CHECK(causal_row_tile_cost({128, 1000, 1, 1, false}, 132, {128, 1, 1.0}, 128) == Approx(128.0 * 128));
  // Bottom-right, S_q 300 > S_kv 100: the first 200 rows see no key; GQA packs 4 q heads per row (1200 rows).
  CHECK(causal_row_tile_cost({300, 100, 4, 1, true}, 132, {128, 1, 1.0}, 128) == Approx(128.0 * 128));
}

TEST_CASE("the sdpa_sm90 layout header: two and three consumer warpgroups", "[heuristics][engines]") {
  CHECK(rime_sm90::threads(2) == 384);
  CHECK(rime_sm90::threads(3) == 512);
  // setmaxnreg: the producer's registers and the consumers' share fill the 64K register file.
  for (bool fp8 : {false, true}) {
    CHECK(128 * (rime_sm90::producer_regs(2, fp8) + 2 * rime_sm90::consumer_regs(2, fp8)) <= 65536);
    CHECK(128 * (rime_sm90::producer_regs(3, fp8) + 3 * rime_sm90::consumer_regs(3, fp8)) <= 65536);
    CHECK(2 * 128 * (rime_sm90::producer_regs(1, fp8) + rime_sm90::consumer_regs(1, fp8)) <= 65536);  // 2 CTAs per SM
    CHECK(rime_sm90::consumer_regs(2, fp8) == 224);
    // setmaxnreg.inc draws on what the producer released only.
    for (int n : {1, 2, 3})
      CHECK(n * (rime_sm90::consumer_regs(n, fp8) - rime_sm90::launch_regs(n)) <=
            rime_sm90::launch_regs(n) - rime_sm90::producer_regs(n, fp8));
  }
  // A 16-bit Q over FP8 K/V on the one-consumer FP8 kernel (Q's second E4M3 term in registers): 64 and 192.
  CHECK(rime_sm90::producer_regs(1, true, true) == 64);
  CHECK(rime_sm90::consumer_regs(1, true, true) == 192);
  CHECK(2 * 128 * (rime_sm90::producer_regs(1, true, true) + rime_sm90::consumer_regs(1, true, true)) <= 65536);
  CHECK(rime_sm90::consumer_regs(1, true, true) - rime_sm90::launch_regs(1) <=
        rime_sm90::launch_regs(1) - rime_sm90::producer_regs(1, true, true));
  CHECK(rime_sm90::launch_regs(2) == 168);
  CHECK(rime_sm90::launch_regs(3) == 128);
  // Three FP8 consumers beside the transposing producer's 56 (a 16-bit Q in two E4M3 terms, D_v 96), or 32 (D_v
  // 128: transpose_v_tile_rows128); three 16-bit ones beside a producer of 32, whose 160 registers hold S of 128
  // keys at D 64.
  CHECK(rime_sm90::consumer_regs(3, true) == 152);
  CHECK(rime_sm90::consumer_regs(3, true, true, 128) == 152);
  CHECK(rime_sm90::consumer_regs(3, true, false, 128) == 160);
  CHECK(rime_sm90::consumer_regs(3, false) == 160);
  CHECK(rime_sm90::tile_kv(2, 64, 3) == 128);
  CHECK(rime_sm90::tile_kv(2, 128, 3) == 64);
  // FP8 D 256 on two consumers: 240 each for O, S of 128 keys and P, beside a producer of 24.
  CHECK(rime_sm90::tile_kv(1, 256, 2) == 128);
  CHECK(rime_sm90::tile_kv(2, 256, 2) == 64);
  CHECK(rime_sm90::producer_regs(2, true, false, 256) == 24);
  CHECK(rime_sm90::consumer_regs(2, true, false, 256) == 240);
  CHECK(rime_sm90::consumer_regs(2, true, false, 128) == 224);
  CHECK(2 * (rime_sm90::consumer_regs(2, true, false, 256) - rime_sm90::launch_regs(2)) <=
        rime_sm90::launch_regs(2) - rime_sm90::producer_regs(2, true, false, 256));
  CHECK(rime_sm90::consumer_regs(1, true) == 184);
  CHECK(rime_sm90::consumer_regs(1, false) == 200);
  CHECK(rime_sm90::three_consumers_fit(128, 128));
  CHECK(rime_sm90::three_consumers_fit(192, 128));
  CHECK(rime_sm90::three_consumers_fit(64, 64));
  CHECK_FALSE(rime_sm90::three_consumers_fit(256, 256));
  CHECK(rime_sm90::tile_kv(1, 128, 3) == 96);
  CHECK(rime_sm90::tile_kv(1, 128, 3, true) == 64);  // Q's second E4M3 term beside S of 96 keys spilled
  CHECK(rime_sm90::tile_kv(1, 192, 3) == 64);
  CHECK(rime_sm90::tile_kv(1, 96, 3) == 128);  // O of 48 registers beside S of 128 keys, as D 128's beside 96
  CHECK(rime_sm90::producer_regs(3, true, false, 96) == 32);
  CHECK(rime_sm90::consumer_regs(3, true, false, 96) == 160);
  CHECK(rime_sm90::tile_kv(1, 96, 3, true) == 64);
  CHECK(rime_sm90::tile_kv(1, 64, 3) == 128);
  CHECK(rime_sm90::tile_kv(2, 128, 3) == 64);
  CHECK(rime_sm90::tile_kv(2, 96, 3) == 96);
  CHECK(rime_sm90::tile_kv(2, 80, 3) == 96);
  CHECK(rime_sm90::tile_kv(1, 128, 2) == 128);
  CHECK(rime_sm90::tile_kv(1, 64, 2) == 256);
  // V^T sub-tiles have 8 rows for the tensor cores' row sums: FP8 prefill (2-3 consumers) with D_v <= 128 only.
  CHECK(rime_sm90::vt_sum_rows(true, 128, 3) == 8);
  CHECK(rime_sm90::vt_sum_rows(true, 64, 2) == 8);
  CHECK(rime_sm90::vt_sum_rows(true, 256, 2) == 0);
  CHECK(rime_sm90::vt_sum_rows(true, 128, 1) == 0);
  CHECK(rime_sm90::vt_sum_rows(false, 128, 2) == 0);
  // FP8 D 128 with three consumers: Q of 192 rows, two stages of K, V and V^T of 96 keys (V^T: three sub-tiles of
  // 128 + 8 rows of 32 bytes), the barriers.
  const rime_sm90::Smem s = rime_sm90::smem(1, 128, 128, 3, true, false, rime_sm90::kSmemLimit);
  CHECK(s.k == 192 * 128);
  CHECK(s.v == s.k + 2 * 96 * 128);
  CHECK(s.vt == s.v + 2 * 96 * 128);
  CHECK(s.barriers == rime_sm90::align1024(s.vt + 2 * (128 + 8) * 96));
  CHECK((128 + 8) * 32 % 256 == 0);  // a V^T sub-tile keeps the 32-byte swizzle's 256-byte pattern
  // A paged tile of 96 keys is boxes of at most 32 (a power of two dividing the tile).
  CHECK(rime_sm90::paged_box_log2(4, 96) == 4);
  CHECK(rime_sm90::paged_box_log2(6, 96) == 5);
  CHECK(rime_sm90::paged_box_log2(6, 128) == 6);
  CHECK(rime_sm90::paged_box_log2(8, 128) == 7);
  CHECK(s.total == s.barriers + 16 * 8 + 1024);
  // Block-scaled O stages three consumers' epilogues when they fit.
  CHECK(rime_sm90::smem(1, 128, 128, 3, true, true, rime_sm90::kSmemLimit).staged_epilogue);
}

TEST_CASE("fast division by a plan-time divisor equals integer division", "[heuristics][engines]") {
  // The kernels divide rows by the GQA group and slices by H_kv and B this way (common/fast_div.h).
  auto check = [](unsigned d, unsigned n) {
    const FastDiv f = fast_div_of(d);
    int rem = -1;
    const int q = div_by(f, static_cast<int>(n), rem);
    return div_by(f, n) == n / d && q == static_cast<int>(n / d) && rem == static_cast<int>(n % d);
  };
  bool all = true;
  for (unsigned d = 1; d <= 300; ++d)
    for (unsigned n = 0; n < 20000; ++n) all = all && check(d, n);
  CHECK(all);
  const unsigned big_n[] = {0u, 1u, 65535u, 65536u, 1000003u, (1u << 30) + 7u, 2147483646u, 2147483647u};
  const unsigned big_d[] = {1u, 2u, 3u, 7u, 48u, 65535u, 65537u, 1u << 20, 1000003u, 2147483647u};
  for (unsigned d : big_d)
    for (unsigned n : big_n) {
      CHECK(check(d, n));
      for (unsigned k : {1u, 2u, 3u, 1000u})
        if (static_cast<unsigned long long>(k) * d <= 2147483647u) {
          CHECK(check(d, k * d));
          CHECK(check(d, k * d - 1));
        }
    }
}
