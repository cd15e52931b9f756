// The table of bad graphs: each row patches an example (RFC 6902 JSON Patch) and names the status code, a
// substring of the message and the JSON pointer the error must point at.
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "catch.hpp"
#include "rime/json.hpp"
#include "test_paths.hpp"

using namespace rime;
using nlohmann::json;

namespace {

struct BadGraph {
  const char* example;
  const char* patch;  // JSON Patch applied to the example
  StatusCode code;
  const char* substring;
  const char* location;
};

// fp8_prefill tensors: 0 Q, 1 K, 2 V, 3 descale_q, 4 descale_k, 5 descale_v, 6 descale_s, 7 scale_s, 8 scale_o,
//   9 O, 10 Stats, 11 Amax_S, 12 Amax_O.
// bf16_causal_sink: 0 Q, 1 K, 2 V, 3 sink, 4 O, 5 Stats.   fp16_window_padding: 0 Q, 1 K, 2 V, 3 seq_len_q,
//   4 seq_len_kv, 5 O.   fp8_nvfp4_o_planes: 0-2 QKV, 3-8 scalars, 9 O, 10 sf_o, 11 Amax_O.
// mxfp8_inputs: 0-2 QKV, 3 SF_Q, 4 SF_K, 5 SF_V, 6 O, 7 Amax_O.
// fp8_paged_decode: 0 Q, 1 K pool, 2 V pool, 3-8 scalars, 9 O, 10 Stats, 11 seq_len_q, 12 seq_len_kv, 13 page_table.
// data:bf16_ragged_prefill (tests/data): 0 Q [1,4,300,64], 1 K, 2 V [1,2,300,64], 3 cu_seqlens_q [5],
//   4 cu_seqlens_kv [5], 5 O, 6 Stats [1,4,300,1]; max_seqlen_q / max_seqlen_kv 128.
const BadGraph kBadGraphs[] = {
    // ragged (THD) batches
    {"data:bf16_ragged_prefill", R"([{"op":"replace","path":"/tensors/3/dims","value":[4,1]},
                                     {"op":"replace","path":"/tensors/3/strides","value":[1,1]}])",
     StatusCode::InvalidGraph, "cu_seqlens_q (cu_seqlens_q): dims [4,1] must be [B + 1] with B >= 1", "/tensors/3/dims"},
    {"data:bf16_ragged_prefill", R"([{"op":"replace","path":"/tensors/3/dtype","value":"FP32"}])",
     StatusCode::InvalidGraph, "cu_seqlens_q (cu_seqlens_q): dtype FP32 must be INT32", "/tensors/3/dtype"},
    {"data:bf16_ragged_prefill", R"([{"op":"replace","path":"/tensors/0/dims/0","value":2}])", StatusCode::InvalidGraph,
     "with cu_seqlens_q the tensor is token-major [1, H, T, D]; dims[0] must be 1, is 2", "/tensors/0/dims"},
    {"data:bf16_ragged_prefill", R"([{"op":"replace","path":"/tensors/4/dims","value":[4]}])", StatusCode::InvalidGraph,
     "cu_seqlens_kv (cu_seqlens_kv): dims [4] give 3 sequences; the batch is 4", "/tensors/4/dims"},
    {"data:bf16_ragged_prefill", R"([{"op":"add","path":"/tensors/-","value":{"name":"seq_len_q","uid":9,"dims":[4],
                                       "strides":[1],"dtype":"INT32"}},
                                     {"op":"add","path":"/op/inputs/seq_len_q","value":9}])",
     StatusCode::InvalidGraph, "seq_len_q (seq_len_q) and cu_seqlens_q (cu_seqlens_q) are both bound",
     "/op/inputs/seq_len_q"},
    {"data:bf16_ragged_prefill", R"([{"op":"replace","path":"/op/attributes/padding_mask","value":false}])",
     StatusCode::InvalidGraph, "cu_seqlens_q is bound but padding_mask is false", "/op/inputs/cu_seqlens_q"},
    {"data:bf16_ragged_prefill", R"([{"op":"replace","path":"/op/attributes/max_seqlen_q","value":301}])",
     StatusCode::InvalidGraph, "max_seqlen_q 301 is outside 1..300 (Q's token count)", "/op/attributes/max_seqlen_q"},
    {"data:bf16_ragged_prefill", R"([{"op":"replace","path":"/tensors/6/dims/0","value":4},
                                     {"op":"replace","path":"/tensors/6/strides/0","value":1200}])",
     StatusCode::InvalidGraph, "Stats (Stats): dims [4,4,300,1] must be [1,4,300,1]", "/tensors/6/dims"},
    {"fp16_window_padding", R"([{"op":"add","path":"/op/attributes/max_seqlen_kv","value":100}])",
     StatusCode::InvalidGraph, "max_seqlen_kv is set but cu_seqlens_kv is not bound", "/op/attributes/max_seqlen_kv"},
    {"fp8_paged_decode", R"([{"op":"add","path":"/tensors/-","value":{"name":"cu_kv","uid":30,"dims":[5],
                               "strides":[1],"dtype":"INT32"}},
                             {"op":"add","path":"/op/inputs/cu_seqlens_kv","value":30}])",
     StatusCode::InvalidGraph, "cu_kv (cu_seqlens_kv) and page_table (page_table) are both bound",
     "/op/inputs/cu_seqlens_kv"},
    {"mxfp8_inputs", R"([{"op":"add","path":"/tensors/-","value":{"name":"cu_q","uid":30,"dims":[3],
                           "strides":[1],"dtype":"INT32"}},
                         {"op":"add","path":"/op/inputs/cu_seqlens_q","value":30}])",
     StatusCode::InvalidGraph, "cu_seqlens_q is not an operand of sdpa_mxfp8", "/op/inputs/cu_seqlens_q"},
    // paged K/V
    {"fp8_paged_decode", R"([{"op":"replace","path":"/tensors/1/dims/2","value":24},
                             {"op":"replace","path":"/tensors/2/dims/2","value":24}])",
     StatusCode::InvalidGraph, "page size 24 (dims[2] of a paged pool [num_pages, H_kv, page_size, D]) must be a power "
     "of two in 16..256", "/tensors/1/dims"},
    {"fp8_paged_decode", R"([{"op":"replace","path":"/tensors/1/dims/2","value":512},
                             {"op":"replace","path":"/tensors/2/dims/2","value":512}])",
     StatusCode::InvalidGraph, "page size 512", "/tensors/1/dims"},
    {"fp8_paged_decode", R"([{"op":"replace","path":"/tensors/13/dims","value":[3,64]}])", StatusCode::InvalidGraph,
     "page_table (page_table): dims [3,64] must be [4, max_pages_per_seq]", "/tensors/13/dims"},
    {"fp8_paged_decode", R"([{"op":"replace","path":"/tensors/13/dtype","value":"FP32"}])", StatusCode::InvalidGraph,
     "page_table (page_table): dtype FP32 must be INT32", "/tensors/13/dtype"},
    {"fp8_paged_decode", R"([{"op":"replace","path":"/tensors/2/dims/0","value":100}])", StatusCode::InvalidGraph,
     "do not match K's page count 200", "/tensors/2/dims"},
    {"fp8_paged_decode", R"([{"op":"remove","path":"/op/inputs/seq_len_q"},{"op":"remove","path":"/op/inputs/seq_len_kv"},
                             {"op":"remove","path":"/tensors/12"},{"op":"remove","path":"/tensors/11"},
                             {"op":"replace","path":"/op/attributes/padding_mask","value":false}])",
     StatusCode::InvalidGraph, "page_table (page_table) is bound but padding_mask is false", "/op/attributes/padding_mask"},
    // shapes
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/1/dims/3","value":64}])", StatusCode::InvalidGraph,
     "do not match Q's head dim 128", "/tensors/1/dims"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/0/dims","value":[2,8,1024]},
                        {"op":"replace","path":"/tensors/0/strides","value":[131072,128,1]}])",
     StatusCode::InvalidGraph, "have rank 3", "/tensors/0/dims"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/1/dims/1","value":3},
                        {"op":"replace","path":"/tensors/2/dims/1","value":3}])",
     StatusCode::InvalidGraph, "do not divide", "/tensors/1/dims"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/2/dims/2","value":512}])", StatusCode::InvalidGraph,
     "do not match K's sequence length 1024", "/tensors/2/dims"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/9/dims/3","value":64}])", StatusCode::InvalidGraph,
     "do not match V's head dim 128", "/tensors/9/dims"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/1/dims/0","value":3}])", StatusCode::InvalidGraph,
     "do not match Q's batch 2", "/tensors/1/dims"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/9/dims/2","value":1000}])", StatusCode::InvalidGraph,
     "do not match Q's sequence length 1024", "/tensors/9/dims"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/9/dims/1","value":4}])", StatusCode::InvalidGraph,
     "do not match Q's head count 8", "/tensors/9/dims"},
    // tensor descriptors
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/0/strides/3","value":2}])", StatusCode::InvalidGraph,
     "innermost stride 2", "/tensors/0/strides"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/0/dims/2","value":-4}])", StatusCode::InvalidGraph,
     "dim 2 is -4", "/tensors/0/dims/2"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/0/dims/2","value":0}])", StatusCode::InvalidGraph,
     "dims must be in 1..2147483647", "/tensors/0/dims/2"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/0/strides/1","value":0}])", StatusCode::InvalidGraph,
     "strides must be >= 1", "/tensors/0/strides/1"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/0/strides","value":[1,1,1]}])", StatusCode::InvalidGraph,
     "3 strides for 4 dims", "/tensors/0/strides"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/0/dims","value":[2147483647,2147483647,4,128]}])",
     StatusCode::InvalidGraph, "overflow a 64-bit size", "/tensors/0/dims"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/0/strides","value":[4611686018427387904,131072,128,1]}])",
     StatusCode::InvalidGraph, "overflow a 64-bit size", "/tensors/0/dims"},
    {"fp8_prefill", R"([{"op":"remove","path":"/tensors/0/strides"},
                        {"op":"replace","path":"/tensors/0/dims","value":[2147483647,2147483647,2147483647,128]}])",
     StatusCode::InvalidGraph, "overflow a 64-bit size", "/tensors/0/dims"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/4/uid","value":4}])", StatusCode::InvalidGraph,
     "uid 4 is already the uid of descale_q", "/tensors/4/uid"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/4/name","value":"descale_q"}])", StatusCode::InvalidGraph,
     "used by two tensors", "/tensors/4/name"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/0/dims","value":[1,1,1,1,1,1,1,1,1]}])",
     StatusCode::InvalidJson, "rank <= 8", "/tensors/0/dims"},
    // dtypes
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/0/dtype","value":"FP32"}])", StatusCode::InvalidGraph,
     "dtype FP32 is not allowed for sdpa_fp8 (allowed: FP8_E4M3, FP8_E5M2; FP16, BF16 over FP8 K/V)",
     "/tensors/0/dtype"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/1/dtype","value":"BF16"}])", StatusCode::InvalidGraph,
     "dtype BF16 is not allowed for sdpa_fp8 (allowed: FP8_E4M3, FP8_E5M2)", "/tensors/1/dtype"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/0/dtype","value":"BF16"},
                        {"op":"replace","path":"/tensors/2/dtype","value":"FP8_E5M2"}])",
     StatusCode::InvalidGraph, "V: dtype FP8_E5M2 differs from K's FP8_E4M3; K and V share one type", "/tensors/2/dtype"},
    {"mxfp8_inputs", R"([{"op":"replace","path":"/tensors/0/dtype","value":"BF16"}])", StatusCode::InvalidGraph,
     "dtype BF16 is not allowed for sdpa_mxfp8 (allowed: FP8_E4M3, FP8_E5M2)", "/tensors/0/dtype"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/2/dtype","value":"FP8_E5M2"}])", StatusCode::InvalidGraph,
     "Q, K and V share one type", "/tensors/2/dtype"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/9/dtype","value":"INT32"}])", StatusCode::InvalidGraph,
     "dtype INT32 is not allowed", "/tensors/9/dtype"},
    {"bf16_causal_sink", R"([{"op":"replace","path":"/tensors/0/dtype","value":"FP8_E4M3"}])",
     StatusCode::InvalidGraph, "dtype FP8_E4M3 is not allowed for sdpa", "/tensors/0/dtype"},
    {"bf16_causal_sink", R"([{"op":"replace","path":"/tensors/4/dtype","value":"FP8_E4M3"}])",
     StatusCode::InvalidGraph, "allowed: FP16, BF16", "/tensors/4/dtype"},
    // scalars, sink, Stats, seq lens
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/3/dims","value":[1,1,1,2]}])", StatusCode::InvalidGraph,
     "descale_q (descale_q): dims [1,1,1,2] must be [1,1,1,1] (per tensor) or [2,8,1,1] (per batch and kv head)",
     "/tensors/3/dims"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/4/dims","value":[2,4,1,1]},
                        {"op":"replace","path":"/tensors/4/strides","value":[4,1,1,1]}])", StatusCode::InvalidGraph,
     "descale_k (descale_k): dims [2,4,1,1] must be [1,1,1,1] (per tensor) or [2,8,1,1]", "/tensors/4/dims"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/6/dims","value":[2,8,1,1]},
                        {"op":"replace","path":"/tensors/6/strides","value":[8,1,1,1]}])", StatusCode::InvalidGraph,
     "descale_s (descale_s): dims [2,8,1,1] must be [1,1,1,1] (a per-tensor scalar)", "/tensors/6/dims"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/4/dtype","value":"FP16"}])", StatusCode::InvalidGraph,
     "dtype FP16 must be FP32", "/tensors/4/dtype"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/10/dims","value":[2,8,1024,2]},
                        {"op":"replace","path":"/tensors/10/strides","value":[16384,2048,2,1]}])",
     StatusCode::InvalidGraph, "one LSE per q row", "/tensors/10/dims"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/10/dtype","value":"BF16"}])", StatusCode::InvalidGraph,
     "Stats (Stats): dtype BF16 must be FP32", "/tensors/10/dtype"},
    {"bf16_causal_sink", R"([{"op":"replace","path":"/tensors/3/dims","value":[1,8,1,1]}])",
     StatusCode::InvalidGraph, "one logit per q head", "/tensors/3/dims"},
    {"bf16_causal_sink", R"([{"op":"replace","path":"/tensors/3/dtype","value":"BF16"}])", StatusCode::InvalidGraph,
     "sink (sink): dtype BF16 must be FP32", "/tensors/3/dtype"},
    {"fp16_window_padding", R"([{"op":"replace","path":"/tensors/3/dtype","value":"INT64"}])",
     StatusCode::InvalidGraph, "dtype INT64 must be INT32", "/tensors/3/dtype"},
    {"fp16_window_padding", R"([{"op":"replace","path":"/tensors/4/dims","value":[5]}])", StatusCode::InvalidGraph,
     "one length per batch", "/tensors/4/dims"},
    // bindings
    {"fp8_prefill", R"([{"op":"remove","path":"/op/inputs/descale_s"}])", StatusCode::InvalidGraph,
     "sdpa_fp8 requires a descale_s operand", "/op/inputs/descale_s"},
    {"fp8_prefill", R"([{"op":"add","path":"/op/inputs/SF_Q","value":4}])", StatusCode::InvalidGraph,
     "SF_Q is not an operand of sdpa_fp8", "/op/inputs/SF_Q"},
    {"fp8_prefill", R"([{"op":"replace","path":"/op/kind","value":"sdpa"}])", StatusCode::InvalidGraph,
     "descale_q is not an operand of sdpa", "/op/inputs/descale_q"},
    {"fp8_prefill", R"([{"op":"replace","path":"/op/inputs/K","value":77}])", StatusCode::InvalidGraph,
     "names uid 77, which no tensor has", "/op/inputs/K"},
    {"fp8_prefill", R"([{"op":"replace","path":"/op/inputs/descale_k","value":4}])", StatusCode::InvalidGraph,
     "bound as both descale_q and descale_k", "/op/inputs/descale_k"},
    {"fp8_prefill", R"([{"op":"add","path":"/tensors/-","value":{"name":"extra","uid":99,"dims":[1],"dtype":"FP32"}}])",
     StatusCode::InvalidGraph, "extra: uid 99 is not an operand", "/tensors/13/uid"},
    {"fp8_prefill", R"([{"op":"remove","path":"/tensors/12/output"}])", StatusCode::InvalidGraph,
     "bound as Amax_O (an output) but is_output is false", "/tensors/12/output"},
    {"mxfp8_inputs", R"([{"op":"add","path":"/tensors/-","value":{"name":"Amax_S","uid":50,"dims":[1,1,1,1],"dtype":"FP32","output":true}},
                         {"op":"add","path":"/op/outputs/Amax_S","value":50}])",
     StatusCode::InvalidGraph, "Amax_S is not an operand of sdpa_mxfp8", "/op/outputs/Amax_S"},
    // attributes
    {"fp8_prefill", R"([{"op":"remove","path":"/op/attributes/generate_stats"}])", StatusCode::InvalidGraph,
     "bound as Stats but generate_stats is false", "/op/outputs/Stats"},
    {"fp16_window_padding", R"([{"op":"add","path":"/op/attributes/generate_stats","value":true}])",
     StatusCode::InvalidGraph, "no Stats output is bound", "/op/attributes/generate_stats"},
    {"fp16_window_padding", R"([{"op":"add","path":"/op/attributes/stats_log2","value":true}])",
     StatusCode::InvalidGraph, "stats_log2 is true but no Stats", "/op/attributes/stats_log2"},
    {"fp8_prefill", R"([{"op":"add","path":"/op/attributes/padding_mask","value":true}])", StatusCode::InvalidGraph,
     "padding_mask needs seq_len_q or cu_seqlens_q", "/op/attributes/padding_mask"},
    {"fp16_window_padding", R"([{"op":"replace","path":"/op/attributes/padding_mask","value":false}])",
     StatusCode::InvalidGraph, "padding_mask is false", "/op/inputs/seq_len_q"},
    {"fp16_window_padding", R"([{"op":"replace","path":"/op/attributes/window_left","value":-3}])",
     StatusCode::InvalidGraph, "window_left -3 is outside 0..2147483647", "/op/attributes/window_left"},
    {"fp16_window_padding", R"([{"op":"replace","path":"/op/attributes/causal","value":false},
                                {"op":"add","path":"/op/attributes/band_right","value":-1}])",
     StatusCode::InvalidGraph, "band_right -1 is outside 0..2147483647", "/op/attributes/band_right"},
    {"fp16_window_padding", R"([{"op":"add","path":"/op/attributes/band_right","value":4}])",
     StatusCode::InvalidGraph, "causal is band_right 0", "/op/attributes/band_right"},
    {"fp8_prefill", R"([{"op":"add","path":"/op/knobs","value":{"split_kv":0}}])", StatusCode::InvalidGraph,
     "split_kv 0 is outside 1..1024", "/op/knobs/split_kv"},
    {"fp8_prefill", R"([{"op":"add","path":"/op/knobs","value":{"tile":{"q":-64,"kv":64}}}])",
     StatusCode::InvalidGraph, "tile -64x64 is outside", "/op/knobs/tile"},
    {"fp8_prefill", R"([{"op":"add","path":"/op/knobs","value":{"tile":{"q":64}}}])", StatusCode::InvalidJson,
     "missing required field 'kv'", "/op/knobs/tile/kv"},
    {"fp8_prefill", R"([{"op":"add","path":"/op/attributes/attn_scale","value":1e39}])", StatusCode::InvalidJson,
     "does not fit in FP32", "/op/attributes/attn_scale"},
    {"fp8_prefill", R"([{"op":"add","path":"/op/attributes/alignment","value":"diagonal"}])",
     StatusCode::InvalidJson, "unknown alignment 'diagonal'", "/op/attributes/alignment"},
    // block-scaled O (SPEC section 5)
    {"fp8_nvfp4_o_planes", R"([{"op":"replace","path":"/tensors/9/dtype","value":"BF16"}])",
     StatusCode::InvalidGraph, "sf_o needs O FP4_E2M1 (NVFP4) or FP8_E4M3 (MXFP8)", "/op/outputs/sf_o"},
    {"fp8_nvfp4_o_planes", R"([{"op":"replace","path":"/tensors/10/dtype","value":"FP8_E8M0"}])",
     StatusCode::InvalidGraph, "dtype FP8_E8M0 must be FP8_E4M3", "/tensors/10/dtype"},
    {"fp8_nvfp4_o_planes", R"([{"op":"replace","path":"/tensors/10/strides","value":[696320,8,320,2]}])",
     StatusCode::InvalidGraph, "innermost stride 2", "/tensors/10/strides"},
    {"fp8_nvfp4_o_planes", R"([{"op":"replace","path":"/tensors/10/strides","value":[700000,17408,8,1]}])",
     StatusCode::InvalidGraph, "neither per-(b,h) planes nor token-major", "/tensors/10/strides"},
    {"fp8_nvfp4_o_planes", R"([{"op":"replace","path":"/tensors/10/dims/2","value":2048},
                               {"op":"replace","path":"/tensors/10/strides","value":[655360,16384,8,1]}])",
     StatusCode::InvalidGraph, "R 2048 must be a multiple of 128 and >= 2176", "/tensors/10/dims"},
    {"fp8_nvfp4_o_planes", R"([{"op":"replace","path":"/tensors/10/dims/3","value":4},
                               {"op":"replace","path":"/tensors/10/strides","value":[348160,8704,4,1]}])",
     StatusCode::InvalidGraph, "C 4 < 8", "/tensors/10/dims"},
    {"fp8_nvfp4_o_planes", R"([{"op":"replace","path":"/tensors/9/strides/1","value":129}])",
     StatusCode::InvalidGraph, "FP4_E2M1 stride 129 on dim 1 is odd", "/tensors/9/strides/1"},
    {"fp8_mxfp8_o_token_major", R"([{"op":"replace","path":"/tensors/9/dtype","value":"FP8_E5M2"}])",
     StatusCode::InvalidGraph, "sf_o needs O FP4_E2M1 (NVFP4) or FP8_E4M3 (MXFP8); O is FP8_E5M2", "/op/outputs/sf_o"},
    // MXFP8 input scales (SPEC section 6)
    {"mxfp8_inputs", R"([{"op":"replace","path":"/tensors/3/dtype","value":"FP8_E4M3"}])", StatusCode::InvalidGraph,
     "SF_Q (SF_Q): dtype FP8_E4M3 must be FP8_E8M0", "/tensors/3/dtype"},
    {"mxfp8_inputs", R"([{"op":"replace","path":"/tensors/5/dims/3","value":4},
                         {"op":"replace","path":"/tensors/5/strides","value":[16384,512,4,1]}])",
     StatusCode::InvalidGraph, "C 4 must be a multiple of 4 and >= 64", "/tensors/5/dims"},
    {"mxfp8_inputs", R"([{"op":"replace","path":"/tensors/4/dims/2","value":2000},
                         {"op":"replace","path":"/tensors/4/strides","value":[128000,8000,4,1]}])",
     StatusCode::InvalidGraph, "R 2000 must be a multiple of 128", "/tensors/4/dims"},
    {"mxfp8_inputs", R"([{"op":"replace","path":"/tensors/3/strides","value":[4,65536,1,1]}])",
     StatusCode::InvalidGraph, "are not per-(b,h) planes", "/tensors/3/strides"},
    {"mxfp8_inputs", R"([{"op":"remove","path":"/op/inputs/SF_V"}])", StatusCode::InvalidGraph,
     "sdpa_mxfp8 requires a SF_V operand", "/op/inputs/SF_V"},
    // schema
    {"fp8_prefill", R"([{"op":"add","path":"/tensors/0/bogus","value":1}])", StatusCode::InvalidJson,
     "unknown field 'bogus'", "/tensors/0/bogus"},
    {"fp8_prefill", R"([{"op":"remove","path":"/tensors/0/dims"}])", StatusCode::InvalidJson,
     "missing required field 'dims'", "/tensors/0/dims"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/0/uid","value":"one"}])", StatusCode::InvalidJson,
     "expected an integer, found string", "/tensors/0/uid"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/0/dims/1","value":8.5}])", StatusCode::InvalidJson,
     "expected an integer, found number", "/tensors/0/dims/1"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/0/dims/1","value":18446744073709551615}])",
     StatusCode::InvalidJson, "does not fit in int64", "/tensors/0/dims/1"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/0/dtype","value":"FP8"}])", StatusCode::InvalidJson,
     "unknown dtype 'FP8'", "/tensors/0/dtype"},
    {"fp8_prefill", R"([{"op":"add","path":"/tensors/0/output","value":"yes"}])", StatusCode::InvalidJson,
     "expected a boolean, found string", "/tensors/0/output"},
    {"fp8_prefill", R"([{"op":"replace","path":"/op/kind","value":"flash"}])", StatusCode::InvalidJson,
     "unknown op kind 'flash'", "/op/kind"},
    {"fp8_prefill", R"([{"op":"add","path":"/op/inputs/Qx","value":1}])", StatusCode::InvalidJson,
     "unknown input 'Qx'", "/op/inputs/Qx"},
    {"fp8_prefill", R"([{"op":"add","path":"/op/inputs/O","value":10}])", StatusCode::InvalidJson,
     "unknown input 'O'", "/op/inputs/O"},
    {"fp8_prefill", R"([{"op":"replace","path":"/rime_graph","value":2}])", StatusCode::InvalidJson,
     "graph format version 2 is not supported", "/rime_graph"},
    {"fp8_prefill", R"([{"op":"remove","path":"/op"}])", StatusCode::InvalidJson, "missing required field 'op'",
     "/op"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors","value":{}}])", StatusCode::InvalidJson,
     "expected an array, found object", "/tensors"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/0/name","value":""}])", StatusCode::InvalidGraph,
     "name of length 0", "/tensors/0/name"},
    {"fp8_prefill", R"([{"op":"replace","path":"/op/inputs","value":[1,2]}])", StatusCode::InvalidJson,
     "expected an object, found array", "/op/inputs"},
    // outputs whose elements overlap (issue 13): O's rows land on each other, an FP4 O too; inputs may alias
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/9/strides","value":[1048576,131072,64,1]}])",
     StatusCode::InvalidGraph, "O: output strides [1048576,131072,64,1] on dims [2,8,1024,128] overlap: dim 2 (stride 64)",
     "/tensors/9/strides"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/10/strides","value":[8192,1024,0,1]}])",
     StatusCode::InvalidGraph, "stride 2 is 0; strides must be >= 1", "/tensors/10/strides/2"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/10/strides","value":[1024,1024,1,1]}])",
     StatusCode::InvalidGraph, "Stats: output strides [1024,1024,1,1] on dims [2,8,1024,1] overlap", "/tensors/10/strides"},
    {"fp8_nvfp4_o_planes", R"([{"op":"replace","path":"/tensors/9/strides","value":[262144,128,2,1]}])",
     StatusCode::InvalidGraph, "output strides [262144,128,2,1] on dims", "/tensors/9/strides"},
    // 32-bit ranges: extents and bounds the kernels hold in 32 bits
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/1/dims/2","value":2147483648},
                        {"op":"replace","path":"/tensors/1/strides","value":[1,1,1,1]}])",
     StatusCode::InvalidGraph, "K: dim 2 is 2147483648; dims must be in 1..2147483647", "/tensors/1/dims/2"},
    {"fp16_window_padding", R"([{"op":"replace","path":"/op/attributes/window_left","value":4294967296}])",
     StatusCode::InvalidGraph, "window_left 4294967296 is outside 0..2147483647", "/op/attributes/window_left"},
    {"bf16_causal_sink", R"([{"op":"remove","path":"/op/attributes/causal"},
                             {"op":"add","path":"/op/attributes/band_right","value":2147483648}])",
     StatusCode::InvalidGraph, "band_right 2147483648 is outside 0..2147483647", "/op/attributes/band_right"},
    // names that could forge message lines, and pointers that need RFC 6901 escapes
    {"fp8_prefill", R"([{"op":"add","path":"/tensors/0/bad~0key\nERROR: forged","value":1}])", StatusCode::InvalidJson,
     "unknown field 'bad~key\\u000aERROR: forged'", "/tensors/0/bad~0key\\u000aERROR: forged"},
    {"fp8_prefill", R"([{"op":"add","path":"/op/inputs/a~1b","value":1}])", StatusCode::InvalidJson,
     "unknown input 'a/b'", "/op/inputs/a~1b"},
    {"fp8_prefill", R"([{"op":"replace","path":"/tensors/0/dtype","value":"FP8\r\nX"}])", StatusCode::InvalidJson,
     "unknown dtype 'FP8\\u000d\\u000aX'", "/tensors/0/dtype"},
};


}  // namespace

