#include "testing/reference/formats.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace rime::reference {
namespace {

// A minifloat with `ebits` exponent bits, `mbits` mantissa bits and `bias`; `ieee` has inf/NaN at the top
// exponent, else only the all-ones pattern is NaN (E4M3).
struct Mini {
  int ebits, mbits, bias;
  bool ieee;
};
constexpr Mini kE4M3{4, 3, 7, false};
constexpr Mini kE5M2{5, 2, 15, true};
constexpr Mini kE2M1{2, 1, 1, false};  // no NaN/inf; all 4-bit patterns are numbers
constexpr Mini kF16{5, 10, 15, true};
constexpr Mini kBF16{8, 7, 127, true};

double decode(const Mini& f, uint32_t bits) {
  const uint32_t sign = (bits >> (f.ebits + f.mbits)) & 1;
  const uint32_t e = (bits >> f.mbits) & ((1u << f.ebits) - 1);
  const uint32_t m = bits & ((1u << f.mbits) - 1);
  const double s = sign ? -1.0 : 1.0;
  const uint32_t emax = (1u << f.ebits) - 1;
  if (f.ieee && e == emax) return m ? std::numeric_limits<double>::quiet_NaN() : s * INFINITY;
  if (&f == &kE4M3 && e == emax && m == (1u << f.mbits) - 1) return std::numeric_limits<double>::quiet_NaN();
  if (e == 0) return s * std::ldexp(static_cast<double>(m), 1 - f.bias - f.mbits);
  return s * std::ldexp(static_cast<double>(m + (1u << f.mbits)), static_cast<int>(e) - f.bias - f.mbits);
}

double max_finite(const Mini& f) {
  const int emax = (1 << f.ebits) - 1 - (f.ieee ? 1 : 0);
  // E4M3's top exponent keeps mantissas 0..6 (7 is NaN); E2M1 uses all of them.
  const int mmax = (&f == &kE4M3) ? (1 << f.mbits) - 2 : (1 << f.mbits) - 1;
  return std::ldexp(static_cast<double>(mmax + (1 << f.mbits)), emax - f.bias - f.mbits);
}

uint32_t nan_bits(const Mini& f) {
  const uint32_t all = (1u << (f.ebits + f.mbits)) - 1;
  return f.ieee ? ((((1u << f.ebits) - 1) << f.mbits) | (1u << (f.mbits - 1))) : all;
}

// Round to nearest even, saturating to the finite max.
uint32_t encode(const Mini& f, double x) {
  const uint32_t sign_bit = 1u << (f.ebits + f.mbits);
  if (std::isnan(x)) return nan_bits(f);
  const uint32_t sign = std::signbit(x) ? sign_bit : 0;
  double a = std::fabs(x);
  const double mx = max_finite(f);
  if (a >= mx) {
    // satfinite: every magnitude past the max (inf included) becomes the max.
    a = mx;
  }
  // Exponent of the binade, clamped to the subnormal range.
  int e = a > 0 ? std::ilogb(a) : 1 - f.bias;
  if (e < 1 - f.bias) e = 1 - f.bias;
  const double quantum = std::ldexp(1.0, e - f.mbits);
  double q = std::nearbyint(a / quantum);  // FE_TONEAREST: ties to even
  double v = q * quantum;
  if (v > mx) v = mx;  // rounding up past the max saturates
  // Re-derive the bits from the value.
  if (v == 0) return sign;
  int ev = std::ilogb(v);
  uint32_t ebits, mbits;
  if (ev < 1 - f.bias) {
    ebits = 0;
    mbits = static_cast<uint32_t>(std::ldexp(v, f.bias - 1 + f.mbits));
  } else {
    ebits = static_cast<uint32_t>(ev + f.bias);
    mbits = static_cast<uint32_t>(std::ldexp(v, f.mbits - ev)) - (1u << f.mbits);
  }
  return sign | (ebits << f.mbits) | mbits;
}

// Every value of an 8- or 16-bit format, decoded once: the reference decodes each input element of a row per row,
// and ldexp per element was most of its time.
template <const Mini& kFormat, size_t kCount>
double decode_by_table(uint32_t bits) {
  static const std::vector<double> table = [] {
    std::vector<double> t(kCount);
    for (size_t i = 0; i < kCount; ++i) t[i] = decode(kFormat, static_cast<uint32_t>(i));
    return t;
  }();
  return table[bits];
}

}  // namespace

