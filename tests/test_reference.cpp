// The CPU reference: conversions against known bit patterns, the block-scaled quantizers against hand-computed
// blocks, the F8_128x4 index, and split-KV: combining k partials equals the unsplit reference.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>
#include <nlohmann/json.hpp>

#include "catch.hpp"
#include "common/block_scale.h"
#include "graph/geometry.hpp"
#include "testing/reference/block_scale.hpp"
#include "testing/reference/formats.hpp"
#include "testing/reference/sdpa.hpp"
#include "rime/json.hpp"
#include "rime/inspect/rows.hpp"
#include "testing/tolerances.hpp"
#include "testing/trial.hpp"
#include "block_scaled_graph.hpp"
#include "paged_gather.hpp"
#include "ragged_twin.hpp"
#include "test_paths.hpp"

using namespace rime;
using namespace rime::reference;

namespace {
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();
}  // namespace

TEST_CASE("E4M3 decodes and encodes bit-exactly", "[reference][formats]") {
  CHECK(decode_e4m3(0x00) == 0.0);
  CHECK(decode_e4m3(0x01) == std::ldexp(1.0, -9));  // smallest subnormal
  CHECK(decode_e4m3(0x07) == 7 * std::ldexp(1.0, -9));
  CHECK(decode_e4m3(0x08) == std::ldexp(1.0, -6));  // smallest normal
  CHECK(decode_e4m3(0x38) == 1.0);
  CHECK(decode_e4m3(0x7E) == 448.0);
  CHECK(decode_e4m3(0xFE) == -448.0);
  CHECK(std::isnan(decode_e4m3(0x7F)));
  CHECK(std::isnan(decode_e4m3(0xFF)));
  CHECK(std::signbit(decode_e4m3(0x80)));
  CHECK(encode_e4m3(1.0) == 0x38);
  CHECK(encode_e4m3(448.0) == 0x7E);
  CHECK(encode_e4m3(464.0) == 0x7E);  // satfinite: past the max is the max, never NaN
  CHECK(encode_e4m3(1e9) == 0x7E);
  CHECK(encode_e4m3(-1e9) == 0xFE);
  CHECK(encode_e4m3(kInf) == 0x7E);
  CHECK(encode_e4m3(kNaN) == 0x7F);
  CHECK(encode_e4m3(1.0625) == 0x38);  // tie between 1 and 1.125: to the even mantissa
  CHECK(encode_e4m3(1.1875) == 0x3A);  // tie between 1.125 and 1.25: to the even mantissa
  CHECK(encode_e4m3(std::ldexp(1.0, -10)) == 0x00);  // half the smallest subnormal: ties to even (zero)
  CHECK(encode_e4m3(3 * std::ldexp(1.0, -10)) == 0x02);
  for (int b = 0; b < 256; ++b) {
    if (b == 0x7F || b == 0xFF) continue;
    INFO(b);
    CHECK(encode_e4m3(decode_e4m3(static_cast<uint8_t>(b))) == (b == 0x80 ? 0x80 : b));
  }
}

// The arithmetic of engines/sdpa_sm90/consumer.cuh's load_q_split (a 16-bit Q over FP8 K/V on the FP8 kernel): a
// row on the power-of-two scale 2^e that puts its largest magnitude in (224, 448], then hi = e4m3(x), lo =
// e4m3(x - hi). hi + lo is within 2^-8 of x (2^-10 absolute where x - hi is an E4M3 subnormal), where hi alone is
// 2^-4 off: the bound docs/graph-json.md states. On the GPU the [q16] draws check the kernel against the reference.
TEST_CASE("a 16-bit Q in two E4M3 terms keeps each value to 2^-8 of itself", "[reference][formats]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  double worst_two = 0.0, worst_one = 0.0;
  for (double amax : {0x1p-60, 1e-3, 0.37, 1.0, 3.7, 1000.0, 6.0e4, 1e30}) {
    for (DataType q_type : {DataType::BF16, DataType::FP16}) {
      if (q_type == DataType::FP16 && (amax > 6.0e4 || amax < 1e-3)) continue;  // outside FP16's normal range
      std::vector<double> row(128);
      double row_max = 0.0;
      for (double& q : row) {
        q = round_to(q_type, amax * unit(rng));
        row_max = std::max(row_max, std::fabs(q));
      }
      int ex = 0;
      std::frexp(448.0 / row_max, &ex);
      const int e = std::min(std::max(ex - 1, -126), 126);
      const double scale = std::ldexp(1.0, e);
      CHECK(row_max * scale > 224.0);
      CHECK(row_max * scale <= 448.0);
      for (double q : row) {
        const double x = q * scale, hi = round_to(DataType::FP8_E4M3, x), lo = round_to(DataType::FP8_E4M3, x - hi);
        const double err = std::fabs(hi + lo - x);
        INFO("amax " << amax << " q " << q << " x " << x << " hi " << hi << " lo " << lo);
        CHECK(err <= std::max(std::ldexp(std::fabs(x), -8), 0x1p-10));
        if (std::fabs(x) >= 1.0) {
          worst_two = std::max(worst_two, err / std::fabs(x));
          worst_one = std::max(worst_one, std::fabs(hi - x) / std::fabs(x));
        }
      }
    }
  }
  CHECK(worst_two <= 0x1p-8);
  CHECK(worst_one > 0x1p-5);  // one term alone: up to 2^-4
}

TEST_CASE("E5M2, E2M1, UE8M0, FP16 and BF16 decode and encode bit-exactly", "[reference][formats]") {
  CHECK(decode_e5m2(0x3C) == 1.0);
  CHECK(decode_e5m2(0x7B) == 57344.0);
  CHECK(decode_e5m2(0x7C) == kInf);
  CHECK(std::isnan(decode_e5m2(0x7D)));
  CHECK(decode_e5m2(0x01) == std::ldexp(1.0, -16));
  CHECK(encode_e5m2(1e6) == 0x7B);
  CHECK(encode_e5m2(kInf) == 0x7B);
  CHECK(std::isnan(decode_e5m2(encode_e5m2(kNaN))));
  for (int b = 0; b < 256; ++b) {
    const double v = decode_e5m2(static_cast<uint8_t>(b));
    if (std::isnan(v) || std::isinf(v) || b == 0x80) continue;
    CHECK(encode_e5m2(v) == b);
  }
  const double e2m1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (int c = 0; c < 8; ++c) {
    CHECK(decode_e2m1(static_cast<uint8_t>(c)) == e2m1[c]);
    CHECK(decode_e2m1(static_cast<uint8_t>(c | 8)) == -e2m1[c]);
    CHECK(encode_e2m1(e2m1[c]) == c);
  }
  CHECK(encode_e2m1(5.0) == 6);    // tie 4 | 6: to the even mantissa (4)
  CHECK(encode_e2m1(2.5) == 4);    // tie 2 | 3 -> 2
  CHECK(encode_e2m1(0.25) == 0);   // tie 0 | 0.5 -> 0
  CHECK(encode_e2m1(0.75) == 2);   // tie 0.5 | 1 -> 1
  CHECK(encode_e2m1(7.0) == 7);    // satfinite
  CHECK(encode_e2m1(-3.0) == 0xD);
  CHECK(decode_ue8m0(127) == 1.0);
  CHECK(decode_ue8m0(128) == 2.0);
  CHECK(decode_ue8m0(0) == std::ldexp(1.0, -127));
  CHECK(std::isnan(decode_ue8m0(0xFF)));
  CHECK(encode_fp16(1.0) == 0x3C00);
  CHECK(encode_fp16(65504.0) == 0x7BFF);
  CHECK(encode_fp16(65519.0) == 0x7BFF);
  CHECK(encode_fp16(65520.0) == 0x7C00);  // round to nearest overflows to inf (cvt.rn.f16)
  CHECK(encode_bf16(1.0) == 0x3F80);
  CHECK(encode_bf16(-2.0) == 0xC000);
  CHECK(decode_bf16(0x3F80) == 1.0);
  CHECK(decode_fp16(0x0001) == std::ldexp(1.0, -24));
}

