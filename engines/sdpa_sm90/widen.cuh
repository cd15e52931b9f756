// sdpa_sm90: a 16-bit Q over FP8 K/V (RIME_F_KV_FP8, an FP8 KV cache under a BF16/FP16 model) on two consumers
// (Config::kWidenKv). The kernel is the 16-bit one; the TMA lands each FP8 K or V tile in the upper half of its
// 16-bit stage, and the producer widens it there, exactly (every E4M3 and E5M2 value is an FP16 and a BF16 value),
// into the layout the TMA writes for 16-bit K and V, so that the consumers and their wgmmas are the 16-bit kernel's.
// In place, the widening needs no shared memory beyond the 16-bit kernel's.
#pragma once

#include "sdpa_sm90/layout.h"
#include "sdpa_sm90/mma.cuh"
#include "sdpa_sm90/ptx.cuh"

namespace rime_dev {
namespace sm90 {

// 16 FP8 bytes (one 16-byte chunk, elements e0 .. e15 in byte order) to 16 values of kOut16 (FP16 or BF16), as 8
// words (element 2i in the low half of word i). cvt from FP8 pairs to f16x2 is exact; a BF16 goes through FP32.
template <int kOut16, bool kE5m2>
__device__ __forceinline__ void widen_chunk(const uint4& in, u32 (&out)[8]) {
  const u32 w[4] = {in.x, in.y, in.z, in.w};
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const u16 pair = static_cast<u16>(w[i / 2] >> (16 * (i % 2)));
    u32 h2;
    if constexpr (kE5m2) asm("cvt.rn.f16x2.e5m2x2 %0, %1;\n" : "=r"(h2) : "h"(pair));
    else asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h2) : "h"(pair));
    if constexpr (kOut16 == RIME_T_FP16) {
      out[i] = h2;
    } else {
      static_assert(kOut16 == RIME_T_BF16, "FP8 K/V widen to FP16 or BF16");
      float lo, hi;
      asm("cvt.f32.f16 %0, %1;\n" : "=f"(lo) : "h"(static_cast<u16>(h2 & 0xFFFF)));
      asm("cvt.f32.f16 %0, %1;\n" : "=f"(hi) : "h"(static_cast<u16>(h2 >> 16)));
      out[i] = pack2<RIME_T_BF16>(lo, hi);
    }
  }
}

