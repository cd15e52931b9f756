// validate(): one rule, one message. Each message names the tensor and both values; each Status carries the
// JSON pointer of the field at fault, so a file's author and a C++ caller read the same words.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "graph/geometry.hpp"
#include "rime/graph.hpp"
#include "status_macros.hpp"

namespace rime {
namespace {

// Every extent and every attribute the kernels hold in 32 bits (dims, window and band bounds) is at most this.
constexpr int64_t kMaxDim = 2147483647;

enum class Need : char { No, Opt, Req };

// Which operand slots each op kind takes (SPEC section 1). Columns: sdpa, sdpa_fp8, sdpa_mxfp8.
struct RoleRule {
  Role role;
  Need sdpa, fp8, mxfp8;
};
constexpr RoleRule kRoleRules[] = {
    {Role::Q, Need::Req, Need::Req, Need::Req},
    {Role::K, Need::Req, Need::Req, Need::Req},
    {Role::V, Need::Req, Need::Req, Need::Req},
    {Role::DescaleQ, Need::No, Need::Req, Need::No},
    {Role::DescaleK, Need::No, Need::Req, Need::No},
    {Role::DescaleV, Need::No, Need::Req, Need::No},
    {Role::DescaleS, Need::No, Need::Req, Need::No},
    {Role::ScaleS, Need::No, Need::Req, Need::No},
    {Role::ScaleO, Need::No, Need::Req, Need::Opt},
    {Role::Sink, Need::Opt, Need::Opt, Need::Opt},
    {Role::SeqLenQ, Need::Opt, Need::Opt, Need::Opt},
    {Role::SeqLenKv, Need::Opt, Need::Opt, Need::Opt},
    {Role::SeqStartQ, Need::Opt, Need::Opt, Need::Opt},
    {Role::SeqStartKv, Need::Opt, Need::Opt, Need::Opt},
    {Role::SfQ, Need::No, Need::No, Need::Req},
    {Role::SfK, Need::No, Need::No, Need::Req},
    {Role::SfV, Need::No, Need::No, Need::Req},
    {Role::PageTable, Need::Opt, Need::Opt, Need::No},
    {Role::CuSeqlensQ, Need::Opt, Need::Opt, Need::No},
    {Role::CuSeqlensKv, Need::Opt, Need::Opt, Need::No},
    {Role::O, Need::Req, Need::Req, Need::Req},
    {Role::Stats, Need::Opt, Need::Opt, Need::Opt},
    {Role::AmaxS, Need::No, Need::Opt, Need::No},
    {Role::AmaxO, Need::No, Need::Opt, Need::Opt},
    {Role::SfO, Need::No, Need::Opt, Need::Opt},
};
static_assert(sizeof(kRoleRules) / sizeof(kRoleRules[0]) == kRoleCount, "every role has a rule");

Need need_of(const RoleRule& r, OpKind kind) {
  return kind == OpKind::Sdpa ? r.sdpa : kind == OpKind::SdpaFp8 ? r.fp8 : r.mxfp8;
}

// Names travel into JSON, logs and cache metadata; printable ASCII keeps them unambiguous everywhere.
bool printable_ascii(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 || c > 0x7e) return false;
  return true;
}

std::string dims_str(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ",")); }

class Checker {
 public:
  explicit Checker(const Graph& g) : g_(g) {}

  Status run();

 private:
  Status fail(std::string location, std::string message) const {
    return Status(StatusCode::InvalidGraph, std::move(message), std::move(location));
  }
  std::string at_tensor(const TensorDesc& t, const char* field) const {
    return fmt::format("/tensors/{}/{}", g_.tensor_index(t.uid), field);
  }
  std::string at_role(Role r) const {
    return fmt::format("/op/{}/{}", is_output_role(r) ? "outputs" : "inputs", to_string(r));
  }
  static std::string at_attr(const char* name) { return fmt::format("/op/attributes/{}", name); }

  const TensorDesc* t(Role r) const { return g_.operand(r); }
  // The batch: Q's dims[0], or for ragged Q (cu_seqlens_q, Q token-major [1, H, T, D]) the offsets' count - 1.
  int64_t batch() const {
    const TensorDesc* cu = t(Role::CuSeqlensQ);
    return cu && cu->dims.size() == 1 ? cu->dims[0] - 1 : t(Role::Q)->dims[0];
  }

  Status check_tensors() const;
  Status check_output_overlap() const;
  Status check_bindings() const;
  Status check_shapes() const;
  Status check_dtypes() const;
  Status check_small_operands() const;
  Status check_attributes() const;
  Status check_sf_o() const;
  Status check_mx_scales() const;

