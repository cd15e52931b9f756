// Data types and tensor descriptors of the rime graph model (SPEC section 1).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rime {

enum class DataType : int {
  FP32,
  FP16,
  BF16,
  FP8_E4M3,
  FP8_E5M2,
  FP4_E2M1,  // two per byte, element 2j in the low nibble
  FP8_E8M0,  // UE8M0 scale byte: 2^(e-127), 0xFF = NaN
  INT32,
  INT64,
};

inline constexpr DataType kAllDataTypes[] = {DataType::FP32,     DataType::FP16,     DataType::BF16,
                                             DataType::FP8_E4M3, DataType::FP8_E5M2, DataType::FP4_E2M1,
                                             DataType::FP8_E8M0, DataType::INT32,    DataType::INT64};

std::string_view to_string(DataType type) noexcept;
std::optional<DataType> parse_data_type(std::string_view name) noexcept;
int bits_of(DataType type) noexcept;
bool is_fp8(DataType type) noexcept;  // FP8_E4M3 or FP8_E5M2 (not the E8M0 scale type)
bool is_f16(DataType type) noexcept;  // FP16 or BF16

// Physical layout of a rank-4 [B, H, S, D] tensor, read off its strides.
enum class Layout : int {
  Bhsd,        // packed, B H S D
  Bshd,        // packed, B S H D (token-major)
  DenseOther,  // packed in another dim order, unit stride on D
  Strided,     // unit stride on D, gaps elsewhere (e.g. Q/K/V sliced from a fused projection)
};
std::string_view to_string(Layout layout) noexcept;

// The two sf_o stride sets of SPEC section 5.
enum class SfLayout : int { Planes, TokenMajor };
std::string_view to_string(SfLayout layout) noexcept;

// A tensor of the graph. dims are logical; strides are in elements and give the physical layout. An FP4
// tensor's strides are in FP4 elements too: its byte container halves the unit-stride extent and every other
// stride, so those must be even.
struct TensorDesc {
  std::string name;
  int64_t uid = 0;
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
  DataType dtype = DataType::FP32;
  bool is_output = false;

  // Row-major (last dim fastest) strides for dims.
  static std::vector<int64_t> packed_strides(const std::vector<int64_t>& dims);
  // Strides of a [B, H, S, D] tensor stored as B, S, H, D (token-major, the layout of a fused projection).
  static std::vector<int64_t> bshd_strides(const std::vector<int64_t>& bhsd_dims);

  friend bool operator==(const TensorDesc& a, const TensorDesc& b) {
    return a.name == b.name && a.uid == b.uid && a.dims == b.dims && a.strides == b.strides &&
           a.dtype == b.dtype && a.is_output == b.is_output;
  }
  friend bool operator!=(const TensorDesc& a, const TensorDesc& b) { return !(a == b); }
};

// K and V of one execute that hold fewer keys than the graph says (ExecuteOptions::kv_extent): `length` keys, laid
// out with these logical [B, H, S, D] strides in elements (D's 1), the other dims the graph's.
struct KvExtent {
  int64_t length = 0;
  std::array<int64_t, 4> k_strides{};
  std::array<int64_t, 4> v_strides{};
};

}  // namespace rime