TEST_CASE("NVFP4 blocks match hand-computed bit patterns", "[reference][block_scale]") {
  float zeros[16] = {};
  Nvfp4Block z = quantize_nvfp4(zeros);
  CHECK(z.scale == 0x00);
  for (uint8_t c : z.codes) CHECK(c == 0);

  // amax 6: sf = e4m3(6 * (1/6)) = 1.0 (0x38); codes e2m1(o).
  float a[16] = {6.f, 3.f, -1.5f, 0.25f};
  Nvfp4Block b = quantize_nvfp4(a);
  CHECK(b.scale == 0x38);
  CHECK(b.codes[0] == 0x7);
  CHECK(b.codes[1] == 0x5);
  CHECK(b.codes[2] == 0xB);  // negative: sign bit 3
  CHECK(b.codes[3] == 0x0);  // 0.25 ties to 0

  // Saturation: amax 1e6 -> sf saturates to 448 (0x7E); 1e6 / 448 saturates to 6.
  float big[16] = {1e6f, -1e6f};
  Nvfp4Block s = quantize_nvfp4(big);
  CHECK(s.scale == 0x7E);
  CHECK(s.codes[0] == 0x7);
  CHECK(s.codes[1] == 0xF);

  // A subnormal E4M3 scale: amax 0.006 -> 0.001 -> 2^-9 (0x01); 0.006 * 512 = 3.07 -> 3 (0x5).
  float small[16] = {0.006f};
  Nvfp4Block t = quantize_nvfp4(small);
  CHECK(t.scale == 0x01);
  CHECK(t.codes[0] == 0x5);

  // NaN inputs: the block max ignores them (fmaxf); a NaN code saturates to +6 (E2M1 has no NaN).
  float withnan[16] = {std::numeric_limits<float>::quiet_NaN(), 3.f};
  Nvfp4Block n = quantize_nvfp4(withnan);
  CHECK(n.scale == encode_e4m3(3.f * (1.0f / 6.0f)));
  CHECK(n.codes[0] == 0x7);
}

TEST_CASE("MXFP8 blocks match hand-computed bit patterns", "[reference][block_scale]") {
  float zeros[32] = {};
  Mxfp8Block z = quantize_mxfp8(zeros);
  CHECK(z.scale == 0);
  for (uint8_t c : z.codes) CHECK(c == 0);
  CHECK(mxfp8_scale_exponent(1.0f) == 119);    // ceil_pow2(1/448) = 2^-8
  CHECK(mxfp8_scale_exponent(256.0f) == 127);  // a power of two: 256/448 -> 2^0
  CHECK(mxfp8_scale_exponent(448.0f) == 127);  // exactly 448: 2^0, no rounding up
  CHECK(mxfp8_scale_exponent(449.0f) == 128);
  CHECK(mxfp8_scale_exponent(3.0e38f) == 247);  // 3e38 = 1.76 * 2^127 -> 2^(127 - 8 + 1)
  CHECK(mxfp8_scale_exponent(1e-40f) == 0);     // subnormal amax

  float one[32] = {1.f, -0.5f};
  Mxfp8Block m = quantize_mxfp8(one);
  CHECK(m.scale == 119);
  CHECK(m.codes[0] == 0x78);  // 1 * 2^8 = 256
  CHECK(m.codes[1] == 0xF0);  // -128

  float v449[32] = {449.f};
  Mxfp8Block q = quantize_mxfp8(v449);
  CHECK(q.scale == 128);
  CHECK(q.codes[0] == 0x76);  // 224.5 -> 224

  float withnan[32] = {std::numeric_limits<float>::quiet_NaN(), -2.f};
  Mxfp8Block n = quantize_mxfp8(withnan);
  CHECK(n.scale == 120);
  CHECK(n.codes[0] == 0x7F);
  CHECK(n.codes[1] == 0xF8);  // -256
}

TEST_CASE("the F8_128x4 index and the two sf_o layouts", "[reference][block_scale]") {
  CHECK(f8_128x4_offset(33, 5, 8) == 533);  // the worked example of src/graph/geometry.hpp
  CHECK(f8_128x4_offset(0, 0, 4) == 0);
  CHECK(f8_128x4_offset(128, 0, 4) == 512);  // the second 128-row atom
  CHECK(f8_128x4_offset(31, 3, 4) == 31 * 16 + 3);
  CHECK(f8_128x4_offset(32, 0, 4) == 4);
  // Every (r, c) of a 256 x 8 matrix lands on a distinct byte inside it.
  std::vector<int> seen(256 * 8, 0);
  for (int r = 0; r < 256; ++r)
    for (int c = 0; c < 8; ++c) ++seen[f8_128x4_offset(r, c, 8)];
  for (int s : seen) CHECK(s == 1);
  // Planes: plane (b, h) starts at (b*H + h) * R * C. Token-major: row b*R + r, column h*C + c of [B*R, H*C].
  CHECK(sf_o_offset(SfLayout::Planes, 40, 2176, 8, 1, 2, 0, 0) == (1 * 40 + 2) * 2176 * 8);
  CHECK(sf_o_offset(SfLayout::TokenMajor, 40, 7808, 4, 0, 1, 0, 0) == f8_128x4_offset(0, 4, 160));
}

// The kernels' block-scale arithmetic (engines/common/block_scale.h, compiled here for the host) against the
// reference quantizers: every E2M1 rounding boundary, every E4M3 scale byte, the MXFP8 exponent and its
// inverse, the F8_128x4 index; and whole blocks quantized the kernels' way equal quantize_nvfp4/mxfp8.
TEST_CASE("the kernels' block-scale arithmetic equals the reference bit for bit", "[reference][block_scale]") {
  std::vector<float> xs = {0.f, -0.f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.f, 6.f, 7.f, 1e30f, -1e30f, 1e-30f,
                           std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::denorm_min()};
  for (float mid : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.f})
    for (float x : {std::nextafter(mid, 0.f), std::nextafter(mid, 10.f)}) {
      xs.push_back(x);
      xs.push_back(-x);
    }
  uint32_t state = 12345;
  for (int n = 0; n < 20000; ++n) {
    state = state * 1664525u + 1013904223u;
    xs.push_back((static_cast<float>(state >> 8) / 16777216.f - 0.5f) * 16.f);
  }
  for (float x : xs) {
    INFO("x = " << x);
    CHECK(rime_bs::e2m1_code(x) == encode_e2m1(static_cast<double>(x)));
  }
  CHECK(rime_bs::e2m1_code(std::numeric_limits<float>::quiet_NaN()) == encode_e2m1(kNaN));
  CHECK(rime_bs::e2m1_code(-std::numeric_limits<float>::quiet_NaN()) == encode_e2m1(kNaN));
  // Eight codes to a word: element k in nibble k, each as e2m1_code (the values above, eight at a time).
  for (size_t n = 0; n + 8 <= xs.size(); n += 3) {
    float eight[8];
    uint32_t want = 0;
    for (int k = 0; k < 8; ++k) {
      eight[k] = xs[n + k];
      want |= uint32_t{encode_e2m1(static_cast<double>(eight[k]))} << (4 * k);
    }
    INFO("x[0] = " << eight[0]);
    CHECK(rime_bs::e2m1_pack8(eight) == want);
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float specials[8] = {nan, -nan, -0.f, 0.f, std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity(), 6.f, -5.f};
  CHECK(rime_bs::e2m1_pack8(specials) == 0xE7F70877u);
  CHECK(rime_bs::e4m3_reciprocal(0) == 0.f);
  for (unsigned b = 0; b < 0x7F; ++b) CHECK(rime_bs::e4m3_value(b) == static_cast<float>(decode_e4m3(static_cast<uint8_t>(b))));
  for (unsigned b = 1; b < 0x7F; ++b) CHECK(rime_bs::e4m3_reciprocal(b) == 1.0f / static_cast<float>(decode_e4m3(static_cast<uint8_t>(b))));
  for (float a : xs) {
    const float amax = std::fabs(a);
    if (!std::isfinite(amax)) continue;
    INFO("amax = " << amax);
    CHECK(rime_bs::mxfp8_exponent(amax) == mxfp8_scale_exponent(amax));
  }
  for (float amax : {448.f, 448.f * 1.75f, 448.f * 1.7500001f, 1e-38f, 3e38f}) CHECK(rime_bs::mxfp8_exponent(amax) == mxfp8_scale_exponent(amax));
  CHECK(rime_bs::mxfp8_inverse_scale(0) == 0.f);
  for (unsigned e = 1; e <= 254; ++e) CHECK(rime_bs::mxfp8_inverse_scale(e) == std::ldexp(1.0f, 127 - static_cast<int>(e)));
  for (long long r : {0, 31, 32, 127, 128, 300})
    for (long long c : {0, 3, 4, 7}) CHECK(rime_bs::f8_128x4_offset(r, c, 8) == f8_128x4_offset(r, c, 8));
  CHECK(rime_bs::sf_o_offset(0, 40, 2176, 8, 1, 2, 300, 5) == sf_o_offset(SfLayout::Planes, 40, 2176, 8, 1, 2, 300, 5));
  CHECK(rime_bs::sf_o_offset(1, 40, 2176, 8, 1, 2, 300, 5) == sf_o_offset(SfLayout::TokenMajor, 40, 2176, 8, 1, 2, 300, 5));

  // Whole blocks, the kernels' way (the E4M3 scale cast is cvt.rn.satfinite there, encode_e4m3 here).
  for (int n = 0; n < 2000; ++n) {
    float o[32];
    const float magnitude = std::ldexp(1.0f, n % 40 - 20);
    for (float& v : o) {
      state = state * 1664525u + 1013904223u;
      v = (static_cast<float>(state >> 8) / 16777216.f - 0.5f) * magnitude;
    }
    float amax16 = 0, amax32 = 0;
    for (int i = 0; i < 32; ++i) {
      amax32 = std::fmax(amax32, std::fabs(o[i]));
      if (i < 16) amax16 = std::fmax(amax16, std::fabs(o[i]));
    }
    const uint8_t sf = encode_e4m3(static_cast<double>(amax16 * (1.0f / 6.0f)));
    const float inv = rime_bs::e4m3_reciprocal(sf);
    const Nvfp4Block want4 = quantize_nvfp4(o);
    CHECK(sf == want4.scale);
    for (int i = 0; i < 16; ++i) CHECK(rime_bs::e2m1_code(o[i] * inv) == want4.codes[i]);
    const unsigned e = rime_bs::mxfp8_exponent(amax32);
    const Mxfp8Block want8 = quantize_mxfp8(o);
    CHECK(e == want8.scale);
    for (int i = 0; i < 32; ++i) CHECK(encode_e4m3(static_cast<double>(o[i] * rime_bs::mxfp8_inverse_scale(e))) == want8.codes[i]);
  }
}

