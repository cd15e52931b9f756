// The two rows of the accumulator layout a thread holds (attention.cuh), and their key bounds.
#pragma once

#include "common/batch_extent.cuh"

namespace rime_dev {

// The two rows a thread holds: packed rows `first` and first + 8 (GQA packs the `group` q heads of one kv head
// into rows: packed row r is q row r / group of head h_kv * group + r % group), and their key bounds.
struct ThreadRows {
  int i[2], h[2], key_lo[2], key_hi[2];
  bool live[2], exists[2];
  int tok0;  // the batch's q_tok0: row i is dims[2] index tok0 + i of Q, O and Stats
};

// With ragged Q (kRaggedQ) a row past the sequence's length does not exist: its token is the next sequence's
// first, which nothing of this batch may write (a padded batch's rows there are its own and get O = 0).
template <bool kMask, bool kRaggedQ = false>
__device__ __forceinline__ ThreadRows thread_rows(const SdpaParams& p, const BatchExtent& e, int first, int h_kv) {
  ThreadRows rows;
  rows.tok0 = e.q_tok0;
  for (int r = 0; r < 2; ++r) {
    const int pr = first + 8 * r;
    // A masked grid of the Hopper engine starts its first row tile at a negative row (its partial tile first).
    int rem;
    const int i = div_by(p.group_div, max(pr, 0), rem);
    rows.exists[r] = (!kMask || pr >= 0) && pr < p.packed_rows && (!kRaggedQ || i < e.seq_q);
    rows.i[r] = rows.exists[r] ? i : 0;
    rows.h[r] = h_kv * p.group + (rows.exists[r] ? rem : 0);
    rows.live[r] = rows.exists[r] && rows.i[r] < e.seq_q;
    rows.key_hi[r] = e.kv_limit;
    rows.key_lo[r] = 0;
    if (kMask && e.right_bound >= 0) rows.key_hi[r] = min(rows.key_hi[r], rows.i[r] + e.diag_shift + e.right_bound + 1);
    if (kMask && p.window_left >= 0) rows.key_lo[r] = rows.i[r] + e.diag_shift - p.window_left + 1;
  }
  return rows;
}

// Whether key j lies outside the bounds of the thread's row `r` (masks, padding, the end of the keys).
__device__ __forceinline__ bool key_outside(const ThreadRows& rows, int r, int j) {
  return j >= rows.key_hi[r] || j < rows.key_lo[r];
}

}  // namespace rime_dev
