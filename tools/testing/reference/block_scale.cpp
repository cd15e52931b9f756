#include "testing/reference/block_scale.hpp"

#include <cmath>
#include <cstring>

#include "graph/geometry.hpp"
#include "testing/reference/formats.hpp"

namespace rime::reference {
namespace {
// fmaxf semantics: a NaN operand is ignored, as the kernels' max reductions do.
float amax_of(const float* v, int n) {
  float m = 0.f;
  for (int i = 0; i < n; ++i) m = std::fmax(m, std::fabs(v[i]));
  return m;
}
}  // namespace

Nvfp4Block quantize_nvfp4(const float* o) {
  Nvfp4Block blk;
  const float amax = amax_of(o, 16);
  const float sixth = 1.0f / 6.0f;
  blk.scale = encode_e4m3(static_cast<double>(amax * sixth));
  const float dec = static_cast<float>(decode_e4m3(blk.scale));
  const float inv = dec > 0.f ? 1.0f / dec : 0.f;
  for (int i = 0; i < 16; ++i) blk.codes[i] = encode_e2m1(static_cast<double>(o[i] * inv));
  return blk;
}

uint8_t mxfp8_scale_exponent(float amax) {
  uint32_t bits;
  std::memcpy(&bits, &amax, 4);
  const int32_t E = static_cast<int32_t>((bits >> 23) & 0xFF);
  const uint32_t mantissa = bits & 0x7FFFFF;
  int32_t e = E - 8 + (mantissa > 0x600000 ? 1 : 0);
  if (e < 0) e = 0;
  if (e > 254) e = 254;
  return static_cast<uint8_t>(e);
}

Mxfp8Block quantize_mxfp8(const float* o) {
  Mxfp8Block blk;
  blk.scale = mxfp8_scale_exponent(amax_of(o, 32));
  const float inv = blk.scale == 0 ? 0.f : std::ldexp(1.0f, 127 - blk.scale);
  for (int i = 0; i < 32; ++i) blk.codes[i] = encode_e4m3(static_cast<double>(o[i] * inv));
  return blk;
}

int64_t sf_o_offset(SfLayout layout, int64_t H, int64_t R, int64_t C, int64_t b, int64_t h, int64_t r, int64_t c) {
  if (layout == SfLayout::Planes) return (b * H + h) * R * C + f8_128x4_offset(r, c, C);
  // Token-major: one [B*R, H*C] matrix, row b*R + r, column h*C + c.
  return f8_128x4_offset(b * R + r, h * C + c, H * C);
}

}  // namespace rime::reference