  Status expect_dims(Role r, const std::vector<int64_t>& want, const char* why) const;
  Status expect_dtype(Role r, DataType want) const;
  Status check_sf_matrix(Role r, int64_t b, int64_t h, int64_t rows, int64_t cols, const char* what) const;

  const Graph& g_;
};

Status Checker::check_tensors() const {
  if (g_.name().empty() || g_.name().size() > 256)
    return fail("/name", fmt::format("graph name has length {}; expected 1..256", g_.name().size()));
  if (!printable_ascii(g_.name())) return fail("/name", "graph name: names are printable ASCII");
  std::map<int64_t, std::string> uids;
  std::set<std::string> names;
  for (const TensorDesc& d : g_.tensors()) {
    std::string idx = fmt::format("/tensors/{}", &d - g_.tensors().data());
    if (d.name.empty() || d.name.size() > 256)
      return fail(idx + "/name", fmt::format("tensor uid {} has a name of length {}; expected 1..256", d.uid,
                                             d.name.size()));
    if (!printable_ascii(d.name))
      return fail(idx + "/name", fmt::format("tensor uid {}: names are printable ASCII", d.uid));
    if (!names.insert(d.name).second)
      return fail(idx + "/name", fmt::format("{}: the name is used by two tensors", d.name));
    auto [it, fresh] = uids.emplace(d.uid, d.name);
    if (!fresh)
      return fail(idx + "/uid", fmt::format("{}: uid {} is already the uid of {}", d.name, d.uid, it->second));
    if (d.dims.empty() || d.dims.size() > 8)
      return fail(idx + "/dims", fmt::format("{}: rank {} is outside 1..8", d.name, d.dims.size()));
    for (size_t i = 0; i < d.dims.size(); ++i)
      if (d.dims[i] < 1 || d.dims[i] > kMaxDim)
        return fail(fmt::format("{}/dims/{}", idx, i),
                    fmt::format("{}: dim {} is {}; dims must be in 1..{}", d.name, i, d.dims[i], kMaxDim));
    if (d.strides.size() != d.dims.size())
      return fail(idx + "/strides", fmt::format("{}: {} strides for {} dims {}", d.name, d.strides.size(),
                                                d.dims.size(), dims_str(d.dims)));
    for (size_t i = 0; i < d.strides.size(); ++i)
      if (d.strides[i] < 1)
        return fail(fmt::format("{}/strides/{}", idx, i),
                    fmt::format("{}: stride {} is {}; strides must be >= 1", d.name, i, d.strides[i]));
    if (d.strides.back() != 1)
      return fail(idx + "/strides", fmt::format("{}: strides {} have innermost stride {}; the last dim must "
                                                "have unit stride",
                                                d.name, dims_str(d.strides), d.strides.back()));
    auto count = element_count(d.dims);
    auto span = element_span(d.dims, d.strides);
    int64_t bytes = 0;
    if (!count || !span || __builtin_mul_overflow(*span, int64_t{bits_of(d.dtype)}, &bytes))
      return fail(idx + "/dims", fmt::format("{}: dims {} with strides {} overflow a 64-bit size", d.name,
                                             dims_str(d.dims), dims_str(d.strides)));
    if (d.dtype == DataType::FP4_E2M1) {
      if (d.dims.back() % 2 != 0)
        return fail(idx + "/dims", fmt::format("{}: FP4_E2M1 innermost dim {} is odd; two FP4 values share a byte",
                                               d.name, d.dims.back()));
      for (size_t i = 0; i + 1 < d.strides.size(); ++i)
        if (d.strides[i] % 2 != 0 && d.dims[i] > 1)
          return fail(fmt::format("{}/strides/{}", idx, i),
                      fmt::format("{}: FP4_E2M1 stride {} on dim {} is odd; the byte container halves every "
                                  "stride but the unit one",
                                  d.name, d.strides[i], i));
    }
  }
  return Status::success();
}

// An output's elements must be distinct memory: two indices that share an address race on the GPU (inputs may
// alias: reading the same byte twice is fine). Sufficient test: with the dims of extent > 1 ordered by stride,
// each stride is past the span of all smaller ones. Dense layouts, BSHD, padded rows and both sf_o layouts pass.
Status Checker::check_output_overlap() const {
  for (const TensorDesc& d : g_.tensors()) {
    if (!d.is_output || d.dims.size() != d.strides.size()) continue;
    std::vector<size_t> order;
    for (size_t i = 0; i < d.dims.size(); ++i)
      if (d.dims[i] > 1) order.push_back(i);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return d.strides[a] != d.strides[b] ? d.strides[a] < d.strides[b] : a > b;
    });
    int64_t span = 1;  // elements spanned by the dims so far (their max offset + 1)
    for (size_t n = 0; n < order.size(); ++n) {
      const size_t i = order[n];
      if (d.strides[i] < span)
        return fail(at_tensor(d, "strides"),
                    fmt::format("{}: output strides {} on dims {} overlap: dim {} (stride {}) steps inside the {} "
                                "elements its smaller dims span; an output's elements must not share memory",
                                d.name, dims_str(d.strides), dims_str(d.dims), i, d.strides[i], span));
      span += (d.dims[i] - 1) * d.strides[i];  // cannot overflow: check_tensors bounded the span
    }
  }
  return Status::success();
}