TEST_CASE("random inputs depend on the seed, not on the number of threads", "[reference]") {
  for (DataType t : {DataType::FP8_E4M3, DataType::BF16}) {
    const int64_t span = 200000;  // 4 chunks, the last one partial
    const size_t bytes = static_cast<size_t>(span * bits_of(t) / 8);
    std::vector<uint8_t> one(bytes), three(bytes), other(bytes);
    testing::fill_uniform(t, one.data(), span, -2.0, 2.0, 42, 1);
    testing::fill_uniform(t, three.data(), span, -2.0, 2.0, 42, 3);
    testing::fill_uniform(t, other.data(), span, -2.0, 2.0, 43, 3);
    CHECK(one == three);
    CHECK(one != other);
    double lo = 0, hi = 0;
    for (int64_t i = 0; i < span; ++i) {
      const double x = load_element(t, one.data(), i);
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    CHECK(lo >= -2.0);
    CHECK(hi <= 2.0);
    CHECK(lo < -1.9);  // the whole range is drawn
    CHECK(hi > 1.9);
  }
}

TEST_CASE("the E4M3-P emulation differs from the reference by P's rounding only", "[reference]") {
  Result<Graph> g = load_graph_file(test::example_path("fp8_prefill"));
  REQUIRE(g.ok());
  Result<Facts> f = analyze(g.value(), DeviceDesc::h200());
  REQUIRE(f.ok());
  const testing::TrialInputs in = testing::make_inputs(g.value(), 5);
  double err2 = 0, ref2 = 0, bound_violations = 0;
  for (int64_t i : {0, 1, 200, 1023}) {
    const RowResult exact = attention_row(g.value(), f.value(), in.tensors, 1, 3, i);
    for (int tile : {64, 128, 1024}) {
      const RowResult emu = attention_row_fp8_p(g.value(), f.value(), in.tensors, 1, 3, i, tile);
      CHECK(emu.lse == Approx(exact.lse).epsilon(1e-12));  // the row sum takes P unquantized
      // Each P_j is off by at most half an E4M3 step (2^-4 relative), and |V| <= 2 with descale_v <= 1.5.
      for (int64_t d = 0; d < f->D_v; ++d) {
        const double e = std::fabs(emu.o[d] - exact.o[d]);
        if (e > 2.0 * 1.5 * 0.0625 + 1e-12) ++bound_violations;
        err2 += e * e;
        ref2 += exact.o[d] * exact.o[d];
      }
    }
  }
  CHECK(bound_violations == 0);
  CHECK(std::sqrt(err2 / ref2) > 1e-4);  // the rounding is there
  CHECK(std::sqrt(err2 / ref2) < 3e-2);
  // Two E4M3 terms (MXFP8 inputs) leave P's rounding at about 2^-8: an order of magnitude closer.
  double err2_two = 0, ref2_two = 0;
  for (int64_t i : {0, 1, 200, 1023}) {
    const RowResult exact = attention_row(g.value(), f.value(), in.tensors, 1, 3, i);
    const RowResult two = attention_row_fp8_p(g.value(), f.value(), in.tensors, 1, 3, i, 128, 2);
    for (int64_t d = 0; d < f->D_v; ++d) {
      err2_two += (two.o[d] - exact.o[d]) * (two.o[d] - exact.o[d]);
      ref2_two += exact.o[d] * exact.o[d];
    }
  }
  CHECK(std::sqrt(err2_two / ref2_two) * 8 < std::sqrt(err2 / ref2));
}

TEST_CASE("bottom-right alignment with per-batch lengths shifts by seq_len_kv[b] - seq_len_q[b]", "[reference]") {
  // SPEC section 2: with padding the last valid query of a batch sees its last valid key (cuDNN, FlashAttention's
  // varlen), not the tensors' S_kv - S_q.
  nlohmann::json doc = nlohmann::json::parse(test::read_text(test::example_path("fp16_window_padding")));
  doc["op"]["attributes"] = {{"causal", true}, {"padding_mask", true}, {"alignment", "bottom_right"}};
  Result<Graph> g = graph_from_json(doc.dump());
  REQUIRE(g.ok());
  Result<Facts> f = analyze(g.value(), DeviceDesc::h200());
  REQUIRE(f.ok());
  testing::TrialInputs in = testing::make_inputs(g.value(), 5);
  const int32_t len_q[4] = {10, 1000, 0, 600}, len_kv[4] = {300, 1000, 50, 100};
  for (int b = 0; b < 4; ++b) {
    store_element(DataType::INT32, in.tensors.at(g->operand(Role::SeqLenQ)->uid).data(), b, len_q[b]);
    store_element(DataType::INT32, in.tensors.at(g->operand(Role::SeqLenKv)->uid).data(), b, len_kv[b]);
  }
  auto keys = [&](int64_t b, int64_t i) { return unmasked_keys(g.value(), f.value(), in.tensors, b, i); };
  // Batch 0: shift 300 - 10 = 290: row 0 sees keys [0, 291), row 9 (the last valid) [0, 300).
  CHECK(keys(0, 0).last == 291);
  CHECK(keys(0, 9).last == 300);
  // Batch 1: full lengths, the shift is S_kv - S_q = 0.
  CHECK(keys(1, 0).last == 1);
  CHECK(keys(1, 999).last == 1000);
  // Batch 3: 600 queries over 100 keys: shift -500, rows below 500 see nothing, row 599 all 100 keys.
  CHECK(keys(3, 499).last <= keys(3, 499).first);
  CHECK(keys(3, 500).last == 1);
  CHECK(keys(3, 599).last == 100);
  // A row with no key writes LSE -inf (SPEC section 2), one with keys a finite LSE.
  CHECK(std::isinf(attention_row(g.value(), f.value(), in.tensors, 3, 0, 499).lse));
  CHECK(std::isfinite(attention_row(g.value(), f.value(), in.tensors, 3, 0, 500).lse));
}

TEST_CASE("the paged reference equals the dense one on the gathered K/V", "[reference][paged]") {
  // examples/fp8_paged_decode: pools of 200 pages x 16 keys, 64 pages per sequence, pages shuffled by make_inputs
  // (entries past a sequence's last page hold an out-of-pool id, which the reference must not read).
  const nlohmann::json doc = nlohmann::json::parse(test::read_text(test::example_path("fp8_paged_decode")));
  Result<Graph> paged = graph_from_json(doc.dump());
  REQUIRE(paged.ok());
  Result<Facts> pf = analyze(paged.value(), DeviceDesc::h200());
  REQUIRE(pf.ok());
  CHECK(pf->paged);
  CHECK(pf->S_kv == 64 * 16);
  const testing::TrialInputs in = testing::make_inputs(paged.value(), 17);

  nlohmann::json dense_doc = doc;
  for (int t : {1, 2}) {
    dense_doc["tensors"][t]["dims"] = {4, 8, 1024, 128};
    dense_doc["tensors"][t].erase("strides");
  }
  dense_doc["tensors"].erase(13);
  dense_doc["op"]["inputs"].erase("page_table");
  Result<Graph> dense = graph_from_json(dense_doc.dump());
  REQUIRE(dense.ok());
  Result<Facts> df = analyze(dense.value(), DeviceDesc::h200());
  REQUIRE(df.ok());
  int64_t gathered = 0;
  const testing::TrialInputs din = test::gather_paged_inputs(paged.value(), dense.value(), in, gathered);
  const TensorDesc& lens = *paged->operand(Role::SeqLenKv);
  CHECK(gathered > 0);
  // GB/s of a run with per-sequence lengths count the keys the sequences hold (K and V, 8 heads x 128 bytes each
  // per key), not the padded tensors or the pools, and for a paged run the page ids that address them.
  double held = 0, page_ids = 0;
  for (int64_t b = 0; b < 4; ++b) {
    const int64_t len = static_cast<int64_t>(load_element(DataType::INT32, in.tensors.at(lens.uid).data(), b));
    held += static_cast<double>(len) * 8 * 256;
    page_ids += static_cast<double>((len + 15) / 16) * 4;
  }
  auto other_bytes = [](const Graph& graph) {
    double bytes = 0;
    for (const TensorDesc& t : graph.tensors())
      if (&t != graph.operand(Role::K) && &t != graph.operand(Role::V) && &t != graph.operand(Role::PageTable))
        bytes += static_cast<double>(tensor_storage_bytes(t));
    return bytes;
  };
  CHECK(testing::bytes_moved(paged.value(), pf.value(), in) == other_bytes(paged.value()) + held + page_ids);
  CHECK(testing::bytes_moved(dense.value(), df.value(), din) == other_bytes(dense.value()) + held);
  // Without per-sequence lengths every tensor counts once.
  Result<Graph> plain = load_graph_file(test::example_path("fp8_prefill"));
  REQUIRE(plain.ok());
  Result<Facts> plain_f = analyze(plain.value(), DeviceDesc::h200());
  REQUIRE(plain_f.ok());
  double plain_bytes = 0;
  for (const TensorDesc& t : plain->tensors()) plain_bytes += static_cast<double>(tensor_storage_bytes(t));
  CHECK(testing::bytes_moved(plain.value(), plain_f.value(), testing::TrialInputs{}) == plain_bytes);
  for (int64_t b = 0; b < 4; ++b)
    for (int64_t h = 0; h < 32; ++h) {
      const RowResult a = attention_row(paged.value(), pf.value(), in.tensors, b, h, 0);
      const RowResult c = attention_row(dense.value(), df.value(), din.tensors, b, h, 0);
      CHECK((a.lse == c.lse || (std::isinf(a.lse) && std::isinf(c.lse))));
      CHECK(a.o == c.o);
    }
}

TEST_CASE("inputs with a serving-like length mix, and a page table that follows the lengths", "[reference][paged]") {
  Result<Graph> g = load_graph_file(test::example_path("fp8_paged_decode"));
  REQUIRE(g.ok());
  testing::TrialInputs in = testing::make_inputs(g.value(), 3, 2, testing::LengthRange{100, 700});
  const TensorDesc &lens = *g->operand(Role::SeqLenKv), &table = *g->operand(Role::PageTable);
  auto len_of = [&](int64_t b) {
    return static_cast<int64_t>(load_element(DataType::INT32, in.tensors.at(lens.uid).data(), b));
  };
  auto page_of = [&](int64_t b, int64_t p) {
    return static_cast<int64_t>(load_element(DataType::INT32, in.tensors.at(table.uid).data(), b * 64 + p));
  };
  for (int64_t b = 0; b < 4; ++b) {
    CHECK(len_of(b) >= 100);
    CHECK(len_of(b) <= 700);
    for (int64_t p = 0; p < 64; ++p) {
      if (p * 16 < len_of(b)) CHECK((page_of(b, p) >= 0 && page_of(b, p) < 200));
      else CHECK(page_of(b, p) >= 200);  // never read: out of the pool on purpose
    }
  }
  // Lengths replaced after the fact (rime run --inputs): fill_page_table addresses the new ones.
  for (int64_t b = 0; b < 4; ++b) store_element(DataType::INT32, in.tensors.at(lens.uid).data(), b, 1024);
  testing::fill_page_table(g.value(), in, 3);
  for (int64_t b = 0; b < 4; ++b)
    for (int64_t p = 0; p < 64; ++p) CHECK((page_of(b, p) >= 0 && page_of(b, p) < 200));
}

TEST_CASE("combining k split partials equals the unsplit reference", "[reference][split]") {
  Result<Graph> g = load_graph_file(test::example_path("bf16_causal_sink"));
  REQUIRE(g.ok());
  // A smaller copy of the example: 2 heads' worth of rows is enough.
  Result<Facts> f = analyze(g.value(), DeviceDesc::h200());
  REQUIRE(f.ok());
  const testing::TrialInputs in = testing::make_inputs(g.value(), 11);
  const double sink = load_element(DataType::FP32, in.tensors.at(g->operand(Role::Sink)->uid).data(), 3);
  for (int64_t i : {int64_t{0}, int64_t{1}, int64_t{200}, int64_t{511}}) {
    RowResult whole = attention_row(g.value(), f.value(), in.tensors, 1, 3, i);
    const KvRange keys = unmasked_keys(g.value(), f.value(), in.tensors, 1, i);
    const int64_t tiles_lo = keys.first / 64, tiles_hi = (keys.last + 63) / 64;
    for (int splits : {1, 2, 3, 7, 64}) {  // 64 splits > the tiles: empty chunks
      std::vector<RowResult> parts;
      const int64_t n = tiles_hi - tiles_lo, per = n / splits, rem = n % splits;
      for (int k = 0; k < splits; ++k) {
        const int64_t first = tiles_lo + k * per + std::min<int64_t>(k, rem);
        const int64_t last = first + per + (k < rem ? 1 : 0);
        KvRange chunk{first * 64, last * 64};
        parts.push_back(attention_row(g.value(), f.value(), in.tensors, 1, 3, i, &chunk));
      }
      RowResult combined = combine_rows(parts, &sink);
      INFO("row " << i << " splits " << splits);
      CHECK(combined.lse == Approx(whole.lse).epsilon(1e-12));
      for (size_t d = 0; d < whole.o.size(); ++d) CHECK(combined.o[d] == Approx(whole.o[d]).margin(1e-12));
    }
  }
  // Every split empty and no sink: O = 0, LSE = -inf.
  RowResult empty;
  empty.o.assign(4, 0.0);
  empty.lse = -kInf;
  empty.live = true;
  RowResult none = combine_rows({empty, empty}, nullptr);
  CHECK(none.lse == -kInf);
  for (double x : none.o) CHECK(x == 0.0);
}

namespace {

// examples/fp8_prefill cut to B1 H2 S64 (two heads of 64 rows), O in `o_dtype` (the example's when empty).
Graph small_fp8_prefill(const std::string& o_dtype = "") {
  nlohmann::json doc = nlohmann::json::parse(test::read_text(test::example_path("fp8_prefill")));
  for (int t : {0, 1, 2, 9}) {
    doc["tensors"][t]["dims"] = {1, 2, 64, 128};
    doc["tensors"][t].erase("strides");
  }
  if (!o_dtype.empty()) doc["tensors"][9]["dtype"] = o_dtype;
  doc["tensors"][10]["dims"] = {1, 2, 64, 1};
  doc["tensors"][10].erase("strides");
  Result<Graph> g = graph_from_json(doc.dump());
  REQUIRE(g.ok());
  return g.value();
}

// What a kernel writes for small_fp8_prefill when its O is the reference times `factor` (a correct one: scale_o),
// with the reference's Stats, Amax_O and Amax_S.
HostTensors reference_outputs_times(const Graph& g, const Facts& f, const testing::TrialInputs& in, double factor) {
  const TensorDesc &o = *g.operand(Role::O), &stats = *g.operand(Role::Stats);
  HostTensors out;
  for (const TensorDesc& t : g.tensors())
    if (t.is_output) out[t.uid].assign(static_cast<size_t>(tensor_storage_bytes(t)), 0);
  double amax_o = 0, amax_s = 0;
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 64; ++i) {
      RowResult r = attention_row(g, f, in.tensors, 0, h, i);
      for (int64_t d = 0; d < 128; ++d) {
        store_element(o.dtype, out[o.uid].data(), offset_of(o, 0, h, i, d), r.o[d] * factor);
        amax_o = std::max(amax_o, std::fabs(r.o[d]));
      }
      store_element(DataType::FP32, out[stats.uid].data(), h * 64 + i, r.lse);
      amax_s = std::max(amax_s, r.max_p);
    }
  store_element(DataType::FP32, out[g.operand(Role::AmaxO)->uid].data(), 0, amax_o);
  store_element(DataType::FP32, out[g.operand(Role::AmaxS)->uid].data(), 0, amax_s);
  return out;
}

}  // namespace

