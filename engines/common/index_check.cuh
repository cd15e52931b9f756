// The checked-indices mode (Plan::execute with ExecuteOptions::check_indices, `rime run --check-indices`):
// verifies on the device, in stream order, the data a graph cannot validate because it lives in device memory
// (docs/graph-json.md, "Paged K/V" and "Ragged batches"): 0 <= seq_len_q[b] <= S_q, 0 <= seq_len_kv[b] <= S_kv,
// with per-sequence starts 0 <= seq_start[b] and seq_start[b] + seq_len[b] <= S on each side that has them,
// every page id a sequence's keys occupy in [0, num_pages), and for a ragged side
// 0 <= cu[b] <= cu[b + 1] <= T with cu[b + 1] - cu[b] <= max_seqlen. The engines clamp lengths, so a bad length
// reads nothing out of bounds, but it is still a caller's bug and reported; a bad page id or token offset would be
// read out of the tensor.
#pragma once

#include "common/device.cuh"

namespace rime_dev {

// One CTA per sequence. The first bad entry in (b, entry) order (a sequence's lengths before its pages) is the
// minimum of the keys the threads that find one post.
template <int kPaged>
__global__ void check_indices(const IndexCheckParams p) {
  const int b = blockIdx.x;
  // A ragged K/V side is never paged (validation), so the pages below always follow seq_len_kv.
  const int len_kv = p.cu_seqlens_kv ? p.cu_seqlens_kv[b + 1] - p.cu_seqlens_kv[b] : p.seq_len_kv[b];
  if (threadIdx.x == 0) {
    // A side's tokens [first, first + len) must lie in [0, T) (T = the bound itself for a padded side, whose
    // first position is its start, 0 without starts).
    auto bad = [](const int* cu, int start, int len, int S, int T) {
      const int first = cu ? cu[0] : start;
      return first < 0 || len < 0 || len > S || (cu && cu[1] > T) || (!cu && first > S - len);
    };
    const int* cu_q = p.cu_seqlens_q ? p.cu_seqlens_q + b : nullptr;
    const int* cu_kv = p.cu_seqlens_kv ? p.cu_seqlens_kv + b : nullptr;
    const int len_q = cu_q ? cu_q[1] - cu_q[0] : p.seq_len_q ? p.seq_len_q[b] : 0;
    const int start_q = p.seq_start_q ? p.seq_start_q[b] : 0, start_kv = p.seq_start_kv ? p.seq_start_kv[b] : 0;
    if (bad(cu_q, start_q, len_q, p.S_q, p.T_q) || bad(cu_kv, start_kv, len_kv, p.S_kv, p.T_kv))
      atomicMin(p.first_bad, static_cast<unsigned long long>(b) << 32);
  }
  if constexpr (kPaged != 0) {
    // The pages the kernels read: those holding keys below the (clamped) length.
    const int keys = min(max(len_kv, 0), p.S_kv);
    const int pages = (keys + (1 << p.page_size_log2) - 1) >> p.page_size_log2;
    const int* row = p.page_table + static_cast<long long>(b) * p.page_table_stride;
    for (int e = threadIdx.x; e < pages; e += blockDim.x) {
      const int id = row[e];
      if (id < 0 || id >= p.num_pages)
        atomicMin(p.first_bad, (static_cast<unsigned long long>(b) << 32) | static_cast<unsigned long long>(e + 1));
    }
  }
}

}  // namespace rime_dev
