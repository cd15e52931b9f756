// The FlashAttention arithmetic the attention engines share: which KV tiles a row tile visits (masks, split
// chunks), which rows a thread holds, scale-and-mask plus the online softmax over one KV tile, and the epilogue
// (normalisation, sink, Stats, Amax, O in every format, or split partials). Both engines keep S and O in the
// same register layout: mma.sync's m16n8 accumulator, which is also each warp's slice of a wgmma m64nN
// accumulator. A thread holds rows g and g + 8 of its warp's 16 rows (g = lane / 4) and, in each 8-column
// block n, columns 8n + 2t and 8n + 2t + 1 (t = lane % 4): acc[n][0..1] for row g, acc[n][2..3] for row g + 8.
//
// One header per role: batch_extent.cuh, kv_tiles.cuh, thread_rows.cuh, online_softmax.cuh, p_pack.cuh and
// epilogue.cuh; the engines include this one.
#pragma once

#include "common/batch_extent.cuh"
#include "common/kv_tiles.cuh"
#include "common/thread_rows.cuh"
#include "common/online_softmax.cuh"
#include "common/p_pack.cuh"
#include "common/epilogue.cuh"