TEST_CASE("every bad graph gets its code, message and location", "[validate]") {
  CHECK(sizeof(kBadGraphs) / sizeof(kBadGraphs[0]) >= 40);
  for (const BadGraph& bad : kBadGraphs) {
    INFO(bad.example << " " << bad.patch);
    const std::string example = bad.example;
    const bool data = example.rfind("data:", 0) == 0;
    json doc = json::parse(test::read_text(data ? test::data_path(example.substr(5)) : test::example_path(example)));
    REQUIRE(graph_from_json(doc.dump()).ok());  // the unpatched example is valid
    json patched = doc.patch(json::parse(bad.patch));
    Result<Graph> g = graph_from_json(patched.dump());
    REQUIRE_FALSE(g.ok());
    CHECK(to_string(g.status().code()) == std::string(to_string(bad.code)));
    INFO(g.status().message());
    CHECK(g.status().message().find(bad.substring) != std::string::npos);
    CHECK(g.status().location() == bad.location);
  }
}

TEST_CASE("a key written twice in one object is refused with its pointer", "[validate][json]") {
  std::string text = test::read_text(test::example_path("fp8_prefill"));
  // The second "dtype" of tensor 1 would silently win in a lenient reader.
  const size_t at = text.find("\"dtype\"", text.find("\"name\": \"K\""));
  REQUIRE(at != std::string::npos);
  text.insert(at, "\"dtype\": \"FP8_E5M2\", ");
  Result<Graph> g = graph_from_json(text);
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().code() == StatusCode::InvalidJson);
  CHECK(g.status().location() == "/tensors/1/dtype");
  CHECK(g.status().message().find("appears twice") != std::string::npos);
  // In the op's inputs too, and at the top.
  std::string op_text = test::read_text(test::example_path("fp8_prefill"));
  const size_t q = op_text.find("\"Q\": 1");
  REQUIRE(q != std::string::npos);
  op_text.insert(q, "\"Q\": 2, ");
  CHECK(graph_from_json(op_text).status().location() == "/op/inputs/Q");
  CHECK(graph_from_json("{\"rime_graph\": 1, \"rime_graph\": 1}").status().location() == "/rime_graph");
}