Status Checker::check_bindings() const {
  const SdpaOp& op = *g_.op();
  if (op.name.empty() || op.name.size() > 256)
    return fail("/op/name", fmt::format("op name has length {}; expected 1..256", op.name.size()));
  if (!printable_ascii(op.name)) return fail("/op/name", "op name: names are printable ASCII");
  std::map<int64_t, Role> bound;
  for (const RoleRule& rule : kRoleRules) {
    Need need = need_of(rule, op.kind);
    auto uid = op.operand(rule.role);
    if (!uid) {
      if (need == Need::Req)
        return fail(at_role(rule.role),
                    fmt::format("{} requires a {} operand", to_string(op.kind), to_string(rule.role)));
      continue;
    }
    if (need == Need::No)
      return fail(at_role(rule.role),
                  fmt::format("{} is not an operand of {}", to_string(rule.role), to_string(op.kind)));
    const TensorDesc* d = g_.find_tensor(*uid);
    if (!d)
      return fail(at_role(rule.role), fmt::format("{} names uid {}, which no tensor has", to_string(rule.role), *uid));
    auto [it, fresh] = bound.emplace(*uid, rule.role);
    if (!fresh)
      return fail(at_role(rule.role), fmt::format("{}: bound as both {} and {}", d->name, to_string(it->second),
                                                  to_string(rule.role)));
    if (d->is_output != is_output_role(rule.role))
      return fail(at_tensor(*d, "output"),
                  fmt::format("{}: bound as {} ({}) but is_output is {}", d->name, to_string(rule.role),
                              is_output_role(rule.role) ? "an output" : "an input", d->is_output));
  }
  for (const TensorDesc& d : g_.tensors())
    if (!bound.count(d.uid))
      return fail(at_tensor(d, "uid"), fmt::format("{}: uid {} is not an operand of op '{}'", d.name, d.uid, op.name));
  return Status::success();
}

