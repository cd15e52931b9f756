// A padding mask on a GPU as per-sequence starts and lengths (SPEC section 2): what transformers' 2D attention mask
// (one row per sequence, nonzero at its tokens, padding on either side) says to a plan with seq_start / seq_len
// inputs, computed in one launch with no host sync (rime.transformers' mask function, docs/transformers.md).
#pragma once

#include <cstdint>

#include "rime/status.hpp"

namespace rime {

// [batch, positions] elements in device memory, rows `row_stride` elements apart and contiguous within a row.
struct PaddingMask {
  const void* data = nullptr;
  int element_bytes = 0;  // 1 (bool, uint8), 2, 4 (int32) or 8 (int64); an element is a token where it is nonzero
  int64_t batch = 0, positions = 0, row_stride = 0;
  int device = 0;  // the GPU that holds it
};

// Writes out[0 .. 4 * batch) (int32 device memory on the same GPU) in stream order: rows start_q, len_q, start_kv,
// len_kv. Sequence b's keys are the tokens among the last kv_length positions of its row (a cache that keeps a
// window of them), start_kv the first one's index there (0 without one) and len_kv their count; its queries the
// tokens among the last q_length of those positions, start_q counted from the first of them. Assumed, not checked
// (that would take a host sync): each row's tokens are one run of positions. InvalidArgument names the field.
Status sequences_from_padding_mask(const PaddingMask& mask, int64_t q_length, int64_t kv_length, int32_t* out,
                                   void* stream);

}  // namespace rime
