// Internal: one checked run of a plan on the GPU: fresh random inputs, poisoned outputs, execute, download, and
// compare with the CPU reference under the tolerances of SPEC section 10. Used by `rime run`, the GPU tests and
// the benchmark.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "testing/reference/sdpa.hpp"
#include "rime/plan.hpp"

namespace rime::testing {

struct TrialInputs {
  reference::HostTensors tensors;  // every input tensor's host bytes
  uint64_t seed = 0;
};
// Random inputs for the graph: Q/K/V exactly representable in their dtype, descales in [0.5, 1.5], scale_o in
// [0.5, 2], sinks in [-2, 4], seq lens in [0, S] (both ends included in every batch set of 3 or more), MXFP8
// scales in 2^-2 .. 2^2 (mx_scale_log2) with NaN pads.
// Q/K/V are generated on every core (a 268 MB decode graph took ~11 s on one): see fill_uniform.
// mx_scale_log2: MXFP8 scales are drawn from 2^-mx_scale_log2 .. 2^mx_scale_log2.
// seq_len_kv: when given, every batch's KV length is drawn uniformly in [lo, min(hi, S_kv)] (a serving-like mix,
// e.g. 1k-32k) instead of [0, S_kv] with one full and one empty batch, and every seq_len_q is S_q (a decode step's
// new tokens, all of them).
// seq_lengths: when given, every sequence's length is drawn once uniformly in [lo, hi] and used on both sides
// (a prefill's self-attention mix: seq_len_q = seq_len_kv, or both ragged sides' offsets), clamped to each side's
// S and trimmed to a ragged side's T. The draw depends on the seed and the sequence only, so a ragged graph and
// its padded twin get the same lengths.
// uniform_descales: descale_q / descale_k / descale_v take one draw each, in every entry. A graph with per-(batch,
// kv head) descales then gets the values its per-tensor twin gets from the same seed, entry for entry, and computes
// the same O: the two plans' times differ by their descale handling alone (the per-head bench rows).
struct LengthRange {
  int64_t lo = 0, hi = 0;
};
TrialInputs make_inputs(const Graph& graph, uint64_t seed, int mx_scale_log2 = 2,
                        std::optional<LengthRange> seq_len_kv = std::nullopt,
                        std::optional<LengthRange> seq_lengths = std::nullopt, bool uniform_descales = false);

// Paged K/V: fills the page table for the seq_len_kv in `inputs`: the pool's pages in a shuffled order, sequence
// after sequence (wrapping: sequences share pages when the pool is smaller than B x max_pages); entries past a
// sequence's last page hold an id far out of the pool, which the contract lets a kernel ignore and a kernel that
// reads one fails on. make_inputs calls it; call it again after replacing seq_len_kv (rime run --inputs).
void fill_page_table(const Graph& graph, TrialInputs& inputs, uint64_t seed);

// Elements [0, span) of a tensor of `dtype` (8 bits or wider), uniform in [lo, hi] and rounded to the dtype, on
// `workers` threads. Chunk c of 65536 elements draws from its own generator seeded by (seed, c), so the bytes
// depend on the seed and not on the number of workers.
void fill_uniform(DataType dtype, uint8_t* bytes, int64_t span, double lo, double hi, uint64_t seed,
                  unsigned workers);

struct TrialOptions {
  int64_t max_reference_rows = 4096;  // larger problems are checked on a random sample of rows
  bool check = true;
  // The first execute runs in checked-indices mode (ExecuteOptions::check_indices): a bad length or page id is
  // the run's error instead of an out-of-bounds read. The timed executes do not check.
  bool check_indices = false;
  int timing_iterations = 0;  // > 0: time that many executes after warm-up (median of CUDA events)
  // > 0: also compare O with reference::attention_row_fp8_p on KV tiles of this many keys (a diagnostic that
  // separates kernel errors from the E4M3 rounding of P); fills the report's emulated_* fields.
  int emulate_fp8_p_tile = 0;
  int emulate_fp8_p_terms = 1;  // 2 for MXFP8 inputs (P in two E4M3 terms)
};

struct TrialReport {
  bool passed = true;
  std::vector<std::string> failures;  // first few problems found
  int64_t rows_checked = 0, elements_checked = 0, elements_outside = 0;
  double o_max_abs_err = 0, o_rel_l2 = 0, lse_max_abs_err = 0;
  double quant_rel_l2 = 0;  // block-scaled O: the reference's own quantization error (relative L2)
  // With emulate_fp8_p_tile: elements outside the FP8 tolerance against the emulation, and the largest
  // |O - emulation| over the elements checked.
  int64_t emulated_outside = 0;
  double emulated_max_abs_err = 0;
  double amax_o_gpu = 0, amax_o_ref = 0, amax_s_gpu = 0, amax_s_ref = 0;
  double median_ms = 0, tflops = 0, gbps = 0;
  reference::HostTensors outputs;  // every output tensor's host bytes after the run
};

Result<TrialReport> run_trial(const Plan& plan, const TrialInputs& inputs, const TrialOptions& options);

// The same run for any executor of graph `g` (a plan, a rank's RingPlan): `execute` runs it on the buffers, the
// workspace of `workspace_bytes` (poisoned) and the stream; `first` is the checked run before the timed ones.
using Execute = std::function<Status(const std::unordered_map<int64_t, void*>& buffers, void* workspace,
                                     CUstream stream, bool first)>;
Result<TrialReport> run_trial(const Graph& g, const Facts& f, int64_t workspace_bytes, const TrialInputs& inputs,
                              const TrialOptions& options, const Execute& execute);

// The comparison half of run_trial, on the CPU: `outputs` holds every output tensor's bytes as the GPU wrote
// them. Every element of O must be finite (the poison is NaN); sampled rows are compared with the reference.
TrialReport check_outputs(const Graph& graph, const Facts& facts, const TrialInputs& inputs,
                          reference::HostTensors outputs, const TrialOptions& options);

// FLOPs of the two matmuls over the unmasked (q, k) pairs (padding ignored): 2 * (D_qk + D_v) per pair.
double attention_flops(const Facts& f);
// The same over the pairs the run's sequences hold: with per-sequence lengths (padding, paged, ragged) each
// sequence's own rows and keys, from `inputs`; otherwise attention_flops(f).
double attention_flops(const Graph& g, const Facts& f, const TrialInputs& inputs);

// The bytes a plan's run moves, for GB/s: every tensor of the graph once, except K and V with per-sequence
// lengths (padded tensors, paged pools, ragged tokens), of which only the keys the sequences hold are read (each
// sequence's kv length of every kv head, from `inputs`), plus for paged pools the page-table entries that address
// them.
double bytes_moved(const Graph& g, const Facts& f, const TrialInputs& inputs);

}  // namespace rime::testing