TEST_CASE("the output check passes the reference's own outputs and fails broken ones", "[reference][check]") {
  const Graph g = small_fp8_prefill();
  Result<Facts> f = analyze(g, DeviceDesc::h200());
  REQUIRE(f.ok());
  const testing::TrialInputs in = testing::make_inputs(g, 21);

  // What a correct kernel would write: the reference, scaled by scale_o and cast.
  const TensorDesc &o = *g.operand(Role::O), &stats = *g.operand(Role::Stats);
  const double scale_o = load_element(DataType::FP32, in.tensors.at(g.operand(Role::ScaleO)->uid).data(), 0);
  HostTensors outputs = reference_outputs_times(g, f.value(), in, scale_o);
  const int64_t amax_o_uid = g.operand(Role::AmaxO)->uid;
  const double amax_o = load_element(DataType::FP32, outputs[amax_o_uid].data(), 0);

  testing::TrialReport good = testing::check_outputs(g, f.value(), in, outputs, {});
  for (const auto& msg : good.failures) INFO(msg);
  CHECK(good.passed);
  CHECK(good.rows_checked == 128);

  SECTION("an unwritten element (the NaN poison) fails") {
    outputs[o.uid][offset_of(o, 0, 1, 63, 127)] = 0xFF;
    testing::TrialReport bad = testing::check_outputs(g, f.value(), in, outputs, {});
    CHECK_FALSE(bad.passed);
    CHECK(bad.failures.at(0).find("unwritten or non-finite") != std::string::npos);
  }
  SECTION("one element outside the FP8 tolerance fails") {
    const int64_t at = offset_of(o, 0, 0, 5, 7);
    store_element(o.dtype, outputs[o.uid].data(), at, load_element(o.dtype, outputs[o.uid].data(), at) + 2.0 * scale_o);
    CHECK_FALSE(testing::check_outputs(g, f.value(), in, outputs, {}).passed);
  }
  SECTION("a wrong LSE fails") {
    store_element(DataType::FP32, outputs[stats.uid].data(), 3,
                  load_element(DataType::FP32, outputs[stats.uid].data(), 3) + 0.1);
    CHECK_FALSE(testing::check_outputs(g, f.value(), in, outputs, {}).passed);
  }
  SECTION("a wrong Amax_O fails") {
    store_element(DataType::FP32, outputs[amax_o_uid].data(), 0, amax_o * 2 + 1);
    CHECK_FALSE(testing::check_outputs(g, f.value(), in, outputs, {}).passed);
  }
}

