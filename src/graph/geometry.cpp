#include "graph/geometry.hpp"

#include <algorithm>
#include <array>
#include <numeric>

namespace rime {

namespace {
bool dense_in_order(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                    const std::array<int, 4>& order /* slowest to fastest */) {
  int64_t expect = 1;
  for (int i = 3; i >= 0; --i) {
    int d = order[i];
    if (dims[d] != 1 && strides[d] != expect) return false;
    expect *= dims[d];
  }
  return true;
}
}  // namespace

Layout classify_layout(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  if (dims.size() != 4 || strides.size() != 4) return Layout::Strided;
  if (dense_in_order(dims, strides, {0, 1, 2, 3})) return Layout::Bhsd;
  if (dense_in_order(dims, strides, {0, 2, 1, 3})) return Layout::Bshd;
  std::array<int, 3> outer = {0, 1, 2};
  do {
    if (dense_in_order(dims, strides, {outer[0], outer[1], outer[2], 3})) return Layout::DenseOther;
  } while (std::next_permutation(outer.begin(), outer.end()));
  return Layout::Strided;
}

std::optional<SfLayout> classify_sf_layout(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  if (dims.size() != 4 || strides.size() != 4) return std::nullopt;
  const int64_t H = dims[1], R = dims[2], C = dims[3];
  if (strides == std::vector<int64_t>{H * R * C, R * C, C, 1}) return SfLayout::Planes;
  if (strides == std::vector<int64_t>{R * H * C, C, H * C, 1}) return SfLayout::TokenMajor;
  return std::nullopt;
}

std::optional<int64_t> element_span(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  int64_t span = 1;
  for (size_t i = 0; i < dims.size() && i < strides.size(); ++i) {
    int64_t term;
    if (dims[i] < 1 || strides[i] < 0) return std::nullopt;
    if (__builtin_mul_overflow(dims[i] - 1, strides[i], &term)) return std::nullopt;
    if (__builtin_add_overflow(span, term, &span)) return std::nullopt;
  }
  return span;
}

int64_t tensor_storage_bytes(const TensorDesc& t) {
  const int64_t span = element_span(t.dims, t.strides).value_or(0);
  return (span * bits_of(t.dtype) + 7) / 8;
}

std::optional<int64_t> element_count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return std::nullopt;
    if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}

}  // namespace rime