// Widens the FP8 tile of kN keys x kD that the TMA wrote at stage + kN * kD (sub-tiles of row_bytes(kD)-byte rows,
// their swizzle) into 16-bit values at stage (sub-tiles of 128-byte rows, 64 values each, the 128-byte swizzle):
// keys at or past kv_end become zeros (V of the last tile of a batch's keys: their weights are 0, and 0 x the
// caller's bytes past the length, NaN encodings included, must not reach O).
// The output is walked in blocks of 1 KB (8 keys x 128 bytes of one 16-bit sub-tile: one swizzle atom), a warp per
// block, lane l taking key l % 8 and the 16 values (l / 8) * 16 .. + 15 of the row: the 8 lanes of one 16-byte
// access phase then read 8 keys at one chunk of the FP8 rows and write 8 keys at one chunk of the 16-bit rows,
// which both swizzles spread over the 8 bank groups. ptid counts the kThreads widening threads from 0.
// In place, a write must not land on FP8 bytes another thread has yet to read:
//  - FP8 rows of 128 bytes (D 128, 256): the 16-bit sub-tiles past the first D / 128 lie exactly on the FP8
//    sub-tiles, row on row (both are kN rows of 128 bytes), and 16-bit sub-tile j >= D / 128 overwrites FP8 sub-tile
//    j - D / 128, which only 16-bit sub-tiles <= j read. So one warp takes all sub-tiles of a group of 8 keys, in
//    order, and a __syncwarp between each load and its store keeps its own reads ahead of its writes: no barrier
//    between warps, one 16-byte chunk held per lane.
//  - FP8 rows of 64 bytes (D 64): the first half of the 16-bit rows lands below the FP8 bytes, the third quarter on
//    FP8 rows the first half read, the last quarter on its own and the third quarter's: three rounds, two barriers
//    of the widening threads (kBar), a quarter of the tile held in registers across the second.
template <int kOut16, bool kE5m2, int kD, int kN, int kThreads, int kBar>
__device__ __forceinline__ void widen_tile(u8* stage, int ptid, int kv_end) {
  constexpr int kRow8 = rime_sm90::row_bytes(kD);  // the FP8 tile's sub-tile rows
  static_assert(kD == 64 || kD % 128 == 0, "D 64, 128, 256 (D_qk 192's 64-byte FP8 rows overlap other ways)");
  constexpr int kGroups = kN / 8, kSubs16 = kD / 64, kWarps = kThreads / 32;
  static_assert(kN % 16 == 0, "whole swizzle atoms, an even count");
  const u8* raw = stage + kN * kD;
  const int lane = ptid % 32, warp = ptid / 32;
  const int key_in = lane % 8, piece = lane / 8;
  // Block (sub, group): keys 8 group .. + 7 of 16-bit sub-tile sub; this lane's 16 values start at d.
  auto load = [&](int sub, int group) {
    const int key = group * 8 + key_in, d = sub * 64 + piece * 16;
    return *reinterpret_cast<const uint4*>(raw + (d / kRow8) * (kN * kRow8) + swz<kRow8>(key, d % kRow8));
  };
  auto store = [&](int sub, int group, const uint4& in) {
    const int key = group * 8 + key_in;
    u32 out[8];
    widen_chunk<kOut16, kE5m2>(in, out);
    if (key >= kv_end) {
#pragma unroll
      for (int i = 0; i < 8; ++i) out[i] = 0;
    }
    u8* row = stage + sub * (kN * 128);
    const int byte = piece * 32;
    *reinterpret_cast<uint4*>(row + swz<128>(key, byte)) = make_uint4(out[0], out[1], out[2], out[3]);
    *reinterpret_cast<uint4*>(row + swz<128>(key, byte + 16)) = make_uint4(out[4], out[5], out[6], out[7]);
  };
  if constexpr (kRow8 == 128) {
    constexpr int kSubs8 = kD / 128;
    for (int group = warp; group < kGroups; group += kWarps) {
#pragma unroll
      for (int sub = 0; sub < kSubs16; ++sub) {
        const uint4 in = load(sub, group);
        if (sub >= kSubs8) __syncwarp();  // every lane has read the FP8 row this store lands on
        store(sub, group, in);
      }
    }
  } else {
    // One 16-bit sub-tile: 16-bit row k overwrites FP8 rows 2k - kN and 2k - kN + 1 (k >= kN / 2), which 16-bit rows
    // 2k - kN and 2k - kN + 1 read, all below k but the last few.
    static_assert(kSubs16 == 1, "FP8 rows of 64 bytes: D 64");
    constexpr int kHalf = kGroups / 2, kThreeQuarters = kGroups * 3 / 4;
    constexpr int kHeldPerWarp = (kGroups - kThreeQuarters + kWarps - 1) / kWarps;
    for (int group = warp; group < kHalf; group += kWarps) store(0, group, load(0, group));  // below the FP8 bytes
    named_sync(kBar, kThreads);
    // Rows kN / 2 .. 3 kN / 4 - 1 overwrite FP8 rows below kN / 2, read above; the last quarter's FP8 rows lie
    // under the last quarter's own 16-bit rows, so those are all read before any is written.
    for (int group = kHalf + warp; group < kThreeQuarters; group += kWarps) store(0, group, load(0, group));
    uint4 held[kHeldPerWarp];
#pragma unroll
    for (int i = 0; i < kHeldPerWarp; ++i) {
      const int group = kThreeQuarters + warp + i * kWarps;
      if (group < kGroups) held[i] = load(0, group);
    }
    named_sync(kBar, kThreads);
#pragma unroll
    for (int i = 0; i < kHeldPerWarp; ++i) {
      const int group = kThreeQuarters + warp + i * kWarps;
      if (group < kGroups) store(0, group, held[i]);
    }
  }
}

}  // namespace sm90
}  // namespace rime_dev
