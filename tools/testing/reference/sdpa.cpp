#include "testing/reference/sdpa.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "graph/geometry.hpp"
#include "testing/reference/formats.hpp"

namespace rime::reference {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// A descale of (batch b, kv head h_kv): per tensor ([1,1,1,1]) or per (batch, kv head) ([B,H_kv,1,1]), SPEC
// section 1; an extent-1 dim's stride is never multiplied.
double descale(const Graph& g, const HostTensors& t, Role role, int64_t b, int64_t h_kv) {
  const TensorDesc* d = g.operand(role);
  if (!d) return 1.0;
  const int64_t at = (d->dims[0] > 1 ? b * d->strides[0] : 0) + (d->dims[1] > 1 ? h_kv * d->strides[1] : 0);
  return load_element(d->dtype, t.at(d->uid).data(), at);
}

int64_t int_at(const HostTensors& t, const TensorDesc& d, int64_t index) {
  return static_cast<int64_t>(load_element(DataType::INT32, t.at(d.uid).data(), index * d.strides[0]));
}

// One side's extent of sequence b: from its offsets (ragged), its lengths and starts (padding on the right or the
// left), or the tensors' S.
SeqExtent side_extent(const Graph& g, const HostTensors& t, Role lens, Role starts, Role offsets, int64_t b,
                      int64_t s) {
  if (const TensorDesc* cu = g.operand(offsets)) {
    const int64_t first = int_at(t, *cu, b);
    return {0, first, int_at(t, *cu, b + 1) - first};
  }
  const TensorDesc* start = g.operand(starts);
  if (const TensorDesc* d = g.operand(lens)) return {b, start ? int_at(t, *start, b) : 0, int_at(t, *d, b)};
  return {b, 0, s};
}

// The element offset of (key j, d) of batch b, head h_kv in K or V: dense [B, H_kv, S_kv, D] at position
// seq_start_kv[b] + j (0 without starts), ragged at the sequence's tokens, or with a page table the pool
// [num_pages, H_kv, page_size, D] at page page_table[b][p / page_size], slot p % page_size, p that position.
// `e` is kv_extent(b), read once per row by the callers.
int64_t kv_offset(const Graph& g, const Facts& f, const HostTensors& t, const TensorDesc& kv, const SeqExtent& e,
                  int64_t b, int64_t h_kv, int64_t j, int64_t d) {
  if (!f.paged) return seq_offset(kv, e, h_kv, j, d);
  const TensorDesc& table = *g.operand(Role::PageTable);
  const int64_t p = e.first + j;
  const int64_t page = static_cast<int64_t>(load_element(
      DataType::INT32, t.at(table.uid).data(), b * table.strides[0] + (p / f.page_size) * table.strides[1]));
  return offset_of(kv, page, h_kv, p % f.page_size, d);
}

// MXFP8 inputs (SPEC section 6): the UE8M0 scale at (r, c) of the F8_128x4 plane (b, h) of a scale tensor.
double mx_scale(const Graph& g, const HostTensors& t, Role role, int64_t b, int64_t h, int64_t r, int64_t c) {
  const TensorDesc& d = *g.operand(role);
  return decode_ue8m0(t.at(d.uid)[static_cast<size_t>(b * d.strides[0] + h * d.strides[1] +
                                                      f8_128x4_offset(r, c, d.dims[3]))]);
}

// K or V of batch b, kv head h_kv, as a row reads it: the operand, its bytes, its MXFP8 scales and the page table
// looked up once, so that an element costs its offset and its decode. (Looked up per element, the descriptors and
// the tensors' map took most of the reference's time, and the reference most of the GPU tier's.) The values are
// those of kv_offset and mx_scale: key j's elements lie strides[3] apart from element (j, 0).
class KvReader {
 public:
  KvReader(const Graph& g, const Facts& f, const HostTensors& t, Role role, const SeqExtent& e, int64_t b,
           int64_t h_kv)
      : g_(g), f_(f), t_(t), kv_(*g.operand(role)), data_(t.at(kv_.uid).data()), e_(e), b_(b), h_kv_(h_kv),
        is_v_(role == Role::V) {
    if (f.is_mxfp8) {
      sf_ = g.operand(is_v_ ? Role::SfV : Role::SfK);
      sf_data_ = t.at(sf_->uid).data() + b * sf_->strides[0] + h_kv * sf_->strides[1];
    }
  }
  // The element offset of key j's first element.
  int64_t key(int64_t j) const { return kv_offset(g_, f_, t_, kv_, e_, b_, h_kv_, j, 0); }
  // Element d of key j, `at` its key(j), with its MXFP8 scale applied.
  double value(int64_t at, int64_t j, int64_t d) const {
    double x = load_element(kv_.dtype, data_, at + d * kv_.strides[3]);
    if (sf_) x *= decode_ue8m0(sf_data_[static_cast<size_t>(is_v_ ? f8_128x4_offset(d, j / 32, sf_->dims[3])
                                                                  : f8_128x4_offset(j, d / 32, sf_->dims[3]))]);
    return x;
  }