Status Checker::check_shapes() const {
  for (Role r : {Role::Q, Role::K, Role::V, Role::O})
    if (t(r)->dims.size() != 4)
      return fail(at_tensor(*t(r), "dims"), fmt::format("{} ({}): dims {} have rank {}; expected [B, H, S, D]",
                                                        t(r)->name, to_string(r), dims_str(t(r)->dims),
                                                        t(r)->dims.size()));
  const auto &q = t(Role::Q)->dims, &k = t(Role::K)->dims, &v = t(Role::V)->dims, &o = t(Role::O)->dims;
  const std::string &qn = t(Role::Q)->name, &kn = t(Role::K)->name, &vn = t(Role::V)->name;
  auto mismatch = [&](Role r, const char* what, const std::string& ref, int64_t want) {
    return fail(at_tensor(*t(r), "dims"), fmt::format("{}: dims {} do not match {}'s {} {}", t(r)->name,
                                                      dims_str(t(r)->dims), ref, what, want));
  };
  // Ragged batches: INT32 offsets [B + 1], and the side's tensors token-major [1, H, T, D].
  const TensorDesc *cu_q = t(Role::CuSeqlensQ), *cu_kv = t(Role::CuSeqlensKv);
  for (const TensorDesc* cu : {cu_q, cu_kv}) {
    if (!cu) continue;
    const Role r = cu == cu_q ? Role::CuSeqlensQ : Role::CuSeqlensKv;
    if (cu->dims.size() != 1 || cu->dims[0] < 2)
      return fail(at_tensor(*cu, "dims"),
                  fmt::format("{} ({}): dims {} must be [B + 1] with B >= 1 (each sequence's first token, then the "
                              "end of the last)",
                              cu->name, to_string(r), dims_str(cu->dims)));
    RIME_RETURN_IF_ERROR(expect_dtype(r, DataType::INT32));
  }
  auto token_major = [&](Role r, Role offsets) -> Status {
    if (t(r)->dims[0] != 1)
      return fail(at_tensor(*t(r), "dims"),
                  fmt::format("{}: dims {}: with {} the tensor is token-major [1, H, T, D]; dims[0] must be 1, is {}",
                              t(r)->name, dims_str(t(r)->dims), to_string(offsets), t(r)->dims[0]));
    return Status::success();
  };
  if (cu_q) {
    RIME_RETURN_IF_ERROR(token_major(Role::Q, Role::CuSeqlensQ));
    RIME_RETURN_IF_ERROR(token_major(Role::O, Role::CuSeqlensQ));
  }
  const TensorDesc* table = t(Role::PageTable);
  if (cu_kv && table)
    return fail(at_role(Role::CuSeqlensKv),
                fmt::format("{} (cu_seqlens_kv) and {} (page_table) are both bound: paged K/V are pools, and their "
                            "sequences' lengths come from seq_len_kv",
                            cu_kv->name, table->name));
  if (cu_kv) {
    RIME_RETURN_IF_ERROR(token_major(Role::K, Role::CuSeqlensKv));
    RIME_RETURN_IF_ERROR(token_major(Role::V, Role::CuSeqlensKv));
    if (cu_kv->dims[0] - 1 != batch())
      return fail(at_tensor(*cu_kv, "dims"),
                  fmt::format("{} (cu_seqlens_kv): dims {} give {} sequences; the batch is {}", cu_kv->name,
                              dims_str(cu_kv->dims), cu_kv->dims[0] - 1, batch()));
  }
  const int64_t B = batch();
  // Paged K/V: K and V are page pools [num_pages, H_kv, page_size, D] indexed through the page table, so their
  // first dim is the pool's page count, not the batch.
  if (!table && !cu_kv && k[0] != B) return mismatch(Role::K, "batch", cu_q ? "cu_seqlens_q" : qn, B);
  if (!table && !cu_kv && v[0] != B) return mismatch(Role::V, "batch", cu_q ? "cu_seqlens_q" : qn, B);
  if ((table || cu_kv) && v[0] != k[0]) return mismatch(Role::V, table ? "page count" : "batch", kn, k[0]);
  if (!cu_q && o[0] != q[0]) return mismatch(Role::O, "batch", qn, q[0]);
  if (k[3] != q[3]) return mismatch(Role::K, "head dim", qn, q[3]);
  if (v[1] != k[1]) return mismatch(Role::V, "head count", kn, k[1]);
  if (v[2] != k[2]) return mismatch(Role::V, "sequence length", kn, k[2]);
  if (o[1] != q[1]) return mismatch(Role::O, "head count", qn, q[1]);
  if (o[2] != q[2]) return mismatch(Role::O, "sequence length", qn, q[2]);
  if (o[3] != v[3]) return mismatch(Role::O, "head dim", vn, v[3]);
  if (q[1] % k[1] != 0)
    return fail(at_tensor(*t(Role::K), "dims"),
                fmt::format("{}: {} heads do not divide {}'s {} heads (H_q % H_kv must be 0)", kn, k[1], qn, q[1]));
  if (table) {
    const int64_t page_size = k[2];
    if (page_size < 16 || page_size > 256 || (page_size & (page_size - 1)) != 0)
      return fail(at_tensor(*t(Role::K), "dims"),
                  fmt::format("{}: page size {} (dims[2] of a paged pool [num_pages, H_kv, page_size, D]) must be "
                              "a power of two in 16..256",
                              kn, page_size));
    if (table->dims.size() != 2 || table->dims[0] != B)
      return fail(at_tensor(*table, "dims"),
                  fmt::format("{} (page_table): dims {} must be [{}, max_pages_per_seq] (one row of page ids per "
                              "sequence)",
                              table->name, dims_str(table->dims), B));
    if (table->dims[1] * page_size > kMaxDim)
      return fail(at_tensor(*table, "dims"),
                  fmt::format("{} (page_table): {} pages of {} keys exceed {} keys per sequence (32-bit)",
                              table->name, table->dims[1], page_size, kMaxDim));
  }
  return Status::success();
}