TEST_CASE("a 16-bit O of an FP8 graph meets the element rule and relative L2 under 3e-2", "[reference][check]") {
  const Graph g = small_fp8_prefill("BF16");
  Result<Facts> f = analyze(g, DeviceDesc::h200());
  REQUIRE(f.ok());
  const testing::TrialInputs in = testing::make_inputs(g, 22);
  // The reference scaled by 1 + e: every element stays inside atol + rtol * |ref| (rtol 0.2) for e of a few
  // percent, so only the relative-L2 bound of SPEC section 10 tells 2% from 4%.
  auto outputs_scaled_by = [&](double factor) { return reference_outputs_times(g, f.value(), in, factor); };
  const testing::TrialReport two = testing::check_outputs(g, f.value(), in, outputs_scaled_by(1.02), {});
  for (const auto& msg : two.failures) INFO(msg);
  CHECK(two.passed);
  CHECK(two.elements_outside == 0);
  const testing::TrialReport four = testing::check_outputs(g, f.value(), in, outputs_scaled_by(1.04), {});
  CHECK(four.elements_outside == 0);
  CHECK_FALSE(four.passed);
  REQUIRE_FALSE(four.failures.empty());
  CHECK(four.failures.back().find(">= 0.03 (a 16-bit O of an FP8 graph)") != std::string::npos);
}

