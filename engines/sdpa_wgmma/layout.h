// The launch shape of the sdpa_fp8_sm90_prepass wgmma kernels, read by kernel.cuh and by engine.cpp alike. No
// includes beyond host_device.h: NVRTC compiles it.
#pragma once

#include "common/host_device.h"

namespace rime_wgmma {

// One shape: 64 packed rows (one warpgroup of 128 threads) per CTA, 128-key tiles, D 128.
constexpr int kTileQ = 64;
constexpr int kTileKv = 128;
constexpr int kThreads = 128;
constexpr int kD = 128;
constexpr int kTileBytes = kTileKv * 128;  // a K or V^T tile: 128 rows of 128 bytes

// Shared memory from the 1024-byte-aligned base (the 128-byte swizzle's atoms are 1024 bytes): Q (64 rows of
// 128 bytes), two K stages, two V^T stages; `total` includes the 1024 bytes of slack that the kernel uses to
// align the dynamic base.
struct Smem {
  int q, k, vt, total;
};
RIME_HOST_DEVICE constexpr Smem smem() {
  Smem s{};
  s.q = 0;
  s.k = kTileQ * 128;
  s.vt = s.k + 2 * kTileBytes;
  s.total = s.vt + 2 * kTileBytes + 1024;
  return s;
}

// The keys of one V^T row in the workspace: S_kv rounded up to whole KV tiles (the pre-pass zeroes the tail).
RIME_HOST_DEVICE constexpr long long vt_keys(long long s_kv) { return (s_kv + kTileKv - 1) / kTileKv * kTileKv; }

}  // namespace rime_wgmma