Status Checker::check_dtypes() const {
  const OpKind kind = g_.op()->kind;
  const TensorDesc &q = *t(Role::Q), &k = *t(Role::K), &v = *t(Role::V), &o = *t(Role::O);
  auto bad = [&](const TensorDesc& d, const char* allowed) {
    return fail(at_tensor(d, "dtype"), fmt::format("{}: dtype {} is not allowed for {} (allowed: {})", d.name,
                                                   to_string(d.dtype), to_string(kind), allowed));
  };
  if (kind == OpKind::Sdpa) {
    for (const TensorDesc* d : {&q, &k, &v})
      if (!is_f16(d->dtype)) return bad(*d, "FP16, BF16");
    if (!is_f16(o.dtype)) return bad(o, "FP16, BF16");
  } else {
    // sdpa_fp8 also takes a 16-bit Q over FP8 K/V: a BF16/FP16 model reading an FP8 K/V cache (docs/graph-json.md).
    const bool q16_allowed = kind == OpKind::SdpaFp8;
    if (!is_fp8(q.dtype) && !(q16_allowed && is_f16(q.dtype)))
      return bad(q, q16_allowed ? "FP8_E4M3, FP8_E5M2; FP16, BF16 over FP8 K/V" : "FP8_E4M3, FP8_E5M2");
    for (const TensorDesc* d : {&k, &v})
      if (!is_fp8(d->dtype)) return bad(*d, "FP8_E4M3, FP8_E5M2");
    if (!(is_fp8(o.dtype) || is_f16(o.dtype) || o.dtype == DataType::FP4_E2M1))
      return bad(o, "FP8_E4M3, FP8_E5M2, FP16, BF16, FP4_E2M1 with sf_o");
  }
  const bool q16_over_fp8 = is_f16(q.dtype) && is_fp8(k.dtype);
  if (k.dtype != q.dtype && !q16_over_fp8)
    return fail(at_tensor(k, "dtype"),
                fmt::format("{}: dtype {} differs from {}'s {}; Q and K share one type", k.name, to_string(k.dtype),
                            q.name, to_string(q.dtype)));
  if (v.dtype != k.dtype)
    return fail(at_tensor(v, "dtype"),
                q16_over_fp8 ? fmt::format("{}: dtype {} differs from {}'s {}; K and V share one type", v.name,
                                           to_string(v.dtype), k.name, to_string(k.dtype))
                             : fmt::format("{}: dtype {} differs from {}'s {}; Q, K and V share one type", v.name,
                                           to_string(v.dtype), q.name, to_string(q.dtype)));
  return Status::success();
}

Status Checker::expect_dims(Role r, const std::vector<int64_t>& want, const char* why) const {
  const TensorDesc* d = t(r);
  if (d && d->dims != want)
    return fail(at_tensor(*d, "dims"), fmt::format("{} ({}): dims {} must be {} ({})", d->name, to_string(r),
                                                   dims_str(d->dims), dims_str(want), why));
  return Status::success();
}

Status Checker::expect_dtype(Role r, DataType want) const {
  const TensorDesc* d = t(r);
  if (d && d->dtype != want)
    return fail(at_tensor(*d, "dtype"), fmt::format("{} ({}): dtype {} must be {}", d->name, to_string(r),
                                                    to_string(d->dtype), to_string(want)));
  return Status::success();
}

Status Checker::check_small_operands() const {
  const auto& q = t(Role::Q)->dims;
  const int64_t B = batch(), Hq = q[1], Sq = q[2];
  // descale_q / k / v: per tensor, or per (batch, kv head) as FA3 and FlashInfer's serving paths take them.
  const int64_t Hkv = t(Role::K)->dims[1];
  for (Role r : {Role::DescaleQ, Role::DescaleK, Role::DescaleV}) {
    const TensorDesc* d = t(r);
    if (d && d->dims != std::vector<int64_t>{1, 1, 1, 1} && d->dims != std::vector<int64_t>{B, Hkv, 1, 1})
      return fail(at_tensor(*d, "dims"),
                  fmt::format("{} ({}): dims {} must be [1,1,1,1] (per tensor) or [{},{},1,1] (per batch and kv head)",
                              d->name, to_string(r), dims_str(d->dims), B, Hkv));
    RIME_RETURN_IF_ERROR(expect_dtype(r, DataType::FP32));
  }
  for (Role r : {Role::DescaleS, Role::ScaleS, Role::ScaleO, Role::AmaxS, Role::AmaxO}) {
    RIME_RETURN_IF_ERROR(expect_dims(r, {1, 1, 1, 1}, "a per-tensor scalar"));
    RIME_RETURN_IF_ERROR(expect_dtype(r, DataType::FP32));
  }
  RIME_RETURN_IF_ERROR(expect_dims(Role::Sink, {1, Hq, 1, 1}, "one logit per q head"));
  RIME_RETURN_IF_ERROR(expect_dtype(Role::Sink, DataType::FP32));
  RIME_RETURN_IF_ERROR(expect_dims(Role::Stats, {q[0], Hq, Sq, 1}, "one LSE per q row"));
  RIME_RETURN_IF_ERROR(expect_dtype(Role::Stats, DataType::FP32));
  for (Role r : {Role::SeqLenQ, Role::SeqLenKv, Role::SeqStartQ, Role::SeqStartKv}) {
    const TensorDesc* d = t(r);
    if (!d) continue;
    const bool start = r == Role::SeqStartQ || r == Role::SeqStartKv;
    if (d->dims != std::vector<int64_t>{B} && d->dims != std::vector<int64_t>{B, 1, 1, 1})
      return fail(at_tensor(*d, "dims"), fmt::format("{} ({}): dims {} must be [{}] or [{},1,1,1] (one {} per "
                                                     "batch)",
                                                     d->name, to_string(r), dims_str(d->dims), B, B,
                                                     start ? "start" : "length"));
    RIME_RETURN_IF_ERROR(expect_dtype(r, DataType::INT32));
  }
  RIME_RETURN_IF_ERROR(expect_dtype(Role::PageTable, DataType::INT32));
  return Status::success();
}

