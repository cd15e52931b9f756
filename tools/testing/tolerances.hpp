// The output check's tolerances (SPEC section 10), in one place: check_outputs (trial.cpp) applies them, and
// docs/testing.md's "Tolerances" section states them (a CPU test reads that section for each value, so that the two
// cannot drift apart).
#pragma once

namespace rime::testing::tolerance {

// Graphs with FP8 inputs (sdpa_fp8, sdpa_mxfp8), per element: |O - O_ref| <= atol + rtol |O_ref|, at most
// kOutsideFraction of the elements outside, whatever the O dtype.
inline constexpr double kFp8Atol = 0.08;
inline constexpr double kE5m2OAtol = 0.125;  // an E5M2 O: its grid is twice E4M3's
inline constexpr double kFp8Rtol = 0.2;
inline constexpr double kOutsideFraction = 1e-5;
// A BF16/FP16 O of such a graph, also: relative L2 under this (P held in E4M3 costs about 1-1.5%).
inline constexpr double kFp8Graph16BitORelL2 = 3e-2;
// The BF16/FP16 op (sdpa): relative L2 under this.
inline constexpr double k16BitRelL2 = 1e-2;
// Stats: |LSE - ref| <= kLseAtol + kLseRtol |ref|; -inf must match -inf.
inline constexpr double kLseAtol = 2e-2;
inline constexpr double kLseRtol = 1e-3;
// Amax_S: |Amax_S - ref| <= kAmaxSAtol + kAmaxSRtol ref. (Amax_O takes O's tolerance.)
inline constexpr double kAmaxSAtol = 1e-3;
inline constexpr double kAmaxSRtol = 1e-2;
// Block-scaled O: atol widened to this many steps of the reference block's grid at the value, and the whole O's
// relative L2 at most the reference's own quantization error plus kBlockScaledRelL2Slack.
inline constexpr int kBlockScaledGridSteps = 3;
inline constexpr double kBlockScaledRelL2Slack = 0.05;

}  // namespace rime::testing::tolerance
