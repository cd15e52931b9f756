#include "rime/types.hpp"

#include <cstdint>

namespace rime {

std::string_view to_string(DataType type) noexcept {
  switch (type) {
    case DataType::FP32: return "FP32";
    case DataType::FP16: return "FP16";
    case DataType::BF16: return "BF16";
    case DataType::FP8_E4M3: return "FP8_E4M3";
    case DataType::FP8_E5M2: return "FP8_E5M2";
    case DataType::FP4_E2M1: return "FP4_E2M1";
    case DataType::FP8_E8M0: return "FP8_E8M0";
    case DataType::INT32: return "INT32";
    case DataType::INT64: return "INT64";
  }
  return "?";
}

std::optional<DataType> parse_data_type(std::string_view name) noexcept {
  for (DataType t : kAllDataTypes)
    if (to_string(t) == name) return t;
  return std::nullopt;
}

int bits_of(DataType type) noexcept {
  switch (type) {
    case DataType::FP32: case DataType::INT32: return 32;
    case DataType::FP16: case DataType::BF16: return 16;
    case DataType::FP8_E4M3: case DataType::FP8_E5M2: case DataType::FP8_E8M0: return 8;
    case DataType::FP4_E2M1: return 4;
    case DataType::INT64: return 64;
  }
  return 0;
}

bool is_fp8(DataType type) noexcept { return type == DataType::FP8_E4M3 || type == DataType::FP8_E5M2; }
bool is_f16(DataType type) noexcept { return type == DataType::FP16 || type == DataType::BF16; }

std::string_view to_string(Layout layout) noexcept {
  switch (layout) {
    case Layout::Bhsd: return "bhsd";
    case Layout::Bshd: return "bshd";
    case Layout::DenseOther: return "dense-other";
    case Layout::Strided: return "strided";
  }
  return "?";
}

std::string_view to_string(SfLayout layout) noexcept {
  return layout == SfLayout::Planes ? "planes" : "token-major";
}

std::vector<int64_t> TensorDesc::packed_strides(const std::vector<int64_t>& dims) {
  // Saturates instead of overflowing, so that absurd dims reach validate() and its overflow message.
  std::vector<int64_t> strides(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i)
    if (__builtin_mul_overflow(strides[i + 1], dims[i + 1], &strides[i])) strides[i] = INT64_MAX;
  return strides;
}

std::vector<int64_t> TensorDesc::bshd_strides(const std::vector<int64_t>& d) {
  if (d.size() != 4) return packed_strides(d);
  // physical order B, S, H, D
  const std::vector<int64_t> p = packed_strides({d[0], d[2], d[1], d[3]});
  return {p[0], p[2], p[1], 1};
}

}  // namespace rime