// What a correct block-scaled kernel writes, from the reference and its quantizers, then broken four ways.
TEST_CASE("the block-scaled output check passes quantized reference outputs and fails broken ones",
          "[reference][check][block_scale]") {
  for (int block : {16, 32})
    for (bool token_major : {false, true}) {
      test::BlockScaledCase c;
      c.block = block, c.token_major = token_major, c.B = 1, c.H_q = 2, c.H_kv = 1, c.S_q = 130, c.S_kv = 64, c.D = 64;
      const Graph g = test::block_scaled_graph(c);
      REQUIRE(validate(g).ok());
      Result<Facts> f = analyze(g, DeviceDesc::h200());
      REQUIRE(f.ok());
      INFO(c.describe());
      const testing::TrialInputs in = testing::make_inputs(g, 5);
      const TensorDesc &o = *g.operand(Role::O), &sf = *g.operand(Role::SfO);
      const double scale_o = load_element(DataType::FP32, in.tensors.at(g.operand(Role::ScaleO)->uid).data(), 0);
      HostTensors outputs;
      for (const TensorDesc& t : g.tensors())
        if (t.is_output) outputs[t.uid].assign(static_cast<size_t>(tensor_storage_bytes(t)), 0);
      double amax_o = 0;
      auto sf_at = [&](int64_t h, int64_t r, int64_t blk) {
        return sf_o_offset(*f->sf_o_layout, c.H_q, f->sf_o_rows, f->sf_o_cols, 0, h, r, blk);
      };
      for (int64_t h = 0; h < c.H_q; ++h)
        for (int64_t i = 0; i < c.S_q; ++i) {
          RowResult r = attention_row(g, f.value(), in.tensors, 0, h, i);
          for (int64_t blk = 0; blk < c.D / block; ++blk) {
            float v[32];
            for (int n = 0; n < block; ++n) {
              v[n] = static_cast<float>(r.o[blk * block + n] * scale_o);
              amax_o = std::max(amax_o, std::fabs(r.o[blk * block + n]));
            }
            if (block == 16) {
              const Nvfp4Block q = quantize_nvfp4(v);
              outputs[sf.uid][sf_at(h, i, blk)] = q.scale;
              for (int n = 0; n < 16; ++n) {
                const int64_t at = offset_of(o, 0, h, i, blk * 16 + n);
                outputs[o.uid][at / 2] |= static_cast<uint8_t>(q.codes[n] << (at % 2 ? 4 : 0));
              }
            } else {
              const Mxfp8Block q = quantize_mxfp8(v);
              outputs[sf.uid][sf_at(h, i, blk)] = q.scale;
              for (int n = 0; n < 32; ++n) outputs[o.uid][offset_of(o, 0, h, i, blk * 32 + n)] = q.codes[n];
            }
          }
        }
      store_element(DataType::FP32, outputs[g.operand(Role::AmaxO)->uid].data(), 0, amax_o);

      testing::TrialReport good = testing::check_outputs(g, f.value(), in, outputs, {});
      for (const auto& msg : good.failures) INFO(msg);
      CHECK(good.passed);
      CHECK(good.o_rel_l2 == Approx(good.quant_rel_l2).margin(1e-6));
      auto fails_with = [&](const HostTensors& broken, const std::string& what) {
        testing::TrialReport bad = testing::check_outputs(g, f.value(), in, broken, {});
        CHECK_FALSE(bad.passed);
        bool found = false;
        std::string all;
        for (const auto& msg : bad.failures) {
          found = found || msg.find(what) != std::string::npos;
          all += msg + "\n";
        }
        INFO("expected a failure mentioning '" << what << "'; got:\n" << all);
        CHECK(found);
      };
      {
        HostTensors broken = outputs;  // a block scale left as the 0xFF poison
        broken[sf.uid][sf_at(1, 129, 1)] = 0xFF;
        fails_with(broken, "unwritten or non-finite");
      }
      {
        HostTensors broken = outputs;  // a block scale 3 codes off
        broken[sf.uid][sf_at(0, 7, 0)] = static_cast<uint8_t>(broken[sf.uid][sf_at(0, 7, 0)] + 3);
        fails_with(broken, "more than one code");
      }
      {
        HostTensors broken = outputs;  // one row's codes left as the 0xFF poison
        for (int64_t d = 0; d < c.D; ++d) {
          const int64_t at = offset_of(o, 0, 0, 50, d);
          broken[o.uid][block == 16 ? at / 2 : at] = 0xFF;
        }
        fails_with(broken, block == 16 ? "outside the FP8 tolerance" : "unwritten or non-finite");
      }
      if (!token_major) {
        HostTensors broken = outputs;  // a pad row of a plane not zeroed
        broken[sf.uid][sf_at(1, 200, 0)] = 0x38;
        fails_with(broken, "pad rows or pad columns");
      }
      if (block == 32) {
        HostTensors broken = outputs;  // a pad column (D 64 / 32 = 2 blocks, C = 4) not zeroed
        broken[sf.uid][sf_at(0, 3, 3)] = 0x7F;
        fails_with(broken, "pad rows or pad columns");
      }
    }
}

// MXFP8 inputs in the reference: with every scale 2^0 the row equals the per-tensor FP8 reference of the same
// bytes (descales 1); a Q row whose scales are all 2^1 equals attn_scale doubled; one V block at 2^1 doubles
// exactly that block's keys' share of O.
TEST_CASE("per-(batch, kv head) descales: query head h of batch b reads entry [b, h / group]", "[reference]") {
  const int64_t B = 2, H_kv = 2, group = 3, H_q = H_kv * group, S_q = 9, S_kv = 40, D = 64;
  auto build = [&](unsigned per_head) {
    Graph g("descales");
    test::TensorAdder add{g};
    SdpaFp8Operands io;
    io.q = add("Q", {B, H_q, S_q, D}, DataType::FP8_E4M3);
    io.k = add("K", {B, H_kv, S_kv, D}, DataType::FP8_E4M3);
    io.v = add("V", {B, H_kv, S_kv, D}, DataType::FP8_E4M3);
    io.o = add("O", {B, H_q, S_q, D}, DataType::BF16, true);
    test::add_fp8_scalars(add, io, per_head, B, H_kv);
    REQUIRE(g.sdpa_fp8(io, {}, "attn").ok());
    return g;
  };
  const Graph per_head = build(test::kPerHeadQ | test::kPerHeadK | test::kPerHeadV), per_tensor = build(0);
  REQUIRE(validate(per_head).ok());
  Result<Facts> fh = analyze(per_head, DeviceDesc::h200()), ft = analyze(per_tensor, DeviceDesc::h200());
  REQUIRE(fh.ok());
  REQUIRE(ft.ok());
  CHECK(fh->per_head_descales);
  CHECK_FALSE(ft->per_head_descales);
  const testing::TrialInputs in = testing::make_inputs(per_head, 5);  // a draw per (batch, kv head)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H_q; ++h) {
      // The per-tensor graph with the three descales of entry [b, h / group] gives the same row.
      HostTensors flat = in.tensors;
      for (Role r : {Role::DescaleQ, Role::DescaleK, Role::DescaleV}) {
        const int64_t uid = per_head.operand(r)->uid;
        const double v = load_element(DataType::FP32, in.tensors.at(uid).data(), b * H_kv + h / group);
        flat[uid].assign(4, 0);
        store_element(DataType::FP32, flat[uid].data(), 0, v);
      }
      for (int64_t i : {0, 8}) {
        const RowResult a = attention_row(per_head, fh.value(), in.tensors, b, h, i);
        const RowResult c = attention_row(per_tensor, ft.value(), flat, b, h, i);
        for (int64_t d = 0; d < D; ++d) CHECK(a.o[d] == c.o[d]);
        CHECK(a.lse == c.lse);
      }
    }
  // And the entries differ (one draw each), so a reader of entry 0 would not pass the rows above.
  const std::vector<uint8_t>& dk = in.tensors.at(per_head.operand(Role::DescaleK)->uid);
  CHECK(load_element(DataType::FP32, dk.data(), 0) != load_element(DataType::FP32, dk.data(), 3));

  // uniform_descales (the per-head bench rows): every entry holds the value the per-tensor graph draws from the
  // same seed, and every other input is the per-tensor graph's, byte for byte.
  const testing::TrialInputs same = testing::make_inputs(per_head, 5, 2, std::nullopt, std::nullopt, true);
  const testing::TrialInputs twin = testing::make_inputs(per_tensor, 5);
  for (Role r : {Role::DescaleQ, Role::DescaleK, Role::DescaleV}) {
    const double want = load_element(DataType::FP32, twin.tensors.at(per_tensor.operand(r)->uid).data(), 0);
    const std::vector<uint8_t>& got = same.tensors.at(per_head.operand(r)->uid);
    for (int64_t e = 0; e < B * H_kv; ++e) CHECK(load_element(DataType::FP32, got.data(), e) == want);
  }
  for (Role r : {Role::Q, Role::K, Role::V, Role::ScaleO})
    CHECK(same.tensors.at(per_head.operand(r)->uid) == twin.tensors.at(per_tensor.operand(r)->uid));
}

