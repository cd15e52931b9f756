#include "rime/graph.hpp"

#include <cmath>

namespace rime {

namespace {
struct RoleName {
  Role role;
  std::string_view name;
};
// The JSON spelling of each role follows the SPEC's names.
constexpr RoleName kRoleNames[] = {
    {Role::Q, "Q"},
    {Role::K, "K"},
    {Role::V, "V"},
    {Role::DescaleQ, "descale_q"},
    {Role::DescaleK, "descale_k"},
    {Role::DescaleV, "descale_v"},
    {Role::DescaleS, "descale_s"},
    {Role::ScaleS, "scale_s"},
    {Role::ScaleO, "scale_o"},
    {Role::Sink, "sink"},
    {Role::SeqLenQ, "seq_len_q"},
    {Role::SeqLenKv, "seq_len_kv"},
    {Role::SeqStartQ, "seq_start_q"},
    {Role::SeqStartKv, "seq_start_kv"},
    {Role::SfQ, "SF_Q"},
    {Role::SfK, "SF_K"},
    {Role::SfV, "SF_V"},
    {Role::PageTable, "page_table"},
    {Role::CuSeqlensQ, "cu_seqlens_q"},
    {Role::CuSeqlensKv, "cu_seqlens_kv"},
    {Role::O, "O"},
    {Role::Stats, "Stats"},
    {Role::AmaxS, "Amax_S"},
    {Role::AmaxO, "Amax_O"},
    {Role::SfO, "sf_o"},
};
static_assert(sizeof(kRoleNames) / sizeof(kRoleNames[0]) == kRoleCount, "every role has a name");

void bind(SdpaOp& op, Role role, const std::optional<int64_t>& uid) { op.operands[static_cast<int>(role)] = uid; }

// The operands every sdpa kind has: Q, K, V, O, and the optional sink, seq lens and starts, and Stats.
template <class Operands>
SdpaOp common_op(OpKind kind, const Operands& io, const SdpaAttributes& attributes, std::string name) {
  SdpaOp op;
  op.kind = kind;
  op.name = std::move(name);
  op.attributes = attributes;
  bind(op, Role::Q, io.q);
  bind(op, Role::K, io.k);
  bind(op, Role::V, io.v);
  bind(op, Role::O, io.o);
  bind(op, Role::Sink, io.sink);
  bind(op, Role::SeqLenQ, io.seq_len_q);
  bind(op, Role::SeqLenKv, io.seq_len_kv);
  bind(op, Role::SeqStartQ, io.seq_start_q);
  bind(op, Role::SeqStartKv, io.seq_start_kv);
  bind(op, Role::Stats, io.stats);
  if (io.stats) op.attributes.generate_stats = true;
  return op;
}
}  // namespace

std::string_view to_string(OpKind kind) noexcept {
  switch (kind) {
    case OpKind::Sdpa: return "sdpa";
    case OpKind::SdpaFp8: return "sdpa_fp8";
    case OpKind::SdpaMxfp8: return "sdpa_mxfp8";
  }
  return "?";
}

std::optional<OpKind> parse_op_kind(std::string_view name) noexcept {
  for (OpKind k : {OpKind::Sdpa, OpKind::SdpaFp8, OpKind::SdpaMxfp8})
    if (to_string(k) == name) return k;
  return std::nullopt;
}

std::string_view to_string(Role role) noexcept { return kRoleNames[static_cast<int>(role)].name; }

std::optional<Role> parse_role(std::string_view name) noexcept {
  for (const RoleName& r : kRoleNames)
    if (r.name == name) return r.role;
  return std::nullopt;
}

std::string_view to_string(QQuantization q) noexcept {
  return q == QQuantization::E4M3PerRow ? "e4m3_per_row" : "none";
}

std::optional<QQuantization> parse_q_quantization(std::string_view name) noexcept {
  for (QQuantization q : {QQuantization::None, QQuantization::E4M3PerRow})
    if (to_string(q) == name) return q;
  return std::nullopt;
}

bool is_output_role(Role role) noexcept { return static_cast<int>(role) >= static_cast<int>(Role::O); }

bool operator==(const SdpaAttributes& a, const SdpaAttributes& b) {
  // attn_scale compares by bits so that a NaN attribute (rejected by validate) still round-trips equal.
  auto same_scale = [](const std::optional<float>& x, const std::optional<float>& y) {
    if (x.has_value() != y.has_value()) return false;
    return !x || *x == *y || (std::isnan(*x) && std::isnan(*y));
  };
  return same_scale(a.attn_scale, b.attn_scale) && same_scale(a.logit_softcap, b.logit_softcap) &&
         a.q_quantization == b.q_quantization && a.generate_stats == b.generate_stats &&
         a.stats_log2 == b.stats_log2 && a.causal == b.causal && a.alignment == b.alignment &&
         a.window_left == b.window_left && a.band_right == b.band_right && a.padding_mask == b.padding_mask &&
         a.max_seqlen_q == b.max_seqlen_q && a.max_seqlen_kv == b.max_seqlen_kv && a.split_kv == b.split_kv &&
         a.tile == b.tile;
}

int64_t Graph::add_tensor(TensorDesc desc) {
  int64_t uid = desc.uid;
  tensors_.push_back(std::move(desc));
  return uid;
}

const TensorDesc* Graph::find_tensor(int64_t uid) const noexcept {
  int i = tensor_index(uid);
  return i < 0 ? nullptr : &tensors_[i];
}

int Graph::tensor_index(int64_t uid) const noexcept {
  for (size_t i = 0; i < tensors_.size(); ++i)
    if (tensors_[i].uid == uid) return static_cast<int>(i);
  return -1;
}

const TensorDesc* Graph::operand(Role role) const noexcept {
  if (!op_) return nullptr;
  auto uid = op_->operand(role);
  return uid ? find_tensor(*uid) : nullptr;
}

Status Graph::set_op(SdpaOp op) {
  if (op_)
    return Status(StatusCode::InvalidGraph,
                  "graph '" + name_ + "' already has op '" + op_->name + "'; rime plans one sdpa op per graph",
                  "/op");
  op_ = std::move(op);
  return Status::success();
}

Status Graph::sdpa(const SdpaOperands& io, const SdpaAttributes& attributes, std::string op_name) {
  SdpaOp op = common_op(OpKind::Sdpa, io, attributes, std::move(op_name));
  bind(op, Role::PageTable, io.page_table);
  bind(op, Role::CuSeqlensQ, io.cu_seqlens_q);
  bind(op, Role::CuSeqlensKv, io.cu_seqlens_kv);
  return set_op(std::move(op));
}

Status Graph::sdpa_fp8(const SdpaFp8Operands& io, const SdpaAttributes& attributes, std::string op_name) {
  SdpaOp op = common_op(OpKind::SdpaFp8, io, attributes, std::move(op_name));
  bind(op, Role::PageTable, io.page_table);
  bind(op, Role::CuSeqlensQ, io.cu_seqlens_q);
  bind(op, Role::CuSeqlensKv, io.cu_seqlens_kv);
  bind(op, Role::DescaleQ, io.descale_q);
  bind(op, Role::DescaleK, io.descale_k);
  bind(op, Role::DescaleV, io.descale_v);
  bind(op, Role::DescaleS, io.descale_s);
  bind(op, Role::ScaleS, io.scale_s);
  bind(op, Role::ScaleO, io.scale_o);
  bind(op, Role::AmaxS, io.amax_s);
  bind(op, Role::AmaxO, io.amax_o);
  bind(op, Role::SfO, io.sf_o);
  return set_op(std::move(op));
}

Status Graph::sdpa_mxfp8(const SdpaMxfp8Operands& io, const SdpaAttributes& attributes, std::string op_name) {
  SdpaOp op = common_op(OpKind::SdpaMxfp8, io, attributes, std::move(op_name));
  bind(op, Role::SfQ, io.sf_q);
  bind(op, Role::SfK, io.sf_k);
  bind(op, Role::SfV, io.sf_v);
  bind(op, Role::ScaleO, io.scale_o);
  bind(op, Role::AmaxO, io.amax_o);
  bind(op, Role::SfO, io.sf_o);
  return set_op(std::move(op));
}

float effective_attn_scale(const Graph& graph) {
  if (graph.op() && graph.op()->attributes.attn_scale) return *graph.op()->attributes.attn_scale;
  const TensorDesc* q = graph.operand(Role::Q);
  if (!q || q->dims.size() != 4 || q->dims[3] <= 0) return 1.0f;
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(q->dims[3])));
}

}  // namespace rime