 private:
  const Graph& g_;
  const Facts& f_;
  const HostTensors& t_;
  const TensorDesc& kv_;
  const uint8_t* data_;
  SeqExtent e_;
  int64_t b_, h_kv_;
  bool is_v_;
  const TensorDesc* sf_ = nullptr;
  const uint8_t* sf_data_ = nullptr;
};

}  // namespace

SeqExtent q_extent(const Graph& g, const Facts& f, const HostTensors& t, int64_t b) {
  return side_extent(g, t, Role::SeqLenQ, Role::SeqStartQ, Role::CuSeqlensQ, b, f.S_q);
}
SeqExtent kv_extent(const Graph& g, const Facts& f, const HostTensors& t, int64_t b) {
  return side_extent(g, t, Role::SeqLenKv, Role::SeqStartKv, Role::CuSeqlensKv, b, f.S_kv);
}

KvRange unmasked_keys(const Graph& g, const Facts& f, const HostTensors& t, int64_t b, int64_t i) {
  // In sequence coordinates (SPEC section 2): key j of sequence b is at position seq_start_kv[b] + j, so a dense
  // side holds S - start of its keys (a ragged side's S bounds the length alone).
  int64_t hi = f.S_kv, lo = 0;
  if (f.mask.padding) {
    const SeqExtent kv = kv_extent(g, f, t, b);
    hi = std::clamp<int64_t>(kv.length, 0, std::max<int64_t>(0, f.ragged_kv ? f.S_kv : f.S_kv - kv.first));
  }
  // Bottom-right alignment: the batch's own seq_len_kv - seq_len_q with per-batch lengths (SPEC section 2; a
  // ragged side's lengths are its offsets' differences), else S_kv - S_q. hi is the batch's clamped kv length.
  int64_t shift = 0;
  if (f.mask.bottom_right) {
    const SeqExtent q = q_extent(g, f, t, b);
    const int64_t q_room = std::max<int64_t>(0, f.ragged_q ? f.S_q : f.S_q - q.first);
    shift = f.mask.padding ? hi - std::clamp<int64_t>(q.length, 0, q_room) : f.S_kv - f.S_q;
  }
  if (f.mask.causal) hi = std::min(hi, i + shift + 1);
  if (f.mask.band_right) hi = std::min(hi, i + shift + *f.mask.band_right + 1);
  if (f.mask.window_left) lo = std::max<int64_t>(lo, i + shift - (*f.mask.window_left - 1));
  return {lo, hi};
}

void round_q_row_e4m3(std::vector<double>& row) {
  double amax = 0;
  for (double v : row) amax = std::max(amax, std::fabs(v));
  int e = 0;
  if (amax > 0 && amax <= 3.0e38) {
    // In FP32, as the kernel computes it: 448 / amax rounded to float decides the exponent at a power of two.
    int ex = 0;
    std::frexp(448.f / static_cast<float>(amax), &ex);
    e = std::min(std::max(ex - 1, -126), 126);
  }
  for (double& v : row) v = std::ldexp(decode_e4m3(encode_e4m3(std::ldexp(v, e))), -e);
}

namespace {

// The scores of one row over its unmasked keys (within kv_range when given), and what the row needs around them.
struct RowScores {
  bool live = false;
  std::vector<double> s;    // attn_scale * descales * dot(Q_i, K_j), natural-log units
  std::vector<int64_t> js;  // their keys
  double sink = kNegInf;    // the sink logit, -inf without one
  double descale_v = 1;
  SeqExtent kv;             // the sequence's K/V extent
};

RowScores row_scores(const Graph& g, const Facts& f, const HostTensors& t, int64_t b, int64_t h, int64_t i,
                     const KvRange* kv_range) {
  RowScores out;
  const SeqExtent qe = q_extent(g, f, t, b);
  out.live = i >= 0 && i < qe.length;
  if (!out.live) return out;
  const SeqExtent ke = out.kv = kv_extent(g, f, t, b);
  const TensorDesc& q = *g.operand(Role::Q);
  const uint8_t* qb = t.at(q.uid).data();
  const int64_t h_kv = h / f.group;
  const double scale = static_cast<double>(f.attn_scale) * descale(g, t, Role::DescaleQ, b, h_kv) *
                       descale(g, t, Role::DescaleK, b, h_kv);
  out.descale_v = descale(g, t, Role::DescaleV, b, h_kv);
  if (f.has_sink && !kv_range) out.sink = load_element(DataType::FP32, t.at(g.operand(Role::Sink)->uid).data(), h);
  KvRange keys = unmasked_keys(g, f, t, b, i);
  if (kv_range) {
    keys.first = std::max(keys.first, kv_range->first);
    keys.last = std::min(keys.last, kv_range->last);
  }
  std::vector<double> qrow(static_cast<size_t>(f.D_qk));
  const bool mx = f.is_mxfp8;
  for (int64_t d = 0; d < f.D_qk; ++d) {
    qrow[d] = load_element(q.dtype, qb, seq_offset(q, qe, h, i, d));
    if (mx) qrow[d] *= mx_scale(g, t, Role::SfQ, b, h, i, d / 32);
  }
  if (f.q_quantization == QQuantization::E4M3PerRow) round_q_row_e4m3(qrow);
  const KvReader kr(g, f, t, Role::K, ke, b, h_kv);
  for (int64_t j = std::max<int64_t>(0, keys.first); j < keys.last; ++j) {
    double dot = 0;
    const int64_t at = kr.key(j);
    for (int64_t d = 0; d < f.D_qk; ++d) dot += qrow[d] * kr.value(at, j, d);
    // SPEC section 2: soft-capping acts on the scaled logit, before the sink and the max.
    out.s.push_back(f.logit_softcap > 0 ? f.logit_softcap * std::tanh(scale * dot / f.logit_softcap) : scale * dot);
    out.js.push_back(j);
  }
  return out;
}

}  // namespace

