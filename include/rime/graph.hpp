// The rime operation graph: tensors plus one scaled-dot-product-attention op (SPEC section 1).
//
//   rime::Graph g("prefill");
//   int64_t q = g.add_tensor({"Q", 1, {B, H, S, D}, TensorDesc::packed_strides({B, H, S, D}), DataType::FP8_E4M3});
//   ...
//   rime::SdpaFp8Operands io;  io.q = q; io.k = k; ...; io.o = o;
//   rime::Status st = g.sdpa_fp8(io, rime::SdpaAttributes{}.set_causal(true));
//   st = rime::validate(g);
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rime/status.hpp"
#include "rime/types.hpp"

namespace rime {

enum class OpKind : int { Sdpa, SdpaFp8, SdpaMxfp8 };
std::string_view to_string(OpKind kind) noexcept;
std::optional<OpKind> parse_op_kind(std::string_view name) noexcept;

// Every operand slot an sdpa op can have. Which slots an op kind takes (required / optional / not at all) is one
// table in validate.cpp.
enum class Role : int {
  Q, K, V,
  DescaleQ, DescaleK, DescaleV, DescaleS, ScaleS, ScaleO,
  Sink, SeqLenQ, SeqLenKv,
  // Per-sequence starts (left padding; SPEC section 2): INT32 [B]. Sequence b's query i is row seq_start_q[b] + i
  // of the dense S_q axis and its key j position seq_start_kv[b] + j; each needs its side's seq_len.
  SeqStartQ, SeqStartKv,
  SfQ, SfK, SfV,
  // Paged K/V: [B, max_pages_per_seq] INT32 page ids into K and V, which are then page pools
  // [num_pages, H_kv, page_size, D] (any strides: [num_pages, page_size, H_kv, D] storage is a stride order).
  PageTable,
  // Ragged (THD) batches: INT32 [B + 1] token offsets. With cu_seqlens_q, Q, O and Stats are token-major
  // [1, H, T_q, D] (any strides) and sequence b's rows are tokens cu_seqlens_q[b] .. cu_seqlens_q[b + 1]; the
  // same for K and V with cu_seqlens_kv (docs/graph-json.md, "Ragged batches").
  CuSeqlensQ, CuSeqlensKv,
  // outputs
  O, Stats, AmaxS, AmaxO, SfO,
};
inline constexpr int kRoleCount = static_cast<int>(Role::SfO) + 1;
std::string_view to_string(Role role) noexcept;  // the JSON spelling: "Q", "descale_q", "SF_Q", "Amax_O", "sf_o"
std::optional<Role> parse_role(std::string_view name) noexcept;
bool is_output_role(Role role) noexcept;

// Which diagonal the causal / band / window bounds are measured from. Bottom-right shifts the diagonal so that
// the last query row sees the last key (the decode convention): by S_kv - S_q, and with per-sequence lengths
// (padding, ragged, paged) by each sequence's own seq_len_kv[b] - seq_len_q[b], as cuDNN and FlashAttention's
// varlen do (SPEC section 2).
enum class DiagonalAlignment : int { TopLeft, BottomRight };

struct TileShape {
  int q = 0;   // query rows per CTA
  int kv = 0;  // keys per main-loop step
  friend bool operator==(TileShape a, TileShape b) { return a.q == b.q && a.kv == b.kv; }
  friend bool operator!=(TileShape a, TileShape b) { return !(a == b); }
};

// How a 16-bit Q over FP8 K/V enters Q.K^T. None: exactly (SPEC section 2). E4M3PerRow: each row of Q (one (batch,
// head, token), D_qk values) rounded to E4M3 on its own power-of-two scale first, as FlashAttention 3 and FP8 serving
// stacks quantize Q: about 2^-4 of each value instead of BF16's 2^-9, for the FP8 kernel's speed (docs/graph-json.md,
// "q_quantization").
enum class QQuantization : int { None, E4M3PerRow };
std::string_view to_string(QQuantization q) noexcept;  // the JSON spelling: "none", "e4m3_per_row"
std::optional<QQuantization> parse_q_quantization(std::string_view name) noexcept;

struct SdpaAttributes {
  std::optional<float> attn_scale;     // default 1/sqrt(D_qk)
  // Logit soft-capping (SPEC section 2; Gemma 2's 50, Grok's 30): s = c * tanh(s / c) before the masks, the sink and
  // the max. Absent or 0: no capping.
  std::optional<float> logit_softcap;
  QQuantization q_quantization = QQuantization::None;  // only with a BF16 / FP16 Q over FP8 K/V
  bool generate_stats = false;         // must agree with a bound Stats output
  bool stats_log2 = false;             // Stats in log2 units instead of natural log
  bool causal = false;                 // keys right of the diagonal are masked (band right bound 0)
  DiagonalAlignment alignment = DiagonalAlignment::TopLeft;
  std::optional<int64_t> window_left;  // keys j < i + shift - (window_left - 1) are masked
  std::optional<int64_t> band_right;   // keys j > i + shift + band_right are masked
  bool padding_mask = false;           // per-sequence lengths: seq_len_q or cu_seqlens_q, seq_len_kv or cu_seqlens_kv
                                       // (and starts: seq_start_q, seq_start_kv)
  // Ragged batches: the longest sequence a side may hold (the S the grid and the heuristics plan for);
  // default the side's token count T. Only on a ragged side.
  std::optional<int64_t> max_seqlen_q, max_seqlen_kv;
  // Knobs a user may pin. A pinned knob is honoured or the plan is declined, never silently changed.
  std::optional<int> split_kv;
  std::optional<TileShape> tile;

