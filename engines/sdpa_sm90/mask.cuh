// sdpa_sm90: the mask of one KV tile of a consumer's scores (causal, window, band, per-sequence lengths, the end
// of the keys), as common/attention.cuh's ThreadRows bounds each of the thread's two rows.
#pragma once

#include "common/attention.cuh"

namespace rime_dev {
namespace sm90 {

// Sets the scores of the keys outside each row's bounds to -inf, in a tile of kN keys from key0. A tile needs masking
// only where some row of the warp has a key bound inside it (causal: the diagonal tiles; padding and the end of the
// keys: the last one): the other tiles skip the per-element tests. Element e of column block n is key
// key0 + 8n + 2t + (e & 1) of row e / 2.
template <int kN, int kNT>
__device__ __forceinline__ void mask_tile(float (&s)[kNT][4], const ThreadRows& rows, int key0, int t) {
  bool edge_here = false;
#pragma unroll
  for (int r = 0; r < 2; ++r) edge_here |= key0 < rows.key_lo[r] || key0 + kN > rows.key_hi[r];
  if (__any_sync(0xffffffffu, edge_here)) {
#pragma unroll
    for (int n = 0; n < kNT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (key_outside(rows, e / 2, key0 + n * 8 + 2 * t + (e & 1))) s[n][e] = neg_inf();
  }
}

}  // namespace sm90
}  // namespace rime_dev
