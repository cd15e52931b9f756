#include "testing/reference/sdpa.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "graph/geometry.hpp"
#include "testing/reference/formats.hpp"

namespace rime::reference {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

double scalar(const Graph& g, const HostTensors& t, Role role, double fallback) {
  const TensorDesc* d = g.operand(role);
  if (!d) return fallback;
  return load_element(d->dtype, t.at(d->uid).data(), 0);
}

int64_t seq_len(const Graph& g, const HostTensors& t, Role role, int64_t b, int64_t fallback) {
  const TensorDesc* d = g.operand(role);
  if (!d) return fallback;
  return static_cast<int64_t>(load_element(DataType::INT32, t.at(d->uid).data(), b * d->strides[0]));
}

// MXFP8 inputs (SPEC section 6): the UE8M0 scale at (r, c) of the F8_128x4 plane (b, h) of a scale tensor.
double mx_scale(const Graph& g, const HostTensors& t, Role role, int64_t b, int64_t h, int64_t r, int64_t c) {
  const TensorDesc& d = *g.operand(role);
  return decode_ue8m0(t.at(d.uid)[static_cast<size_t>(b * d.strides[0] + h * d.strides[1] +
                                                      f8_128x4_offset(r, c, d.dims[3]))]);
}

}  // namespace

KvRange unmasked_keys(const Graph& g, const Facts& f, const HostTensors& t, int64_t b, int64_t i) {
  const int64_t shift = f.mask.bottom_right ? f.S_kv - f.S_q : 0;
  int64_t hi = f.S_kv, lo = 0;
  if (f.mask.padding) hi = std::min(hi, std::max<int64_t>(0, seq_len(g, t, Role::SeqLenKv, b, f.S_kv)));
  if (f.mask.causal) hi = std::min(hi, i + shift + 1);
  if (f.mask.band_right) hi = std::min(hi, i + shift + *f.mask.band_right + 1);
  if (f.mask.window_left) lo = std::max<int64_t>(lo, i + shift - (*f.mask.window_left - 1));
  return {lo, hi};
}

RowResult attention_row(const Graph& g, const Facts& f, const HostTensors& t, int64_t b, int64_t h, int64_t i,
                        const KvRange* kv_range) {
  RowResult r;
  r.o.assign(static_cast<size_t>(f.D_v), 0.0);
  r.lse = kNegInf;
  const int64_t seq_q = f.mask.padding ? seq_len(g, t, Role::SeqLenQ, b, f.S_q) : f.S_q;
  r.live = i < seq_q;
  if (!r.live) return r;

  const TensorDesc &q = *g.operand(Role::Q), &k = *g.operand(Role::K), &v = *g.operand(Role::V);
  const uint8_t *qb = t.at(q.uid).data(), *kb = t.at(k.uid).data(), *vb = t.at(v.uid).data();
  const int64_t h_kv = h / f.group;
  const double scale = static_cast<double>(f.attn_scale) * scalar(g, t, Role::DescaleQ, 1.0) *
                       scalar(g, t, Role::DescaleK, 1.0);
  const double descale_v = scalar(g, t, Role::DescaleV, 1.0);
  const bool use_sink = f.has_sink && !kv_range;
  const double sink = use_sink ? load_element(DataType::FP32, t.at(g.operand(Role::Sink)->uid).data(), h) : kNegInf;

  KvRange keys = unmasked_keys(g, f, t, b, i);
  if (kv_range) {
    keys.first = std::max(keys.first, kv_range->first);
    keys.last = std::min(keys.last, kv_range->last);
  }
  std::vector<double> qrow(static_cast<size_t>(f.D_qk));
  const bool mx = f.is_mxfp8;
  for (int64_t d = 0; d < f.D_qk; ++d) {
    qrow[d] = load_element(q.dtype, qb, offset_of(q, b, h, i, d));
    if (mx) qrow[d] *= mx_scale(g, t, Role::SfQ, b, h, i, d / 32);
  }
  std::vector<double> s;
  std::vector<int64_t> js;
  double m = sink, row_max = kNegInf;
  for (int64_t j = std::max<int64_t>(0, keys.first); j < keys.last; ++j) {
    double dot = 0;
    for (int64_t d = 0; d < f.D_qk; ++d) {
      double kv = load_element(k.dtype, kb, offset_of(k, b, h_kv, j, d));
      if (mx) kv *= mx_scale(g, t, Role::SfK, b, h_kv, j, d / 32);
      dot += qrow[d] * kv;
    }
    s.push_back(scale * dot);
    js.push_back(j);
    row_max = std::max(row_max, s.back());
  }
  m = std::max(m, row_max);
  if (m == kNegInf) return r;  // every key masked, no sink: O = 0, LSE = -inf
  double l = use_sink ? std::exp(sink - m) : 0.0;
  for (double x : s) l += std::exp(x - m);
  for (size_t n = 0; n < s.size(); ++n) {
    const double p = std::exp(s[n] - m) / l;
    for (int64_t d = 0; d < f.D_v; ++d) {
      double vv = load_element(v.dtype, vb, offset_of(v, b, h_kv, js[n], d));
      if (mx) vv *= mx_scale(g, t, Role::SfV, b, h_kv, d, js[n] / 32);
      r.o[d] += p * vv;
    }
  }
  for (double& x : r.o) x *= descale_v;
  r.lse = m + std::log(l);
  r.max_p = row_max == kNegInf ? 0.0 : std::exp(row_max - m) / l;
  return r;
}

RowResult combine_rows(const std::vector<RowResult>& parts, const double* sink) {
  RowResult r;
  r.o.assign(parts.empty() ? 0 : parts[0].o.size(), 0.0);
  r.live = !parts.empty() && parts[0].live;
  double m = kNegInf;
  for (const RowResult& p : parts) m = std::max(m, p.lse);
  if (sink) m = std::max(m, *sink);
  if (m == kNegInf || !r.live) {
    r.lse = kNegInf;
    return r;
  }
  double den = sink ? std::exp(*sink - m) : 0.0;
  for (const RowResult& p : parts) {
    const double w = p.lse == kNegInf ? 0.0 : std::exp(p.lse - m);  // select, never multiply a dead slot
    den += w;
    for (size_t d = 0; d < r.o.size(); ++d) r.o[d] += w * p.o[d];
  }
  for (double& x : r.o) x /= std::max(den, 1e-30);
  r.lse = m + std::log(den);
  return r;
}

}  // namespace rime::reference