TEST_CASE("validate() on graphs built in C++", "[validate]") {
  Graph g("cpp");
  CHECK(validate(g).message().find("has no sdpa op") != std::string::npos);

  const std::vector<int64_t> dims{1, 2, 64, 64};
  SdpaOperands io;
  io.q = g.add_tensor({"Q", 1, dims, TensorDesc::packed_strides(dims), DataType::FP16});
  io.k = g.add_tensor({"K", 2, dims, TensorDesc::bshd_strides(dims), DataType::FP16});
  io.v = g.add_tensor({"V", 3, dims, TensorDesc::packed_strides(dims), DataType::FP16});
  io.o = g.add_tensor({"O", 4, dims, TensorDesc::packed_strides(dims), DataType::BF16, true});
  REQUIRE(g.sdpa(io).ok());
  CHECK(validate(g).ok());
  CHECK(effective_attn_scale(g) == Approx(0.125f));

  Graph bad_name = g;
  bad_name.set_name("bad\x01name");
  CHECK(validate(bad_name).message().find("printable ASCII") != std::string::npos);

  SdpaAttributes nan_scale;
  nan_scale.attn_scale = std::numeric_limits<float>::quiet_NaN();
  Graph g2("nan");
  g2.add_tensor({"Q", 1, dims, TensorDesc::packed_strides(dims), DataType::FP16});
  g2.add_tensor({"K", 2, dims, TensorDesc::packed_strides(dims), DataType::FP16});
  g2.add_tensor({"V", 3, dims, TensorDesc::packed_strides(dims), DataType::FP16});
  g2.add_tensor({"O", 4, dims, TensorDesc::packed_strides(dims), DataType::FP16, true});
  REQUIRE(g2.sdpa(io, nan_scale).ok());
  Status s = validate(g2);
  CHECK(s.code() == StatusCode::InvalidGraph);
  CHECK(s.message().find("attn_scale nan is not finite") != std::string::npos);
  CHECK(s.location() == "/op/attributes/attn_scale");

  // Paged K/V through the C++ API: pools [num_pages, H_kv, page_size, D] stored page, token, head, d; the
  // table's role survives the JSON round trip.
  Graph paged("paged");
  const std::vector<int64_t> q_dims{2, 4, 1, 64}, pool{10, 2, 16, 64};
  const std::vector<int64_t> pool_strides{16 * 2 * 64, 64, 2 * 64, 1};
  SdpaOperands pio;
  pio.q = paged.add_tensor({"Q", 1, q_dims, TensorDesc::packed_strides(q_dims), DataType::BF16});
  pio.k = paged.add_tensor({"K", 2, pool, pool_strides, DataType::BF16});
  pio.v = paged.add_tensor({"V", 3, pool, pool_strides, DataType::BF16});
  pio.o = paged.add_tensor({"O", 4, q_dims, TensorDesc::packed_strides(q_dims), DataType::BF16, true});
  pio.seq_len_q = paged.add_tensor({"seq_len_q", 5, {2}, {1}, DataType::INT32});
  pio.seq_len_kv = paged.add_tensor({"seq_len_kv", 6, {2}, {1}, DataType::INT32});
  pio.page_table = paged.add_tensor({"page_table", 7, {2, 5}, {5, 1}, DataType::INT32});
  SdpaAttributes padded;
  padded.padding_mask = true;
  REQUIRE(paged.sdpa(pio, padded).ok());
  CHECK(validate(paged).ok());
  Result<Graph> back = graph_from_json(graph_to_json(paged));
  REQUIRE(back.ok());
  REQUIRE(back->operand(Role::PageTable) != nullptr);
  CHECK(back->operand(Role::PageTable)->name == "page_table");
  CHECK(validate(back.value()).ok());
}