Status Checker::check_attributes() const {
  const SdpaAttributes& a = g_.op()->attributes;
  if (a.attn_scale && !std::isfinite(*a.attn_scale))
    return fail(at_attr("attn_scale"), fmt::format("attn_scale {} is not finite", *a.attn_scale));
  if (a.logit_softcap && !(std::isfinite(*a.logit_softcap) && *a.logit_softcap >= 0))
    return fail(at_attr("logit_softcap"),
                fmt::format("logit_softcap {} must be finite and >= 0 (the cap c of c * tanh(s / c); 0: none)",
                            *a.logit_softcap));
  if (a.q_quantization != QQuantization::None) {
    const TensorDesc* q = t(Role::Q);
    const TensorDesc* k = t(Role::K);
    if (!(q && k && is_f16(q->dtype) && is_fp8(k->dtype)))
      return fail(at_attr("q_quantization"),
                  fmt::format("q_quantization {} rounds a 16-bit Q for FP8 K/V: it needs Q in FP16 or BF16 and K/V in "
                              "FP8 (Q dtype {}, K dtype {})",
                              to_string(a.q_quantization), q ? to_string(q->dtype) : "unbound",
                              k ? to_string(k->dtype) : "unbound"));
  }
  const bool has_stats = t(Role::Stats) != nullptr;
  if (a.generate_stats && !has_stats)
    return fail(at_attr("generate_stats"), "generate_stats is true but no Stats output is bound");
  if (!a.generate_stats && has_stats)
    return fail(at_role(Role::Stats), fmt::format("{} is bound as Stats but generate_stats is false",
                                                  t(Role::Stats)->name));
  if (a.stats_log2 && !has_stats)
    return fail(at_attr("stats_log2"), "stats_log2 is true but no Stats output is bound");
  if (a.window_left && (*a.window_left < 0 || *a.window_left > kMaxDim))
    return fail(at_attr("window_left"),
                fmt::format("window_left {} is outside 0..{} (the kernels hold it in 32 bits)", *a.window_left, kMaxDim));
  if (a.band_right && (*a.band_right < 0 || *a.band_right > kMaxDim))
    return fail(at_attr("band_right"),
                fmt::format("band_right {} is outside 0..{} (the kernels hold it in 32 bits)", *a.band_right, kMaxDim));
  if (a.band_right && a.causal)
    return fail(at_attr("band_right"),
                fmt::format("band_right {} and causal are both set; causal is band_right 0", *a.band_right));
  // Per-sequence starts: beside the side's lengths, on a side that is not ragged (its offsets place each sequence).
  for (auto [start, lens, offsets] : {std::tuple{Role::SeqStartQ, Role::SeqLenQ, Role::CuSeqlensQ},
                                      std::tuple{Role::SeqStartKv, Role::SeqLenKv, Role::CuSeqlensKv}}) {
    if (!t(start)) continue;
    if (t(offsets))
      return fail(at_role(start), fmt::format("{} ({}) and {} ({}) are both bound: a ragged side's sequences start at "
                                              "their offsets",
                                              t(start)->name, to_string(start), t(offsets)->name, to_string(offsets)));
    if (!t(lens))
      return fail(at_role(start), fmt::format("{} ({}) needs {}: sequence b's positions are [start, start + length)",
                                              t(start)->name, to_string(start), to_string(lens)));
  }
  // Per-sequence lengths: each side's from its offsets (ragged) or its seq_len tensor, never both.
  const bool has_lens = t(Role::SeqLenQ) || t(Role::SeqLenKv) || t(Role::CuSeqlensQ) || t(Role::CuSeqlensKv);
  for (auto [lens, offsets] : {std::pair{Role::SeqLenQ, Role::CuSeqlensQ}, std::pair{Role::SeqLenKv, Role::CuSeqlensKv}}) {
    if (t(lens) && t(offsets))
      return fail(at_role(lens), fmt::format("{} ({}) and {} ({}) are both bound: a side's lengths come from one of "
                                             "them",
                                             t(lens)->name, to_string(lens), t(offsets)->name, to_string(offsets)));
    if (a.padding_mask && !t(lens) && !t(offsets))
      return fail(at_attr("padding_mask"), fmt::format("padding_mask needs {} or {}", to_string(lens), to_string(offsets)));
  }
  if (!a.padding_mask && has_lens) {
    const Role first = t(Role::SeqLenQ)      ? Role::SeqLenQ
                       : t(Role::SeqLenKv)   ? Role::SeqLenKv
                       : t(Role::CuSeqlensQ) ? Role::CuSeqlensQ
                                             : Role::CuSeqlensKv;
    return fail(at_role(first), fmt::format("{} is bound but padding_mask is false (per-sequence lengths need it)",
                                            to_string(first)));
  }
  for (auto [max, offsets, tokens] : {std::tuple{&a.max_seqlen_q, Role::CuSeqlensQ, Role::Q},
                                      std::tuple{&a.max_seqlen_kv, Role::CuSeqlensKv, Role::K}}) {
    const char* name = offsets == Role::CuSeqlensQ ? "max_seqlen_q" : "max_seqlen_kv";
    if (!*max) continue;
    if (!t(offsets))
      return fail(at_attr(name), fmt::format("{} is set but {} is not bound (it bounds a ragged side)", name,
                                             to_string(offsets)));
    const int64_t T = t(tokens)->dims[2];
    if (**max < 1 || **max > T)
      return fail(at_attr(name), fmt::format("{} {} is outside 1..{} ({}'s token count)", name, **max, T,
                                             t(tokens)->name));
  }
  if (t(Role::PageTable) && !a.padding_mask)
    return fail(at_attr("padding_mask"), fmt::format("{} (page_table) is bound but padding_mask is false: paged K/V "
                                                     "needs each sequence's length (seq_len_kv) and seq_len_q",
                                                     t(Role::PageTable)->name));
  if (a.split_kv && (*a.split_kv < 1 || *a.split_kv > 1024))
    return fail("/op/knobs/split_kv", fmt::format("split_kv {} is outside 1..1024", *a.split_kv));
  if (a.tile && (a.tile->q < 1 || a.tile->kv < 1 || a.tile->q > 1024 || a.tile->kv > 1024))
    return fail("/op/knobs/tile", fmt::format("tile {}x{} is outside 1..1024", a.tile->q, a.tile->kv));
  return Status::success();
}

