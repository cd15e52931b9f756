// Kernel parameter blocks, shared by the host launchers and the device code. Plain C layout, no includes, so
// the same bytes mean the same thing to g++ and to NVRTC.
#pragma once

// Compile-time data type codes of the engines (template arguments).
#define RIME_T_FP16 0
#define RIME_T_BF16 1
#define RIME_T_E4M3 2
#define RIME_T_E5M2 3
#define RIME_T_FP32 4
// Block-scaled O formats (SPEC section 5): the O type argument of the kernels names the format.
#define RIME_T_NVFP4 5  // O E2M1 + sf_o E4M3, one scale per 16 d elements
#define RIME_T_MXFP8 6  // O E4M3 + sf_o UE8M0, one scale per 32 d elements

// Compile-time feature bits of the attention kernels.
#define RIME_F_SINK 1
#define RIME_F_STATS 2
#define RIME_F_AMAX_O 4
#define RIME_F_AMAX_S 8
#define RIME_F_SPLIT 16    // write fp32 partial O + LSE into the workspace; the combine finishes
#define RIME_F_PADDING 32  // per-batch seq_len_q / seq_len_kv
#define RIME_F_MASK 64     // causal / window / band bounds (their values are runtime parameters)
#define RIME_F_SCALE_O 128 // O is FP8 / block-scaled and scale_o is bound; absent means the identity
#define RIME_F_MX_INPUTS 256  // MXFP8 inputs: UE8M0 scales SF_Q / SF_K / SF_V instead of per-tensor descales
#define RIME_F_PAGED 512      // K / V are page pools [pages][H_kv][page_size][D] read through page_table
// Ragged (THD) sides, with RIME_F_PADDING: sequence b's rows are tokens cu_seqlens[b] .. cu_seqlens[b + 1] of a
// token-major [1][H][T][D] tensor (its stride[0] passed as 0), its length the offsets' difference.
#define RIME_F_RAGGED_Q 1024   // Q, O, Stats through cu_seqlens_q
#define RIME_F_RAGGED_KV 2048  // K, V through cu_seqlens_kv
// A 16-bit Q over FP8 K/V (sdpa_fp8 reading an FP8 K/V cache; the mma.sync engine computes it in FP16): K and V
// are E4M3 (or E5M2 with RIME_F_KV_E5M2), widened exactly to FP16 in shared memory; Q is FP16, or BF16 with
// RIME_F_Q_BF16, widened to FP16 by a power-of-two factor per row.
#define RIME_F_KV_FP8 4096
#define RIME_F_KV_E5M2 8192
#define RIME_F_Q_BF16 16384
// With RIME_F_SPLIT and RIME_F_PADDING, one row tile per (batch, kv head): a persistent grid (gridDim.x CTAs, as
// many as fit on the GPU at once) shares all pairs' KV tiles evenly (common/attention.cuh, for_each_balanced_item).
#define RIME_F_BALANCED 32768
// Per-sequence starts (left padding, SPEC section 2), with RIME_F_PADDING: sequence b's row i is dense row
// seq_start_q[b] + i of Q, O and Stats, its key j position seq_start_kv[b] + j of K and V (a null pointer: 0).
#define RIME_F_STARTS 65536
// Logit soft-capping (SPEC section 2): each scaled score s becomes logit_softcap * tanh(s / logit_softcap).
#define RIME_F_SOFTCAP 131072
// With RIME_F_KV_FP8 on the FP8 kernel: Q rounded to E4M3 on a power-of-two scale per row, one term
// (q_quantization e4m3_per_row), where the exact form carries a second term.
#define RIME_F_Q_E4M3_ROWS 262144

#ifdef __cplusplus
// The spellings of those codes in kernel names: a plan's kernel reads
// `rime_dev::sdpa_sm90_fwd<e4m3, bf16, 128, 128, stats | mask, two_consumers>`, not a bit mask. The generated
// translation unit says `using namespace rime_names;` (src/jit/compile.cpp), so the names are the template
// arguments themselves; the host spells them with engines/common/sdpa_params.cpp's kernel_* functions.
namespace rime_names {
enum : int {
  fp16 = RIME_T_FP16, bf16 = RIME_T_BF16, e4m3 = RIME_T_E4M3, e5m2 = RIME_T_E5M2, fp32 = RIME_T_FP32,
  nvfp4 = RIME_T_NVFP4, mxfp8 = RIME_T_MXFP8
};
enum : int {
  no_features = 0, sink = RIME_F_SINK, stats = RIME_F_STATS, amax_o = RIME_F_AMAX_O, amax_s = RIME_F_AMAX_S,
  split = RIME_F_SPLIT, padding = RIME_F_PADDING, mask = RIME_F_MASK, scale_o = RIME_F_SCALE_O,
  mx_inputs = RIME_F_MX_INPUTS, paged = RIME_F_PAGED, ragged_q = RIME_F_RAGGED_Q, ragged_kv = RIME_F_RAGGED_KV,
  kv_fp8 = RIME_F_KV_FP8, kv_e5m2 = RIME_F_KV_E5M2, q_bf16 = RIME_F_Q_BF16, balanced = RIME_F_BALANCED,
  starts = RIME_F_STARTS, softcap = RIME_F_SOFTCAP, q_e4m3_rows = RIME_F_Q_E4M3_ROWS
};
enum : int { one_consumer = 1, two_consumers = 2, three_consumers = 3 };
}  // namespace rime_names
#endif

// n / d by a multiply and a shift for a divisor d fixed at plan time (common/fast_div.h computes and applies it).
struct FastDiv {
  unsigned int d, mul, shift;
};