  SdpaAttributes& set_attn_scale(float v) { attn_scale = v; return *this; }
  SdpaAttributes& set_logit_softcap(float v) { logit_softcap = v; return *this; }
  SdpaAttributes& set_q_quantization(QQuantization v) { q_quantization = v; return *this; }
  SdpaAttributes& set_generate_stats(bool v) { generate_stats = v; return *this; }
  SdpaAttributes& set_stats_log2(bool v) { stats_log2 = v; return *this; }
  SdpaAttributes& set_causal(bool v, DiagonalAlignment a = DiagonalAlignment::TopLeft) {
    causal = v; alignment = a; return *this;
  }
  SdpaAttributes& set_alignment(DiagonalAlignment a) { alignment = a; return *this; }
  SdpaAttributes& set_window_left(int64_t v) { window_left = v; return *this; }
  SdpaAttributes& set_band_right(int64_t v) { band_right = v; return *this; }
  SdpaAttributes& set_padding_mask(bool v) { padding_mask = v; return *this; }
  SdpaAttributes& set_max_seqlen_q(int64_t v) { max_seqlen_q = v; return *this; }
  SdpaAttributes& set_max_seqlen_kv(int64_t v) { max_seqlen_kv = v; return *this; }
  SdpaAttributes& set_split_kv(int v) { split_kv = v; return *this; }
  SdpaAttributes& set_tile(TileShape v) { tile = v; return *this; }

  friend bool operator==(const SdpaAttributes& a, const SdpaAttributes& b);
  friend bool operator!=(const SdpaAttributes& a, const SdpaAttributes& b) { return !(a == b); }
};

// Operands by tensor uid, one struct per builder so that the C++ API cannot bind a slot the op lacks.
struct SdpaOperands {
  int64_t q = 0, k = 0, v = 0, o = 0;
  std::optional<int64_t> sink, seq_len_q, seq_len_kv, stats;
  std::optional<int64_t> seq_start_q, seq_start_kv;  // left padding: need padding_mask and the side's seq_len
  std::optional<int64_t> page_table;  // paged K/V (docs/graph-json.md): needs padding_mask and both seq lens
  std::optional<int64_t> cu_seqlens_q, cu_seqlens_kv;  // ragged batches: need padding_mask
};
struct SdpaFp8Operands {
  int64_t q = 0, k = 0, v = 0, o = 0;
  int64_t descale_q = 0, descale_k = 0, descale_v = 0, descale_s = 0, scale_s = 0, scale_o = 0;
  std::optional<int64_t> sink, seq_len_q, seq_len_kv;
  std::optional<int64_t> seq_start_q, seq_start_kv;
  std::optional<int64_t> page_table;
  std::optional<int64_t> cu_seqlens_q, cu_seqlens_kv;
  std::optional<int64_t> stats, amax_s, amax_o, sf_o;
};
struct SdpaMxfp8Operands {
  int64_t q = 0, k = 0, v = 0, o = 0;
  int64_t sf_q = 0, sf_k = 0, sf_v = 0;
  std::optional<int64_t> scale_o, sink, seq_len_q, seq_len_kv;
  std::optional<int64_t> seq_start_q, seq_start_kv;
  std::optional<int64_t> stats, amax_o, sf_o;
};

struct SdpaOp {
  OpKind kind = OpKind::Sdpa;
  std::string name = "sdpa";
  std::array<std::optional<int64_t>, kRoleCount> operands{};  // tensor uid per role
  SdpaAttributes attributes;