// An F8_128x4 scale matrix per (b, h): dims [b, h, R, C] in planes order, R a multiple of 128 covering `rows`,
// C a multiple of 4 covering `cols`.
Status Checker::check_sf_matrix(Role r, int64_t b, int64_t h, int64_t rows, int64_t cols, const char* what) const {
  const TensorDesc& d = *t(r);
  RIME_RETURN_IF_ERROR(expect_dtype(r, DataType::FP8_E8M0));
  if (d.dims.size() != 4 || d.dims[0] != b || d.dims[1] != h)
    return fail(at_tensor(d, "dims"), fmt::format("{} ({}): dims {} must be [{}, {}, R, C] ({})", d.name,
                                                  to_string(r), dims_str(d.dims), b, h, what));
  const int64_t R = d.dims[2], C = d.dims[3];
  if (R % 128 != 0 || R < round_up(rows, 128))
    return fail(at_tensor(d, "dims"), fmt::format("{} ({}): R {} must be a multiple of 128 and >= {} ({})", d.name,
                                                  to_string(r), R, round_up(rows, 128), what));
  if (C % 4 != 0 || C < round_up(cols, 4))
    return fail(at_tensor(d, "dims"), fmt::format("{} ({}): C {} must be a multiple of 4 and >= {} ({})", d.name,
                                                  to_string(r), C, round_up(cols, 4), what));
  if (classify_sf_layout(d.dims, d.strides) != SfLayout::Planes)
    return fail(at_tensor(d, "strides"), fmt::format("{} ({}): strides {} are not per-(b,h) planes {}", d.name,
                                                     to_string(r), dims_str(d.strides),
                                                     dims_str({h * R * C, R * C, C, 1})));
  return Status::success();
}