struct SdpaParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* stats;
  float* amax_o;  // zeroed by the plan before the launch; kernels atomically max into it
  float* amax_s;
  const float* sink;
  const int* seq_len_q;
  const int* seq_len_kv;
  // Paged K/V: key j of batch b lives in page page_table[b * page_table_stride + (j >> page_size_log2)], slot
  // j & (page_size - 1); k_stride / v_stride are then (page, head, slot).
  const int* page_table;
  long long page_table_stride;
  int page_size_log2;
  const int* cu_seqlens_q;   // ragged Q: [B + 1] token offsets
  const int* cu_seqlens_kv;  // ragged K/V
  const float* descale_q;
  const float* descale_k;
  const float* descale_v;
  const float* scale_o;
  unsigned char* sf_o;  // block-scaled O: the F8_128x4 scale bytes
  const unsigned char* sf_q;  // MXFP8 inputs: F8_128x4 planes per (b, h), SPEC section 6
  const unsigned char* sf_k;
  const unsigned char* sf_v;
  float* o_partial;    // split: [split][B][H_q][S_q][D_v]
  float* lse_partial;  // split: [split][B][H_q][S_q]
  long long q_stride[3];  // b, h, s (elements; d has unit stride)
  long long k_stride[3];
  long long v_stride[3];
  long long o_stride[3];
  long long stats_stride[3];
  int B, H_q, H_kv, group, S_q, S_kv;
  int packed_rows;  // S_q * group: the q heads of one kv head share a row tile
  int num_splits;
  float attn_scale;
  int causal;       // 1: keys j > i + diag_shift (+ band_right) are masked
  int band_right;   // -1: none
  int window_left;  // -1: none; keys j < i + diag_shift - (window_left - 1) are masked
  int diag_shift;   // S_kv - S_q for bottom-right alignment, else 0 (with per-batch lengths: BatchExtent's)
  int bottom_right;  // 1: bottom-right alignment (with padding the shift is seq_len_kv[b] - seq_len_q[b])
  int stats_log2;
  int sf_layout;  // 0: per-(b,h) planes (pad rows zeroed), 1: token-major
  int sf_rows, sf_cols;  // R and C of sf_o
  int sf_q_rows, sf_q_cols, sf_k_rows, sf_k_cols, sf_v_rows, sf_v_cols;  // R and C of the input scale planes
  // descale_q / k / v of (batch b, kv head h_kv) are element b * stride[0] + h_kv * stride[1]: a per-(batch, kv
  // head) scale's strides, 0 and 0 for a per-tensor one, so that one kernel serves both (read once per work tile).
  int descale_q_stride[2], descale_k_stride[2], descale_v_stride[2];
  FastDiv group_div, h_kv_div, b_div;  // group, H_kv and B, for the kernels' divisions by them
  // Per-sequence starts (RIME_F_STARTS; nullptr: every sequence starts at 0). Last in the block, so that the
  // offsets of the fields above, and the code of every kernel without starts, stay as they were.
  const int* seq_start_q;
  const int* seq_start_kv;
  float logit_softcap;  // RIME_F_SOFTCAP: the cap c (> 0)
  // sdpa_sm90's dynamic row tiles (layout.h, dynamic_row_tiles): the next row tile's launch index, zeroed by the
  // plan before each execute; nullptr otherwise.
  unsigned* row_tile_counter;
};

struct CombineParams {
  const float* o_partial;
  const float* lse_partial;
  void* o;
  float* stats;
  float* amax_o;
  const float* sink;
  const int* seq_len_q;
  const int* cu_seqlens_q;  // ragged Q (RIME_F_RAGGED_Q): rows from the offsets, O and Stats at tokens
  const float* scale_o;
  unsigned char* sf_o;
  long long o_stride[3];
  long long stats_stride[3];
  int B, H_q, S_q;
  int num_splits;
  int stats_log2;
  int sf_layout, sf_rows, sf_cols;
  const int* seq_start_q;  // RIME_F_STARTS (nullptr: 0); last, as in SdpaParams
};

// The checked-indices kernel (engines/common/index_check.cuh): the data of one plan's per-sequence lengths and
// page table, and the word that receives the first bad entry.
struct IndexCheckParams {
  const int* seq_len_q;   // nullptr: the graph has none
  const int* seq_len_kv;
  const int* cu_seqlens_q;   // ragged Q: [B + 1] token offsets (nullptr: not ragged)
  const int* cu_seqlens_kv;  // ragged K/V
  const int* page_table;     // nullptr: K/V are not paged
  long long page_table_stride;
  int B, S_q, S_kv;
  int T_q, T_kv;  // a ragged side's token count
  int page_size_log2, num_pages;
  unsigned long long* first_bad;  // (b << 32) | (entry + 1), entry -1 for a length; all ones: none
  const int* seq_start_q;  // per-sequence starts (nullptr: none): start >= 0 and start + length <= S
  const int* seq_start_kv;
};

// The padding-mask kernel (engines/common/padding_mask.cuh, rime::sequences_from_padding_mask): a mask of B rows,
// each read at positions [offset, offset + positions) (elements, row_stride apart, unit stride within a row), and
// the [4][B] int32 rows it writes: start_q, len_q, start_kv, len_kv.
struct PaddingMaskParams {
  const void* mask;
  long long row_stride;
  int B, offset, positions, q_length;
  int* out;
};

// A TMA descriptor (the driver's CUtensorMap) as the kernels see it: 128 opaque bytes, 64-byte aligned.
struct alignas(64) RimeTensorMap {
  unsigned long long opaque[16];
};

// The parameter block of the sdpa_sm90 kernels (passed as __grid_constant__, so the tensor maps are read
// where they lie): K and V as 4-D TMA maps (d, s, h, b), and the common block.
struct alignas(64) SdpaSm90Params {
  RimeTensorMap k_map;
  RimeTensorMap v_map;
  SdpaParams p;
};
