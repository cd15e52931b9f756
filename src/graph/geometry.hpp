// Internal: layout and scale-factor geometry shared by validate, analyze and the engines' launchers.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "rime/graph.hpp"
#include "rime/types.hpp"

namespace rime {

inline constexpr int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
inline constexpr int64_t ceil_div(int64_t x, int64_t m) { return (x + m - 1) / m; }

// dims [B, H, R, C]. Planes: (H*R*C, R*C, C, 1). Token-major: (R*H*C, C, H*C, 1).
std::optional<SfLayout> classify_sf_layout(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides);

// Byte offset of logical scale (r, c) in an F8_128x4 matrix with `cols` columns (cols a multiple of 4). The
// 128x4 atom stores 32-row groups interleaved so that a block-scaled MMA reads 16 bytes per row group: e.g. with
// cols = 8, (r=33, c=5) lands in atom column 1 (512 bytes in), row 33 % 32 = 1 -> +16, row group 1 -> +4,
// column 5 % 4 = 1 -> +1: byte 533.
inline constexpr int64_t f8_128x4_offset(int64_t r, int64_t c, int64_t cols) {
  return (r / 128) * 128 * cols + (c / 4) * 512 + (r % 32) * 16 + ((r / 32) % 4) * 4 + (c % 4);
}

// Elements spanned by a tensor (1 + sum (d-1)*stride), or nullopt on int64 overflow.
std::optional<int64_t> element_span(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides);
// Product of dims, or nullopt on overflow.
std::optional<int64_t> element_count(const std::vector<int64_t>& dims);

}  // namespace rime