double decode_e4m3(uint8_t b) { return decode_by_table<kE4M3, 256>(b); }
double decode_e5m2(uint8_t b) { return decode_by_table<kE5M2, 256>(b); }
double decode_e2m1(uint8_t n) { return decode(kE2M1, n & 0xF); }
double decode_ue8m0(uint8_t b) {
  static const std::vector<double> table = [] {
    std::vector<double> t(256);
    for (int i = 0; i < 256; ++i)
      t[i] = i == 0xFF ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(1.0, i - 127);
    return t;
  }();
  return table[b];
}
double decode_fp16(uint16_t b) { return decode_by_table<kF16, 65536>(b); }
double decode_bf16(uint16_t b) { return decode_by_table<kBF16, 65536>(b); }

uint8_t encode_e4m3(double x) { return static_cast<uint8_t>(encode(kE4M3, x)); }
uint8_t encode_e5m2(double x) { return static_cast<uint8_t>(encode(kE5M2, x)); }
uint8_t encode_e2m1(double x) { return static_cast<uint8_t>(std::isnan(x) ? 0x7 : encode(kE2M1, x)); }

// FP16 and BF16 outputs round to nearest even and overflow to inf (cvt.rn.f16x2 / bf16x2 semantics).
uint16_t encode_fp16(double x) {
  if (std::fabs(x) >= 65520.0 && !std::isnan(x)) return std::signbit(x) ? 0xFC00 : 0x7C00;
  return static_cast<uint16_t>(encode(kF16, x));
}
uint16_t encode_bf16(double x) {
  if (std::isnan(x)) return 0x7FC0;
  // Round the fp32 value (what the kernels hold) to bf16: bf16 keeps fp32's exponent range.
  float f = static_cast<float>(x);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7F800000u) == 0x7F800000u) return static_cast<uint16_t>(u >> 16);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

double load_element(DataType type, const uint8_t* base, int64_t i) {
  switch (type) {
    case DataType::FP32: {
      float f;
      std::memcpy(&f, base + 4 * i, 4);
      return f;
    }
    case DataType::FP16: {
      uint16_t b;
      std::memcpy(&b, base + 2 * i, 2);
      return decode_fp16(b);
    }
    case DataType::BF16: {
      uint16_t b;
      std::memcpy(&b, base + 2 * i, 2);
      return decode_bf16(b);
    }
    case DataType::FP8_E4M3: return decode_e4m3(base[i]);
    case DataType::FP8_E5M2: return decode_e5m2(base[i]);
    case DataType::FP8_E8M0: return decode_ue8m0(base[i]);
    case DataType::FP4_E2M1: return decode_e2m1(static_cast<uint8_t>(i % 2 ? base[i / 2] >> 4 : base[i / 2] & 0xF));
    case DataType::INT32: {
      int32_t v;
      std::memcpy(&v, base + 4 * i, 4);
      return v;
    }
    case DataType::INT64: {
      int64_t v;
      std::memcpy(&v, base + 8 * i, 8);
      return static_cast<double>(v);
    }
  }
  return 0;
}

void store_element(DataType type, uint8_t* base, int64_t i, double x) {
  switch (type) {
    case DataType::FP32: {
      float f = static_cast<float>(x);
      std::memcpy(base + 4 * i, &f, 4);
      return;
    }
    case DataType::FP16: {
      uint16_t b = encode_fp16(x);
      std::memcpy(base + 2 * i, &b, 2);
      return;
    }
    case DataType::BF16: {
      uint16_t b = encode_bf16(x);
      std::memcpy(base + 2 * i, &b, 2);
      return;
    }
    case DataType::FP8_E4M3: base[i] = encode_e4m3(x); return;
    case DataType::FP8_E5M2: base[i] = encode_e5m2(x); return;
    case DataType::FP8_E8M0: base[i] = static_cast<uint8_t>(std::lround(std::log2(x)) + 127); return;
    case DataType::FP4_E2M1: {
      const uint8_t n = encode_e2m1(x);
      uint8_t& byte = base[i / 2];
      byte = i % 2 ? static_cast<uint8_t>((byte & 0x0F) | (n << 4)) : static_cast<uint8_t>((byte & 0xF0) | n);
      return;
    }
    case DataType::INT32: {
      int32_t v = static_cast<int32_t>(x);
      std::memcpy(base + 4 * i, &v, 4);
      return;
    }
    case DataType::INT64: {
      int64_t v = static_cast<int64_t>(x);
      std::memcpy(base + 8 * i, &v, 8);
      return;
    }
  }
}

double round_to(DataType type, double x) {
  uint8_t buf[8] = {};
  store_element(type, buf, 0, x);
  return load_element(type, buf, 0);
}

}  // namespace rime::reference