Status Checker::check_mx_scales() const {
  if (g_.op()->kind != OpKind::SdpaMxfp8) return Status::success();
  const auto &q = t(Role::Q)->dims, &k = t(Role::K)->dims, &v = t(Role::V)->dims;
  RIME_RETURN_IF_ERROR(check_sf_matrix(Role::SfQ, q[0], q[1], q[2], ceil_div(q[3], 32),
                                       "rows = q rows, cols = D_qk / 32"));
  RIME_RETURN_IF_ERROR(check_sf_matrix(Role::SfK, k[0], k[1], k[2], ceil_div(k[3], 32),
                                       "rows = kv rows, cols = D_qk / 32"));
  RIME_RETURN_IF_ERROR(check_sf_matrix(Role::SfV, v[0], v[1], v[3], ceil_div(v[2], 32),
                                       "rows = d, cols = kv blocks of 32"));
  return Status::success();
}

Status Checker::check_sf_o() const {
  const TensorDesc& o = *t(Role::O);
  const TensorDesc* sf = t(Role::SfO);
  if (!sf) return Status::success();  // an FP4 O without sf_o is valid and declined by the matcher
  if (t(Role::CuSeqlensQ))
    return fail(at_role(Role::SfO), fmt::format("{} (sf_o): block-scaled O with ragged Q (cu_seqlens_q) is not "
                                                "supported: sf_o's scale matrices are per (b, h)",
                                                sf->name));
  int block = 0;
  if (o.dtype == DataType::FP4_E2M1) {
    RIME_RETURN_IF_ERROR(expect_dtype(Role::SfO, DataType::FP8_E4M3));
    block = 16;
  } else if (o.dtype == DataType::FP8_E4M3) {
    RIME_RETURN_IF_ERROR(expect_dtype(Role::SfO, DataType::FP8_E8M0));
    block = 32;
  } else {
    return fail(at_role(Role::SfO), fmt::format("{}: sf_o needs O FP4_E2M1 (NVFP4) or FP8_E4M3 (MXFP8); {} is {}",
                                                sf->name, o.name, to_string(o.dtype)));
  }
  const int64_t B = o.dims[0], H = o.dims[1], Sq = o.dims[2], Dv = o.dims[3];
  if (Dv % block != 0)
    return fail(at_tensor(o, "dims"), fmt::format("{}: D_v {} is not a multiple of the {} block {}", o.name, Dv,
                                                  block == 16 ? "NVFP4" : "MXFP8", block));
  if (sf->dims.size() != 4 || sf->dims[0] != B || sf->dims[1] != H)
    return fail(at_tensor(*sf, "dims"),
                fmt::format("{} (sf_o): dims {} must be [{}, {}, R, C]", sf->name, dims_str(sf->dims), B, H));
  auto layout = classify_sf_layout(sf->dims, sf->strides);
  if (!layout)
    return fail(at_tensor(*sf, "strides"),
                fmt::format("{} (sf_o): strides {} are neither per-(b,h) planes nor token-major", sf->name,
                            dims_str(sf->strides)));
  const int64_t R = sf->dims[2], C = sf->dims[3];
  if (R % 128 != 0 || R < round_up(Sq, 128))
    return fail(at_tensor(*sf, "dims"), fmt::format("{} (sf_o): R {} must be a multiple of 128 and >= {} "
                                                    "(S_q {} rounded up to 128)",
                                                    sf->name, R, round_up(Sq, 128), Sq));
  if (C < Dv / block)
    return fail(at_tensor(*sf, "dims"), fmt::format("{} (sf_o): C {} < {} (D_v {} / block {})", sf->name, C,
                                                    Dv / block, Dv, block));
  if (*layout == SfLayout::Planes && C % 4 != 0)
    return fail(at_tensor(*sf, "dims"),
                fmt::format("{} (sf_o): per-(b,h) planes need C a multiple of 4; C is {}", sf->name, C));
  if (*layout == SfLayout::TokenMajor && (H * C) % 4 != 0)
    return fail(at_tensor(*sf, "dims"),
                fmt::format("{} (sf_o): token-major needs H*C a multiple of 4; H*C is {}", sf->name, H * C));
  return Status::success();
}

Status Checker::run() {
  RIME_RETURN_IF_ERROR(check_tensors());
  if (!g_.op()) return fail("/op", fmt::format("graph '{}' has no sdpa op", g_.name()));
  RIME_RETURN_IF_ERROR(check_bindings());
  RIME_RETURN_IF_ERROR(check_output_overlap());
  RIME_RETURN_IF_ERROR(check_shapes());
  RIME_RETURN_IF_ERROR(check_dtypes());
  RIME_RETURN_IF_ERROR(check_small_operands());
  RIME_RETURN_IF_ERROR(check_attributes());
  RIME_RETURN_IF_ERROR(check_mx_scales());
  RIME_RETURN_IF_ERROR(check_sf_o());
  return Status::success();
}

}  // namespace

Status validate(const Graph& graph) { return Checker(graph).run(); }

}  // namespace rime