RowResult attention_row(const Graph& g, const Facts& f, const HostTensors& t, int64_t b, int64_t h, int64_t i,
                        const KvRange* kv_range) {
  RowResult r;
  r.o.assign(static_cast<size_t>(f.D_v), 0.0);
  r.lse = kNegInf;
  const RowScores rs = row_scores(g, f, t, b, h, i, kv_range);
  r.live = rs.live;
  if (!r.live) return r;
  const int64_t h_kv = h / f.group;
  double row_max = kNegInf;
  for (double x : rs.s) row_max = std::max(row_max, x);
  const double m = std::max(rs.sink, row_max);
  if (m == kNegInf) return r;  // every key masked, no sink: O = 0, LSE = -inf
  double l = rs.sink != kNegInf ? std::exp(rs.sink - m) : 0.0;
  for (double x : rs.s) l += std::exp(x - m);
  const KvReader vr(g, f, t, Role::V, rs.kv, b, h_kv);
  for (size_t n = 0; n < rs.s.size(); ++n) {
    const double p = std::exp(rs.s[n] - m) / l;
    const int64_t j = rs.js[n], at = vr.key(j);
    for (int64_t d = 0; d < f.D_v; ++d) r.o[d] += p * vr.value(at, j, d);
  }
  for (double& x : r.o) x *= rs.descale_v;
  r.lse = m + std::log(l);
  r.max_p = row_max == kNegInf ? 0.0 : std::exp(row_max - m) / l;
  return r;
}

RowResult attention_row_fp8_p(const Graph& g, const Facts& f, const HostTensors& t, int64_t b, int64_t h, int64_t i,
                              int kv_tile, int p_terms) {
  RowResult r;
  r.o.assign(static_cast<size_t>(f.D_v), 0.0);
  r.lse = kNegInf;
  const RowScores rs = row_scores(g, f, t, b, h, i, nullptr);
  r.live = rs.live;
  if (!r.live) return r;
  const KvReader vr(g, f, t, Role::V, rs.kv, b, h / f.group);
  double m_run = kNegInf, l = 0;
  for (size_t first = 0; first < rs.s.size();) {
    // One KV tile: the row's keys in [tile * kv_tile, (tile + 1) * kv_tile).
    const int64_t tile = rs.js[first] / kv_tile;
    size_t last = first;
    double tile_max = kNegInf;
    while (last < rs.s.size() && rs.js[last] / kv_tile == tile) tile_max = std::max(tile_max, rs.s[last++]);
    const double m_new = std::max(m_run, tile_max);
    const double alpha = m_run == kNegInf ? 0.0 : std::exp(m_run - m_new);
    l *= alpha;
    for (double& x : r.o) x *= alpha;
    for (size_t n = first; n < last; ++n) {
      const double p = std::exp(rs.s[n] - m_new);
      l += p;
      // As the kernels compute it: x = p * 448 in fp32, hi = e4m3(x), lo = e4m3((x - hi) * 16) in fp32.
      const float x = static_cast<float>(p) * 448.f;
      const float hi = static_cast<float>(decode_e4m3(encode_e4m3(x)));
      const double lo = p_terms == 2 ? decode_e4m3(encode_e4m3(static_cast<float>((x - hi) * 16.f))) / 16.0 : 0.0;
      const double p_held = (hi + lo) / 448.0;
      const int64_t j = rs.js[n], at = vr.key(j);
      for (int64_t d = 0; d < f.D_v; ++d) r.o[d] += p_held * vr.value(at, j, d);
    }
    m_run = m_new;
    first = last;
  }
  double m = m_run;
  if (rs.sink != kNegInf) {
    const double m_f = std::max(m_run, rs.sink);
    const double alpha = m_run == kNegInf ? 0.0 : std::exp(m_run - m_f);
    l = l * alpha + std::exp(rs.sink - m_f);
    for (double& x : r.o) x *= alpha;
    m = m_f;
  }
  if (!(l > 0)) {
    std::fill(r.o.begin(), r.o.end(), 0.0);
    return r;
  }
  for (double& x : r.o) x *= rs.descale_v / l;
  r.lse = m + std::log(l);
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
