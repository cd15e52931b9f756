// Division by a divisor fixed when the plan is built (the GQA group, H_kv, B) as a multiply-high, an add and a
// shift, computed once on the host into SdpaParams. A runtime integer division is ~20 instructions around a MUFU
// reciprocal, and a masked Hopper CTA needs six before its first load (its row tile, kv head, batch and key
// range), on the critical path of every CTA of a short causal prefill: with runtime divisions FP8 B128 S128 causal
// took 1.27x the time on the H200 (docs/perf-history.md, "Measured: divisions by plan-time multipliers"). No includes
// beyond the two headers below: NVRTC compiles it.
#pragma once

#include "common/host_device.h"
#include "common/params.h"

// Granlund and Montgomery's round-up multiplier (PLDI 1994, theorem 4.2 with N = 32): for d >= 1 and l =
// ceil(log2 d), m = floor(2^32 (2^l - d) / d) + 1 fits in 32 bits (2^l - d < d), and for 0 <= n < 2^32,
// n / d = (mulhi(m, n) + n) >> l. The add is done in 64 bits, so no n overflows it.
RIME_HOST_DEVICE inline FastDiv fast_div_of(unsigned int d) {
  if (d == 0) return FastDiv{0, 0, 0};  // no divisor: a kernel never divides by it (validation refuses empty dims)
  unsigned int l = 0;
  while ((1ull << l) < d) ++l;
  const unsigned long long m = (((1ull << l) - d) << 32) / d + 1;
  return FastDiv{d, static_cast<unsigned int>(m), l};
}

RIME_HOST_DEVICE inline unsigned int div_by(const FastDiv& f, unsigned int n) {
#if defined(__CUDA_ARCH__)
  const unsigned int hi = __umulhi(f.mul, n);
#else
  const unsigned int hi = static_cast<unsigned int>((static_cast<unsigned long long>(f.mul) * n) >> 32);
#endif
  return static_cast<unsigned int>((static_cast<unsigned long long>(hi) + n) >> f.shift);
}

// n / d and n % d for n >= 0.
RIME_HOST_DEVICE inline int div_by(const FastDiv& f, int n, int& rem) {
  const int q = static_cast<int>(div_by(f, static_cast<unsigned int>(n)));
  rem = n - q * static_cast<int>(f.d);
  return q;
}