  std::optional<int64_t> operand(Role role) const { return operands[static_cast<int>(role)]; }
  friend bool operator==(const SdpaOp& a, const SdpaOp& b) {
    return a.kind == b.kind && a.name == b.name && a.operands == b.operands && a.attributes == b.attributes;
  }
};

// The layout class (types.hpp, Layout) of a rank-4 [B, H, S, D] tensor's strides: BHSD or BSHD packed,
// another dense order, or strided.
Layout classify_layout(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides);

// Bytes a tensor's storage spans (1 + sum (dim - 1) x stride elements; FP4 packs two a byte): what a buffer bound to
// it must hold. 0 for a tensor whose span overflows (validate() refuses those).
int64_t tensor_storage_bytes(const TensorDesc& t);

// A graph holds its tensors in declaration order (that order is the JSON form's /tensors/N) and one sdpa op.
class Graph {
 public:
  Graph() = default;
  explicit Graph(std::string name) : name_(std::move(name)) {}

  const std::string& name() const noexcept { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  // Adds a tensor and returns its uid. Duplicates are reported by validate(), not here, so that a JSON file
  // and the C++ API get the same message.
  int64_t add_tensor(TensorDesc desc);
  const std::vector<TensorDesc>& tensors() const noexcept { return tensors_; }
  const TensorDesc* find_tensor(int64_t uid) const noexcept;
  // Index of the tensor in tensors(), or -1.
  int tensor_index(int64_t uid) const noexcept;

  // Builders. Each fails with InvalidGraph if the graph already has an op (rime plans one op per graph).
  Status sdpa(const SdpaOperands& io, const SdpaAttributes& attributes = {}, std::string op_name = "sdpa");
  Status sdpa_fp8(const SdpaFp8Operands& io, const SdpaAttributes& attributes = {},
                  std::string op_name = "sdpa_fp8");
  Status sdpa_mxfp8(const SdpaMxfp8Operands& io, const SdpaAttributes& attributes = {},
                    std::string op_name = "sdpa_mxfp8");
  // Low-level form used by the JSON reader: any role set, checked by validate().
  Status set_op(SdpaOp op);

  const std::optional<SdpaOp>& op() const noexcept { return op_; }
  // The tensor bound to a role, or nullptr.
  const TensorDesc* operand(Role role) const noexcept;

  friend bool operator==(const Graph& a, const Graph& b) {
    return a.name_ == b.name_ && a.tensors_ == b.tensors_ && a.op_ == b.op_;
  }
  friend bool operator!=(const Graph& a, const Graph& b) { return !(a == b); }

 private:
  std::string name_ = "graph";
  std::vector<TensorDesc> tensors_;
  std::optional<SdpaOp> op_;
};

// Checks every rule of SPEC sections 1, 5 and 6 that a graph must satisfy to have a meaning. Returns the first
// violation as InvalidGraph, naming the tensor and the values, with location() the JSON pointer of the field.
Status validate(const Graph& graph);

// The attention scale the op uses: the attribute, or 1/sqrt(D_qk).
float effective_attn_scale(const Graph& graph);

}  // namespace rime