TEST_CASE("the MXFP8-input reference applies SF_Q, SF_K and SF_V where SPEC section 6 puts them", "[reference][mx]") {
  test::MxInputsCase c;
  c.B = 1, c.H_q = 2, c.H_kv = 1, c.S_q = 40, c.S_kv = 70, c.D = 64;
  const Graph mx = test::mx_inputs_graph(c);
  REQUIRE(validate(mx).ok());
  Result<Facts> fm = analyze(mx, DeviceDesc::h200());
  REQUIRE(fm.ok());
  testing::TrialInputs in = testing::make_inputs(mx, 8);
  auto set_all = [&](Role role, uint8_t e) {
    auto& bytes = in.tensors.at(mx.operand(role)->uid);
    std::fill(bytes.begin(), bytes.end(), e);
  };
  for (Role r : {Role::SfQ, Role::SfK, Role::SfV}) set_all(r, 127);

  // The same Q/K/V bytes as an sdpa_fp8 graph with unit descales.
  const Graph fp8 = [&] {
    Graph g("fp8_twin");
    for (const TensorDesc& t : mx.tensors())
      if (t.name == "Q" || t.name == "K" || t.name == "V" || t.name == "O") g.add_tensor(t);
    SdpaFp8Operands io;
    io.q = 1, io.k = 2, io.v = 3, io.o = mx.operand(Role::O)->uid;
    int64_t uid = 100;
    for (int64_t* s : {&io.descale_q, &io.descale_k, &io.descale_v, &io.descale_s, &io.scale_s, &io.scale_o})
      *s = g.add_tensor({fmt::format("s{}", uid), ++uid, {1, 1, 1, 1}, {1, 1, 1, 1}, DataType::FP32, false});
    REQUIRE(g.sdpa_fp8(io, {}, "attn").ok());
    return g;
  }();
  REQUIRE(validate(fp8).ok());
  Result<Facts> ff = analyze(fp8, DeviceDesc::h200());
  REQUIRE(ff.ok());
  HostTensors twin = in.tensors;
  for (int64_t uid = 101; uid <= 106; ++uid) {
    twin[uid].assign(4, 0);
    store_element(DataType::FP32, twin[uid].data(), 0, 1.0);
  }
  for (int64_t i : {0, 17, 39}) {
    RowResult a = attention_row(mx, fm.value(), in.tensors, 0, 1, i), b = attention_row(fp8, ff.value(), twin, 0, 1, i);
    for (int64_t d = 0; d < c.D; ++d) CHECK(a.o[d] == Approx(b.o[d]).margin(1e-12));
    CHECK(a.lse == Approx(b.lse).margin(1e-12));
  }
  // Q row 5 of head 0 at 2^1 in both of its blocks == attention with attn_scale doubled for that row.
  const TensorDesc& sfq = *mx.operand(Role::SfQ);
  for (int64_t blk = 0; blk < 2; ++blk) in.tensors.at(sfq.uid)[f8_128x4_offset(5, blk, sfq.dims[3])] = 128;
  Facts doubled = ff.value();
  doubled.attn_scale *= 2;
  RowResult a = attention_row(mx, fm.value(), in.tensors, 0, 0, 5), b = attention_row(fp8, doubled, twin, 0, 0, 5);
  for (int64_t d = 0; d < c.D; ++d) CHECK(a.o[d] == Approx(b.o[d]).margin(1e-12));
  // V column 3, keys 32..63 at 2^1: O[3] gains exactly those keys' share once more; other columns are unchanged.
  const TensorDesc& sfv = *mx.operand(Role::SfV);
  RowResult before = attention_row(mx, fm.value(), in.tensors, 0, 0, 39);
  in.tensors.at(sfv.uid)[f8_128x4_offset(3, 1, sfv.dims[3])] = 128;
  RowResult after = attention_row(mx, fm.value(), in.tensors, 0, 0, 39);
  CHECK(after.o[2] == Approx(before.o[2]).margin(1e-12));
  CHECK(after.o[3] != Approx(before.o[3]).margin(1e-6));
}

TEST_CASE("a ragged graph's reference equals the padded graph's on the same sequences", "[reference][ragged]") {
  Result<Graph> ragged = load_graph_file(test::data_path("bf16_ragged_prefill"));
  REQUIRE(ragged.ok());
  Result<Facts> rf = analyze(ragged.value(), DeviceDesc::h200());
  REQUIRE(rf.ok());
  CHECK(rf->ragged_q);
  CHECK(rf->ragged_kv);
  CHECK(rf->B == 4);
  CHECK(rf->S_q == 128);  // max_seqlen_q
  CHECK(rf->T_q == 300);
  CHECK(rf->mask.padding);
  // The padded twin: [4, H, 128, D] with seq_len_q / seq_len_kv.
  const Graph padded = test::padded_twin(ragged.value(), rf.value());
  Result<Facts> pf = analyze(padded, DeviceDesc::h200());
  REQUIRE(pf.ok());
  for (uint64_t seed : {3u, 4u}) {
    const testing::TrialInputs rin = testing::make_inputs(ragged.value(), seed);
    // The drawn offsets: non-decreasing, inside the 300 tokens, lengths at most 128, the first full, the second
    // empty.
    int64_t prev_end = 0;
    for (int64_t b = 0; b < 4; ++b) {
      for (const SeqExtent& e : {q_extent(ragged.value(), rf.value(), rin.tensors, b),
                                 kv_extent(ragged.value(), rf.value(), rin.tensors, b)}) {
        CHECK(e.batch == 0);
        CHECK(e.first >= 0);
        CHECK(e.length >= 0);
        CHECK(e.length <= 128);
        CHECK(e.first + e.length <= 300);
        if (b == 0) CHECK(e.length == 128);
        if (b == 1) CHECK(e.length == 0);
      }
      const SeqExtent q = q_extent(ragged.value(), rf.value(), rin.tensors, b);
      if (b > 0) CHECK(q.first == prev_end);
      prev_end = q.first + q.length;
    }
    const testing::TrialInputs pin = test::padded_inputs(ragged.value(), rf.value(), rin, padded);
    int64_t live = 0;
    for (int64_t b = 0; b < 4; ++b)
      for (int64_t h = 0; h < 4; ++h)
        for (int64_t i = 0; i < 128; ++i) {
          const RowResult a = attention_row(ragged.value(), rf.value(), rin.tensors, b, h, i);
          const RowResult c = attention_row(padded, pf.value(), pin.tensors, b, h, i);
          INFO("seed " << seed << " b " << b << " h " << h << " i " << i);
          REQUIRE(a.live == c.live);
          if (!a.live) continue;
          ++live;
          CHECK(a.lse == c.lse);  // the same keys in the same order: bit-identical
          CHECK(a.o == c.o);
        }
    CHECK(live > 0);
    // TFLOP/s count the pairs the sequences hold, the same for both forms of the batch.
    const double flops = testing::attention_flops(ragged.value(), rf.value(), rin);
    CHECK(flops > 0);
    CHECK(flops == testing::attention_flops(padded, pf.value(), pin));
    CHECK(flops < testing::attention_flops(pf.value()));  // the second sequence is empty
  }
}

TEST_CASE("the output check reads a ragged O at each sequence's tokens and nowhere else", "[reference][ragged][check]") {
  Result<Graph> g = load_graph_file(test::data_path("bf16_ragged_prefill"));
  REQUIRE(g.ok());
  Result<Facts> f = analyze(g.value(), DeviceDesc::h200());
  REQUIRE(f.ok());
  const testing::TrialInputs in = testing::make_inputs(g.value(), 9);
  const TensorDesc &o = *g->operand(Role::O), &stats = *g->operand(Role::Stats);
  // Poison everywhere (as the harness does), then the reference at the sequences' tokens: the tokens outside
  // every sequence stay NaN and must not be read.
  HostTensors outputs;
  outputs[o.uid].assign(static_cast<size_t>(tensor_storage_bytes(o)), 0xFF);
  outputs[stats.uid].assign(static_cast<size_t>(tensor_storage_bytes(stats)), 0xFF);
  int64_t rows = 0;
  for (int64_t b = 0; b < f->B; ++b) {
    const SeqExtent e = q_extent(g.value(), f.value(), in.tensors, b);
    for (int64_t h = 0; h < f->H_q; ++h)
      for (int64_t i = 0; i < e.length; ++i, ++rows) {
        const RowResult r = attention_row(g.value(), f.value(), in.tensors, b, h, i);
        for (int64_t d = 0; d < f->D_v; ++d) store_element(o.dtype, outputs[o.uid].data(), seq_offset(o, e, h, i, d), r.o[d]);
        store_element(DataType::FP32, outputs[stats.uid].data(), seq_offset(stats, e, h, i, 0), r.lse);
      }
  }
  REQUIRE(rows > 0);
  const testing::TrialReport good = testing::check_outputs(g.value(), f.value(), in, outputs, {});
  std::string failures;
  for (const auto& msg : good.failures) failures += "\n  " + msg;
  INFO("check_outputs:" << failures);
  CHECK(good.passed);
  CHECK(good.rows_checked == rows);
  // The tokens outside every sequence are still the poison; one written there is found (the GPU test's check).
  std::string first_foreign;
  CHECK(test::foreign_tokens_written(g.value(), f.value(), in, outputs, Role::O, first_foreign) == 0);
  CHECK(test::foreign_tokens_written(g.value(), f.value(), in, outputs, Role::Stats, first_foreign) == 0);
  {
    // The first sequence's first token taken out of it (cu_seqlens_q[0] + 1): its O, written above, is now a
    // write outside every sequence.
    testing::TrialInputs shifted = in;
    const SeqExtent head = q_extent(g.value(), f.value(), in.tensors, 0);
    REQUIRE(head.length > 0);
    store_element(DataType::INT32, shifted.tensors.at(g->operand(Role::CuSeqlensQ)->uid).data(), 0,
                  static_cast<double>(head.first + 1));
    CHECK(test::foreign_tokens_written(g.value(), f.value(), shifted, outputs, Role::O, first_foreign) == 1);
    CHECK(first_foreign == "token " + std::to_string(head.first));
  }
  // A sequence's last token left unwritten fails.
  const SeqExtent first = q_extent(g.value(), f.value(), in.tensors, 0);
  REQUIRE(first.length > 0);
  store_element(o.dtype, outputs[o.uid].data(), seq_offset(o, first, 2, first.length - 1, 5), std::nan(""));
  const testing::TrialReport bad = testing::check_outputs(g.value(), f.value(), in, outputs, {});
  CHECK_FALSE(bad.passed);
  REQUIRE_FALSE(bad.failures.empty());
  CHECK(bad.failures.at(0).find("unwritten or non-finite") != std::string::npos);
}

