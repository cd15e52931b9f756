// Internal: bit-exact conversions of SPEC section 4. Float-to-small conversions round to nearest even and
// saturate to the finite max (cvt.rn.satfinite); NaN stays NaN.
#pragma once

#include <cstdint>

#include "rime/types.hpp"

namespace rime::reference {

double decode_e4m3(uint8_t bits);  // bias 7, max 448, no inf, NaN = S.1111.111
double decode_e5m2(uint8_t bits);  // bias 15, max 57344, IEEE inf/NaN
double decode_e2m1(uint8_t nibble);  // {0, 0.5, 1, 1.5, 2, 3, 4, 6}, sign bit 3
double decode_ue8m0(uint8_t bits);  // 2^(e-127), 0xFF = NaN
double decode_fp16(uint16_t bits);
double decode_bf16(uint16_t bits);

uint8_t encode_e4m3(double x);
uint8_t encode_e5m2(double x);
uint8_t encode_e2m1(double x);
uint16_t encode_fp16(double x);
uint16_t encode_bf16(double x);

// Element `index` (in elements) of a tensor stored as `type` at `base`; FP4 element 2j is the low nibble.
double load_element(DataType type, const uint8_t* base, int64_t index);
// Stores x (rounded as the GPU would) as element `index`.
void store_element(DataType type, uint8_t* base, int64_t index, double x);
// The value x becomes when stored as `type` (for building exactly representable inputs).
double round_to(DataType type, double x);

}  // namespace rime::reference
