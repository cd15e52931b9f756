// A padding mask as per-sequence starts and lengths (rime::sequences_from_padding_mask, include/rime/padding_mask.hpp):
// what transformers' attention mask (one row per sequence, nonzero at its tokens) says in SPEC section 2's terms,
// computed on the device so that a decode step reads it without a host sync and in one launch.
#pragma once

#include "common/device.cuh"

namespace rime_dev {

// One CTA of 256 threads (8 warps) per row. kBytes: the mask's element size (1: bool or uint8, 2, 4: int32, 8: int64); an
// element is a token where it is nonzero. Sequence b's keys are its tokens among the row's `positions` read, its
// queries those among the last q_length of them: start_kv is the first token's index (0 without one), len_kv the
// count; start_q and len_q the same within the last q_length positions.
template <int kBytes>
struct MaskWord;
template <>
struct MaskWord<1> {
  using T = unsigned char;
};
template <>
struct MaskWord<2> {
  using T = unsigned short;
};
template <>
struct MaskWord<4> {
  using T = unsigned int;
};
template <>
struct MaskWord<8> {
  using T = unsigned long long;
};

template <int kBytes>
__global__ void padding_mask_sequences(const PaddingMaskParams p) {
  using Word = typename MaskWord<kBytes>::T;
  const int b = blockIdx.x;
  const Word* row = static_cast<const Word*>(p.mask) + static_cast<long long>(b) * p.row_stride + p.offset;
  const int q0 = p.positions - p.q_length;
  int count = 0, first = p.positions, q_count = 0, q_first = p.positions;
  for (int i = threadIdx.x; i < p.positions; i += blockDim.x) {
    if (row[i] != 0) {
      ++count;
      first = min(first, i);
      if (i >= q0) {
        ++q_count;
        q_first = min(q_first, i);
      }
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    count += __shfl_xor_sync(0xffffffffu, count, o);
    q_count += __shfl_xor_sync(0xffffffffu, q_count, o);
    first = min(first, __shfl_xor_sync(0xffffffffu, first, o));
    q_first = min(q_first, __shfl_xor_sync(0xffffffffu, q_first, o));
  }
  __shared__ int part[4][8];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    part[0][warp] = count;
    part[1][warp] = first;
    part[2][warp] = q_count;
    part[3][warp] = q_first;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x) / 32; ++w) {
      count += part[0][w];
      first = min(first, part[1][w]);
      q_count += part[2][w];
      q_first = min(q_first, part[3][w]);
    }
    p.out[b] = q_count > 0 ? q_first - q0 : 0;
    p.out[p.B + b] = q_count;
    p.out[2 * p.B + b] = count > 0 ? first : 0;
    p.out[3 * p.B + b] = count;
  }
}

}  // namespace rime_dev