TEST_CASE("FLOPs of a padded run count each sequence's pairs, and at full lengths the tensor formula", "[reference]") {
  Result<Graph> g = load_graph_file(test::example_path("fp16_window_padding"));  // causal + window 256, S 1000
  REQUIRE(g.ok());
  Result<Facts> f = analyze(g.value(), DeviceDesc::h200());
  REQUIRE(f.ok());
  testing::TrialInputs in = testing::make_inputs(g.value(), 2);
  for (Role r : {Role::SeqLenQ, Role::SeqLenKv})
    for (int64_t b = 0; b < f->B; ++b) store_element(DataType::INT32, in.tensors.at(g->operand(r)->uid).data(), b, 1000);
  CHECK(testing::attention_flops(g.value(), f.value(), in) == testing::attention_flops(f.value()));
  // One sequence of 10 queries over 10 keys, the others empty: 10 x 11 / 2 causal pairs (the window of 256 is
  // wider), times H_q 8 and 2 (D_qk + D_v) = 512 FLOPs a pair.
  for (int64_t b = 0; b < f->B; ++b)
    for (Role r : {Role::SeqLenQ, Role::SeqLenKv})
      store_element(DataType::INT32, in.tensors.at(g->operand(r)->uid).data(), b, b == 2 ? 10 : 0);
  CHECK(testing::attention_flops(g.value(), f.value(), in) == 55.0 * 8 * 512);
}

TEST_CASE("a 16-bit Q over FP8 K/V is valid and referenced, served by the mma.sync FP8 row, declined with the reason by the Hopper rows", "[reference][validate]") {
  // examples/fp8_prefill with Q in BF16: an FP8 K/V cache read by a BF16 model.
  nlohmann::json doc = nlohmann::json::parse(test::read_text(test::example_path("fp8_prefill")));
  doc["tensors"][0]["dtype"] = "BF16";
  Result<Graph> mixed = graph_from_json(doc.dump());
  REQUIRE(mixed.ok());
  REQUIRE(validate(mixed.value()).ok());
  Result<Graph> fp8 = load_graph_file(test::example_path("fp8_prefill"));
  REQUIRE(fp8.ok());
  Result<Facts> mf = analyze(mixed.value(), DeviceDesc::h200()), ff = analyze(fp8.value(), DeviceDesc::h200());
  REQUIRE(mf.ok());
  REQUIRE(ff.ok());
  CHECK(mf->q().dtype == DataType::BF16);
  CHECK(mf->k().dtype == DataType::FP8_E4M3);
  int accepted = 0;
  for (const RowVerdict& v : match(mf.value())) {
    INFO(v.row_id << ": " << v.reason);
    CHECK(v.accepted == (v.row_id == "sdpa_mma_fp8"));
    accepted += v.accepted;
    if (v.row_id == "sdpa_sm90_fp8" || v.row_id == "sdpa_sm90_fp8_prepass")
      CHECK(v.reason == "row " + v.row_id +
                            ": Q dtype BF16 over K/V dtype FP8_E4M3 (a 16-bit Q over an FP8 K/V cache) not supported");
  }
  CHECK(accepted == 1);
  // The reference reads Q in its own type: with Q values that E4M3 holds exactly (the FP8 graph's inputs,
  // widened), its rows are the FP8 graph's, bit for bit (descale_q applies to either).
  const testing::TrialInputs in = testing::make_inputs(fp8.value(), 12);
  HostTensors widened = in.tensors;
  const TensorDesc &q8 = *fp8->operand(Role::Q), &q16 = *mixed->operand(Role::Q);
  widened[q16.uid].assign(static_cast<size_t>(tensor_storage_bytes(q16)), 0);
  for (int64_t e = 0; e < q8.dims[0] * q8.dims[1] * q8.dims[2] * q8.dims[3]; ++e)
    store_element(DataType::BF16, widened[q16.uid].data(), e, load_element(DataType::FP8_E4M3, in.tensors.at(q8.uid).data(), e));
  for (auto [b, h, i] : {std::tuple{0, 0, 0}, std::tuple{1, 5, 700}, std::tuple{1, 7, 1023}}) {
    const RowResult a = attention_row(mixed.value(), mf.value(), widened, b, h, i);
    const RowResult c = attention_row(fp8.value(), ff.value(), in.tensors, b, h, i);
    CHECK(a.lse == c.lse);
    CHECK(a.o == c.o);
  }
}

TEST_CASE("docs/testing.md states the tolerances the output check applies", "[reference][check][docs]") {
  // One source: tools/testing/tolerances.hpp. Each value must appear in the docs' Tolerances section where it is
  // stated (the section read as one line, so that wrapping does not matter).
  namespace tol = testing::tolerance;
  const std::string doc = test::read_text(test::source_dir() + "/docs/testing.md");
  const size_t from = doc.find("## Tolerances"), to = doc.find("\n## ", from + 1);
  REQUIRE(from != std::string::npos);
  std::string section;
  for (char c : doc.substr(from, to - from)) section += c == '\n' ? ' ' : c;
  auto g = [](double v) {  // 0.08, 0.125, 1e-5 (fmt's 1e-05 without the exponent's leading zero)
    std::string s = fmt::format("{:g}", v);
    const size_t e = s.find("e-0");
    return e == std::string::npos ? s : s.erase(e + 2, 1);
  };
  const std::string statements[] = {
      fmt::format("atol + {} |O_ref| with atol {} ({} for an E5M2 O)", g(tol::kFp8Rtol), g(tol::kFp8Atol),
                  g(tol::kE5m2OAtol)),
      fmt::format("at most {} of the elements outside", g(tol::kOutsideFraction)),
      fmt::format("within relative L2 {} of the reference", g(tol::kFp8Graph16BitORelL2)),
      fmt::format("checked by relative L2 under {}", g(tol::k16BitRelL2)),
      fmt::format("|Stats - ref| <= {} + {} |ref|", g(tol::kLseAtol), g(tol::kLseRtol)),
      fmt::format("Amax_S within {} + {} relative", g(tol::kAmaxSAtol), g(tol::kAmaxSRtol)),
      fmt::format("{} steps of the reference block's grid", tol::kBlockScaledGridSteps),
      fmt::format("own quantization error plus {}", g(tol::kBlockScaledRelL2Slack)),
  };
  for (const std::string& s : statements) {
    INFO(s);
    CHECK(section.find(s) != std::string::npos);
  }
}
