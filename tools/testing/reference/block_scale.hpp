// Internal: the block-scaled O quantizers of SPEC section 5, bit-exact in fp32 arithmetic, and where sf_o keeps
// each scale (F8_128x4 order, per-(b,h) planes or token-major).
#pragma once

#include <array>
#include <cstdint>

#include "rime/inspect/facts.hpp"

namespace rime::reference {

// NVFP4: 16 values o = O * scale_o (fp32) -> E4M3 scale sf = e4m3(amax16 * (1/6)), dec = value(sf),
// inv = dec > 0 ? 1/dec : 0, codes e2m1(o * inv). Dequantized: code * dec / scale_o.
struct Nvfp4Block {
  uint8_t scale = 0;
  std::array<uint8_t, 16> codes{};  // one E2M1 nibble each (low 4 bits)
};
Nvfp4Block quantize_nvfp4(const float* o16);

// MXFP8: 32 values -> UE8M0 exponent e of ceil_pow2(amax32 / 448), from amax's fp32 bits (E, mantissa):
// e = E - 8 + (mantissa > 0x600000), clamped to [0, 254]; inv = 2^(127 - e) (0 when e == 0); codes
// e4m3(o * inv). Dequantized: code * 2^(e - 127) / scale_o.
struct Mxfp8Block {
  uint8_t scale = 0;
  std::array<uint8_t, 32> codes{};
};
uint8_t mxfp8_scale_exponent(float amax);
Mxfp8Block quantize_mxfp8(const float* o32);

// Byte offset in sf_o (dims [B, H, R, C]) of the scale of block c of row r of head h, batch b.
int64_t sf_o_offset(SfLayout layout, int64_t H, int64_t R, int64_t C, int64_t b, int64_t h, int64_t r, int64_t c);

}  // namespace rime::reference
