#include "testing/trial.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "graph/geometry.hpp"
#include "runtime/driver.hpp"
#include "status_macros.hpp"
#include "testing/cuda_api.hpp"
#include "testing/reference/block_scale.hpp"
#include "testing/reference/formats.hpp"
#include "testing/tolerances.hpp"

namespace rime::testing {
namespace {

using reference::load_element;

// Device allocations of one trial, freed on every path.
struct DeviceMemory {
  std::vector<CUdeviceptr> ptrs;
  ~DeviceMemory() {
    if (const CudaApi* a = cuda())
      for (CUdeviceptr p : ptrs) a->cuMemFree(p);
  }
  Result<CUdeviceptr> alloc(int64_t bytes) {
    CUdeviceptr p = 0;
    Status s = driver::check(cuda()->cuMemAlloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 16))),
                             "cuMemAlloc");
    if (!s.ok()) return s;
    ptrs.push_back(p);
    return p;
  }
};

// Reads a block-scaled O (SPEC section 5): element values and block scales through sf_o's F8_128x4 layout.
struct BlockScaledO {
  const Facts& f;
  const TensorDesc& o;
  const uint8_t* codes;
  const uint8_t* sf;
  int64_t sf_offset(int64_t b, int64_t h, int64_t r, int64_t c) const {
    return reference::sf_o_offset(*f.sf_o_layout, f.H_q, f.sf_o_rows, f.sf_o_cols, b, h, r, c);
  }
  double scale(int64_t b, int64_t h, int64_t i, int64_t blk) const {
    const uint8_t byte = sf[sf_offset(b, h, i, blk)];
    return f.o_block_scale == 16 ? reference::decode_e4m3(byte) : reference::decode_ue8m0(byte);
  }
  // Dequantized o = O * scale_o.
  double value(int64_t b, int64_t h, int64_t i, int64_t d) const {
    return load_element(o.dtype, codes, reference::offset_of(o, b, h, i, d)) * scale(b, h, i, d / f.o_block_scale);
  }
};

// The reference quantizer's block of one row's o = O * scale_o values: its scale byte, the decoded scale, and
// each element dequantized (code * scale, still times scale_o).
struct ReferenceBlock {
  double dec = 0;
  uint8_t byte = 0;
  std::array<double, 32> dequantized{};
};
ReferenceBlock reference_block(const Facts& f, const std::vector<double>& o, double scale_o, int64_t blk) {
  float v[32];
  for (int n = 0; n < f.o_block_scale; ++n) v[n] = static_cast<float>(o[blk * f.o_block_scale + n] * scale_o);
  ReferenceBlock r;
  if (f.o_block_scale == 16) {
    const reference::Nvfp4Block q = reference::quantize_nvfp4(v);
    r.byte = q.scale;
    r.dec = reference::decode_e4m3(q.scale);
    for (int n = 0; n < 16; ++n) r.dequantized[n] = reference::decode_e2m1(q.codes[n]) * r.dec;
  } else {
    const reference::Mxfp8Block q = reference::quantize_mxfp8(v);
    r.byte = q.scale;
    r.dec = reference::decode_ue8m0(q.scale);
    for (int n = 0; n < 32; ++n) r.dequantized[n] = reference::decode_e4m3(q.codes[n]) * r.dec;
  }
  return r;
}

// The spacing of the element grid (E2M1 or E4M3) around |x| in units of the block scale.
double grid_step(int block, double x) {
  x = std::fabs(x);
  if (block == 16) return x < 2 ? 0.5 : (x < 4 ? 1.0 : 2.0);
  if (x < std::ldexp(1.0, -6)) return std::ldexp(1.0, -9);
  return std::ldexp(1.0, std::ilogb(std::min(x, 448.0)) - 3);
}

}  // namespace

double attention_flops(const Facts& f) {
  const int64_t shift = f.mask.bottom_right ? f.S_kv - f.S_q : 0;
  double pairs = 0;
  for (int64_t i = 0; i < f.S_q; ++i) {
    int64_t hi = f.S_kv, lo = 0;
    if (f.mask.causal) hi = std::min(hi, i + shift + 1);
    if (f.mask.band_right) hi = std::min(hi, i + shift + *f.mask.band_right + 1);
    if (f.mask.window_left) lo = std::max<int64_t>(0, i + shift - (*f.mask.window_left - 1));
    pairs += static_cast<double>(std::max<int64_t>(0, hi - lo));
  }
  return pairs * static_cast<double>(f.B * f.H_q) * 2.0 * static_cast<double>(f.D_qk + f.D_v);
}

double attention_flops(const Graph& g, const Facts& f, const TrialInputs& inputs) {
  if (!f.mask.padding) return attention_flops(f);
  double pairs = 0;
  for (int64_t b = 0; b < f.B; ++b) {
    const int64_t rows = std::clamp<int64_t>(reference::q_extent(g, f, inputs.tensors, b).length, 0, f.S_q);
    for (int64_t i = 0; i < rows; ++i) {
      const reference::KvRange keys = reference::unmasked_keys(g, f, inputs.tensors, b, i);
      pairs += static_cast<double>(std::max<int64_t>(0, keys.last - std::max<int64_t>(0, keys.first)));
    }
  }
  return pairs * static_cast<double>(f.H_q) * 2.0 * static_cast<double>(f.D_qk + f.D_v);
}

double bytes_moved(const Graph& g, const Facts& f, const TrialInputs& inputs) {
  const TensorDesc *k = g.operand(Role::K), *v = g.operand(Role::V), *table = g.operand(Role::PageTable);
  double bytes = 0;
  for (const TensorDesc& t : g.tensors())
    if (!f.mask.padding || (&t != k && &t != v && &t != table)) bytes += static_cast<double>(tensor_storage_bytes(t));
  if (f.mask.padding) {
    const double key_bytes = static_cast<double>(f.H_kv) * static_cast<double>(f.D_qk * bits_of(k->dtype) / 8 +
                                                                                f.D_v * bits_of(v->dtype) / 8);
    for (int64_t b = 0; b < f.B; ++b) {
      const int64_t len = std::clamp<int64_t>(reference::kv_extent(g, f, inputs.tensors, b).length, 0, f.S_kv);
      bytes += static_cast<double>(len) * key_bytes;
      if (table) bytes += static_cast<double>(ceil_div(len, f.page_size)) * 4.0;
    }
  }
  return bytes;
}

namespace {
// splitmix64: decorrelates the per-chunk seeds.
uint64_t mix_seed(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

void fill_uniform(DataType dtype, uint8_t* bytes, int64_t span, double lo, double hi, uint64_t seed,
                  unsigned workers) {
  constexpr int64_t kChunk = int64_t{1} << 16;
  const int64_t chunks = ceil_div(span, kChunk);
  // Sub-byte types share bytes between neighbouring elements: one thread then.
  if (bits_of(dtype) < 8) workers = 1;
  workers = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(workers, chunks)));
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t c = next++; c < chunks; c = next++) {
      std::mt19937_64 rng(mix_seed(seed ^ mix_seed(static_cast<uint64_t>(c))));
      std::uniform_real_distribution<double> uniform(lo, hi);
      for (int64_t i = c * kChunk, end = std::min(span, (c + 1) * kChunk); i < end; ++i)
        reference::store_element(dtype, bytes, i, uniform(rng));
    }
  };
  std::vector<std::thread> threads;
  for (unsigned w = 1; w < workers; ++w) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
}

void fill_page_table(const Graph& g, TrialInputs& inputs, uint64_t seed) {
  const TensorDesc* table = g.operand(Role::PageTable);
  if (!table) return;
  std::mt19937_64 rng(mix_seed(seed ^ 0x5061676554626cull));
  const TensorDesc& pool = *g.operand(Role::K);
  const TensorDesc& lens = *g.operand(Role::SeqLenKv);
  const TensorDesc* starts = g.operand(Role::SeqStartKv);
  const int64_t num_pages = pool.dims[0], page = pool.dims[2];
  std::vector<int64_t> order(static_cast<size_t>(num_pages));
  for (int64_t i = 0; i < num_pages; ++i) order[static_cast<size_t>(i)] = i;
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<uint8_t>& bytes = inputs.tensors[table->uid];
  bytes.assign(static_cast<size_t>(tensor_storage_bytes(*table)), 0);
  int64_t next = 0;
  for (int64_t b = 0; b < table->dims[0]; ++b) {
    const int64_t len = static_cast<int64_t>(
        reference::load_element(DataType::INT32, inputs.tensors.at(lens.uid).data(), b * lens.strides[0]));
    const int64_t start = starts ? static_cast<int64_t>(reference::load_element(
                                       DataType::INT32, inputs.tensors.at(starts->uid).data(), b * starts->strides[0]))
                                 : 0;
    // Only the pages holding positions [start, start + len) get ids; the others hold one no pool has.
    for (int64_t p = 0; p < table->dims[1]; ++p) {
      const bool live = p * page < start + len && (p + 1) * page > start;
      const int64_t id = live ? order[static_cast<size_t>(next++ % num_pages)] : int64_t{1} << 30;
      reference::store_element(DataType::INT32, bytes.data(), b * table->strides[0] + p * table->strides[1],
                               static_cast<double>(id));
    }
  }
}

TrialInputs make_inputs(const Graph& g, uint64_t seed, int mx_scale_log2, std::optional<LengthRange> seq_len_kv,
                        std::optional<LengthRange> seq_lengths, bool uniform_descales) {
  TrialInputs in;
  in.seed = seed;
  // Sequence b's length of the seq_lengths mix: its own generator, so that both sides (and a ragged graph and its
  // padded twin) draw the same one.
  auto drawn_length = [&](int64_t b) {
    std::mt19937_64 r(mix_seed(seed ^ 0x5365714c656e73ull ^ mix_seed(static_cast<uint64_t>(b))));
    return std::uniform_int_distribution<int64_t>(seq_lengths->lo, seq_lengths->hi)(r);
  };
  std::mt19937_64 rng(seed);
  const SdpaOp& op = *g.op();
  for (int r = 0; r < kRoleCount; ++r) {
    const Role role = static_cast<Role>(r);
    if (is_output_role(role) || !op.operands[r]) continue;
    const TensorDesc& t = *g.find_tensor(*op.operands[r]);
    std::vector<uint8_t>& bytes = in.tensors[t.uid];
    bytes.assign(static_cast<size_t>(tensor_storage_bytes(t)), 0);
    const int64_t span = element_span(t.dims, t.strides).value_or(0);
    auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
    switch (role) {
      case Role::Q:
      case Role::K:
      case Role::V:
        // Every element of the span, gaps included: kernels must not read what they should not use.
        fill_uniform(t.dtype, bytes.data(), span, -2.0, 2.0, mix_seed(seed ^ mix_seed(static_cast<uint64_t>(t.uid))),
                     std::max(1u, std::thread::hardware_concurrency()));
        break;
      case Role::SfQ:
      case Role::SfK:
      case Role::SfV: {
        // MXFP8 scales: 2^-mx_scale_log2 .. 2^mx_scale_log2 (default 2^-2 .. 2^2, dequantized inputs up to |8|) at
        // every (row, block) the tensor covers. The pads (rows past the sequence or d, blocks past the last) stay
        // 0xFF, UE8M0's NaN, so a kernel that reads one cannot pass.
        std::fill(bytes.begin(), bytes.end(), uint8_t{0xFF});
        const TensorDesc& data = *g.operand(role == Role::SfQ ? Role::Q : (role == Role::SfK ? Role::K : Role::V));
        const bool v = role == Role::SfV;
        const int64_t rows = v ? data.dims[3] : data.dims[2];
        const int64_t cols = v ? ceil_div(data.dims[2], 32) : ceil_div(data.dims[3], 32);
        for (int64_t b = 0; b < t.dims[0]; ++b)
          for (int64_t h = 0; h < t.dims[1]; ++h)
            for (int64_t row = 0; row < rows; ++row)
              for (int64_t c = 0; c < cols; ++c)
                bytes[static_cast<size_t>(b * t.strides[0] + h * t.strides[1] + f8_128x4_offset(row, c, t.dims[3]))] =
                    static_cast<uint8_t>(std::uniform_int_distribution<int>(127 - mx_scale_log2, 127 + mx_scale_log2)(rng));
        break;
      }
      case Role::DescaleQ:
      case Role::DescaleK:
      case Role::DescaleV: {  // per tensor, or one per (batch, kv head): each its own draw, or one for all
        const double shared = uniform_descales ? uniform(0.5, 1.5) : 0.0;
        for (int64_t b = 0; b < t.dims[0]; ++b)
          for (int64_t h = 0; h < t.dims[1]; ++h)
            reference::store_element(t.dtype, bytes.data(), b * t.strides[0] + h * t.strides[1],
                                     uniform_descales ? shared : uniform(0.5, 1.5));
        break;
      }
      case Role::ScaleO:
        reference::store_element(t.dtype, bytes.data(), 0, uniform(0.5, 2.0));
        break;
      case Role::Sink:
        for (int64_t i = 0; i < t.dims[1]; ++i) reference::store_element(t.dtype, bytes.data(), i, uniform(-2.0, 4.0));
        break;
      case Role::SeqLenQ:
      case Role::SeqLenKv: {
        const TensorDesc& ref = *g.operand(role == Role::SeqLenQ ? Role::Q : Role::K);
        const TensorDesc* table = g.operand(Role::PageTable);
        const bool paged_kv = table && role == Role::SeqLenKv;
        // Paged: the longest sequence the table addresses, and lengths at page boundaries +-1 among the draws.
        const int64_t page = paged_kv ? ref.dims[2] : 0;
        const int64_t s = paged_kv ? table->dims[1] * page : ref.dims[2], n = t.dims[0];
        for (int64_t b = 0; b < n; ++b) {
          int64_t len = std::uniform_int_distribution<int64_t>(0, s)(rng);
          if (seq_lengths) {  // the caller's mix, both sides
            len = std::min(drawn_length(b), s);
            reference::store_element(DataType::INT32, bytes.data(), b * t.strides[0], static_cast<double>(len));
            continue;
          }
          if (seq_len_kv && role == Role::SeqLenQ) {  // a decode step's mix: every sequence's new tokens in full
            reference::store_element(DataType::INT32, bytes.data(), b * t.strides[0], static_cast<double>(s));
            continue;
          }
          if (seq_len_kv && role == Role::SeqLenKv) {  // the caller's mix, for every batch
            const int64_t hi = std::min(seq_len_kv->hi, s), lo = std::min(seq_len_kv->lo, hi);
            len = std::uniform_int_distribution<int64_t>(lo, hi)(rng);
            reference::store_element(DataType::INT32, bytes.data(), b * t.strides[0], static_cast<double>(len));
            continue;
          }
          if (paged_kv && b >= 3) {
            const int64_t near = page * std::uniform_int_distribution<int64_t>(1, s / page)(rng);
            const int64_t pick[] = {1, near - 1, near, std::min(s, near + 1), len};
            len = pick[std::uniform_int_distribution<int>(0, 4)(rng)];
          }
          if (n >= 3 && b == 0) len = s;  // a full batch
          if (n >= 3 && b == 1) len = 0;  // an empty one
          reference::store_element(DataType::INT32, bytes.data(), b * t.strides[0], static_cast<double>(len));
        }
        break;
      }
      case Role::SeqStartQ:
      case Role::SeqStartKv: {
        // After the lengths (the role order): a start in [0, S - length], the first batch at the end of its room
        // and the second at 0 when there are 3 or more, so that both edges are drawn.
        const bool q_side = role == Role::SeqStartQ;
        const TensorDesc& lens = *g.operand(q_side ? Role::SeqLenQ : Role::SeqLenKv);
        const TensorDesc* table = g.operand(Role::PageTable);
        const TensorDesc& data = *g.operand(q_side ? Role::Q : Role::K);
        const int64_t s = !q_side && table ? table->dims[1] * data.dims[2] : data.dims[2], n = t.dims[0];
        for (int64_t b = 0; b < n; ++b) {
          const int64_t len = static_cast<int64_t>(
              reference::load_element(DataType::INT32, in.tensors.at(lens.uid).data(), b * lens.strides[0]));
          const int64_t room = std::max<int64_t>(0, s - len);
          int64_t start = std::uniform_int_distribution<int64_t>(0, room)(rng);
          if (n >= 3 && b == 0) start = room;
          if (n >= 3 && b == 1) start = 0;
          reference::store_element(DataType::INT32, bytes.data(), b * t.strides[0], static_cast<double>(start));
        }
        break;
      }
      case Role::CuSeqlensQ:
      case Role::CuSeqlensKv: {
        // Ragged: lengths in [0, max_seqlen] (the first sequence full and the second empty when there are 3 or
        // more), trimmed to the T tokens the tensors hold, starting after an unused gap when there is room:
        // rows outside every sequence must be left alone.
        const bool q_side = role == Role::CuSeqlensQ;
        const TensorDesc& data = *g.operand(q_side ? Role::Q : Role::K);
        const int64_t T = data.dims[2], n = t.dims[0] - 1;
        const std::optional<int64_t>& max = q_side ? op.attributes.max_seqlen_q : op.attributes.max_seqlen_kv;
        const int64_t s = max.value_or(T);
        std::vector<int64_t> lens(static_cast<size_t>(n));
        int64_t sum = 0;
        for (int64_t b = 0; b < n; ++b) {
          int64_t len = std::uniform_int_distribution<int64_t>(0, s)(rng);
          if (n >= 3 && b == 0) len = s;
          if (n >= 3 && b == 1) len = 0;
          if (seq_lengths) len = std::min(drawn_length(b), s);  // the caller's mix, both sides
          len = std::min(len, T - sum);
          lens[static_cast<size_t>(b)] = len;
          sum += len;
        }
        int64_t at = (T - sum) / 2;
        for (int64_t b = 0; b <= n; ++b) {
          reference::store_element(DataType::INT32, bytes.data(), b * t.strides[0], static_cast<double>(at));
          if (b < n) at += lens[static_cast<size_t>(b)];
        }
        break;
      }
      case Role::PageTable:  // after every role: it follows seq_len_kv (fill_page_table)
        break;
      default:  // descale_s, scale_s: read by no kernel; 1 keeps the reference honest
        for (int64_t i = 0; i < span; ++i) reference::store_element(t.dtype, bytes.data(), i, 1.0);
        break;
    }
  }
  fill_page_table(g, in, seed);
  return in;
}

Result<TrialReport> run_trial(const Plan& plan, const TrialInputs& inputs, const TrialOptions& opt) {
  return run_trial(plan.graph(), plan.facts(), plan.workspace_size(), inputs, opt,
                   [&](const std::unordered_map<int64_t, void*>& buffers, void* workspace, CUstream stream, bool first) {
                     ExecuteOptions options;
                     options.check_indices = first && opt.check_indices;
                     return plan.execute(buffers, workspace, stream, options);
                   });
}

Result<TrialReport> run_trial(const Graph& g, const Facts& f, int64_t workspace_bytes, const TrialInputs& inputs,
                              const TrialOptions& opt, const Execute& execute) {
  const CudaApi* api = cuda();
  if (!api) return cuda_status();
  DeviceMemory mem;
  std::unordered_map<int64_t, void*> buffers;
  for (const TensorDesc& t : g.tensors()) {
    auto p = mem.alloc(tensor_storage_bytes(t));
    if (!p.ok()) return p.status();
    buffers[t.uid] = reinterpret_cast<void*>(p.value());
    if (t.is_output) {
      // Poison: 0xFF is NaN in every float type rime writes, so an unwritten element cannot pass.
      RIME_RETURN_IF_ERROR(driver::check(api->cuMemsetD8(p.value(), 0xFF, static_cast<size_t>(tensor_storage_bytes(t))),
                                         "cuMemsetD8(poison)"));
    } else {
      const auto& bytes = inputs.tensors.at(t.uid);
      RIME_RETURN_IF_ERROR(driver::check(api->cuMemcpyHtoD(p.value(), bytes.data(), bytes.size()), "cuMemcpyHtoD"));
    }
  }
  void* workspace = nullptr;
  if (workspace_bytes > 0) {
    auto w = mem.alloc(workspace_bytes);
    if (!w.ok()) return w.status();
    workspace = reinterpret_cast<void*>(w.value());
    // Poison the workspace too: every partial slot must be written before the combine reads it.
    RIME_RETURN_IF_ERROR(driver::check(api->cuMemsetD8(w.value(), 0xFF, static_cast<size_t>(workspace_bytes)),
                                       "cuMemsetD8(workspace)"));
  }
  // The poison and the uploads above run on the legacy default stream: cuMemsetD8 returns before the device has
  // written, and cuMemcpyHtoD from pageable memory once the bytes are staged. The plan runs on a non-blocking
  // stream, which does not wait for the legacy stream, so without this the kernels could read inputs not yet
  // uploaded and the poison could land after them. Seen on the H200 (session 18) whenever another process loaded
  // the GPU: split plans with NaN Stats (poisoned partials or Stats), unwritten O, or O wrong with the LSE exact
  // (V not yet uploaded), on main and on every branch alike, none reproducible on an idle GPU.
  RIME_RETURN_IF_ERROR(driver::check(api->cuCtxSynchronize(), "cuCtxSynchronize(inputs and poison)"));
  CUstream stream = nullptr;
  RIME_RETURN_IF_ERROR(driver::check(api->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  struct StreamGuard {
    CUstream s;
    ~StreamGuard() { cuda()->cuStreamDestroy(s); }
  } guard{stream};
  RIME_RETURN_IF_ERROR(execute(buffers, workspace, stream, true));
  RIME_RETURN_IF_ERROR(driver::check(api->cuStreamSynchronize(stream), "executing the plan"));

  TrialReport rep;
  for (const TensorDesc& t : g.tensors()) {
    if (!t.is_output) continue;
    auto& bytes = rep.outputs[t.uid];
    bytes.resize(static_cast<size_t>(tensor_storage_bytes(t)));
    RIME_RETURN_IF_ERROR(driver::check(
        api->cuMemcpyDtoH(bytes.data(), reinterpret_cast<CUdeviceptr>(buffers[t.uid]), bytes.size()), "cuMemcpyDtoH"));
  }

  if (opt.timing_iterations > 0) {
    for (int w = 0; w < 3; ++w) RIME_RETURN_IF_ERROR(execute(buffers, workspace, stream, false));
    std::vector<float> times;
    CUevent start = nullptr, stop = nullptr;
    api->cuEventCreate(&start, CU_EVENT_DEFAULT);
    api->cuEventCreate(&stop, CU_EVENT_DEFAULT);
    for (int it = 0; it < opt.timing_iterations; ++it) {
      api->cuEventRecord(start, stream);
      Status s = execute(buffers, workspace, stream, false);
      api->cuEventRecord(stop, stream);
      api->cuEventSynchronize(stop);
      if (!s.ok()) return s;
      float ms = 0;
      api->cuEventElapsedTime(&ms, start, stop);
      times.push_back(ms);
    }
    api->cuEventDestroy(start);
    api->cuEventDestroy(stop);
    std::sort(times.begin(), times.end());
    rep.median_ms = times[times.size() / 2];
    rep.tflops = attention_flops(g, f, inputs) / (rep.median_ms * 1e-3) / 1e12;
    rep.gbps = bytes_moved(g, f, inputs) / (rep.median_ms * 1e-3) / 1e9;
  }
  if (!opt.check) return rep;
  TrialReport checked = check_outputs(g, f, inputs, std::move(rep.outputs), opt);
  checked.median_ms = rep.median_ms;
  checked.tflops = rep.tflops;
  checked.gbps = rep.gbps;
  return checked;
}

TrialReport check_outputs(const Graph& g, const Facts& f, const TrialInputs& inputs, reference::HostTensors outputs,
                          const TrialOptions& opt) {
  TrialReport rep;
  rep.outputs = std::move(outputs);
  auto fail = [&](std::string msg) {
    rep.passed = false;
    if (rep.failures.size() < 8) rep.failures.push_back(std::move(msg));
  };

  // Every element of O must have been written (the poison is NaN) and be finite.
  const TensorDesc& o = *g.operand(Role::O);
  const uint8_t* ob = rep.outputs[o.uid].data();
  int64_t non_finite = 0;
  const TensorDesc* sf = g.operand(Role::SfO);
  std::optional<BlockScaledO> blocks;
  if (f.o_block_scale) blocks.emplace(BlockScaledO{f, o, ob, rep.outputs[sf->uid].data()});
  // A block-scaled O's poison: 0xFF in sf_o is NaN in both scale types; the FP4 codes (0xF = -6) are caught by
  // the comparison.
  // Each sequence's rows of O and Stats: with ragged Q only its own tokens exist (the rows of a padded batch
  // past seq_len_q hold O = 0 and are checked as such).
  std::vector<reference::SeqExtent> q_ext;
  for (int64_t b = 0; b < f.B; ++b) q_ext.push_back(reference::q_extent(g, f, inputs.tensors, b));
  auto q_rows = [&](int64_t b) { return f.ragged_q ? std::clamp<int64_t>(q_ext[b].length, 0, f.S_q) : f.S_q; };
  auto row_offset = [&](const TensorDesc& t, int64_t b, int64_t h, int64_t i, int64_t d) {
    return f.ragged_q ? reference::seq_offset(t, q_ext[b], h, i, d) : reference::offset_of(t, b, h, i, d);
  };
  // The reference's row (the sequence's own index) of row i checked here: a ragged side's rows are the sequence's;
  // a dense side's are the tensor's, sequence b's starting at seq_start_q[b] (left padding; 0 without starts).
  auto seq_row = [&](int64_t b, int64_t i) { return f.ragged_q ? i : i - q_ext[b].first; };
  auto element = [&](int64_t b, int64_t h, int64_t i, int64_t d) {
    return blocks ? blocks->value(b, h, i, d) : load_element(o.dtype, ob, row_offset(o, b, h, i, d));
  };
  for (int64_t b = 0; b < f.B; ++b)
    for (int64_t h = 0; h < f.H_q; ++h)
      for (int64_t i = 0; i < q_rows(b); ++i)
        for (int64_t d = 0; d < f.D_v; ++d)
          if (!std::isfinite(element(b, h, i, d))) ++non_finite;
  if (non_finite) fail(fmt::format("O has {} unwritten or non-finite elements", non_finite));
  if (blocks) {
    // sf_o beyond the valid blocks reads zero: the pad columns of every valid row, and for per-(b,h) planes the
    // pad rows [S_q, R) (token-major pad rows are the caller's).
    const int64_t nblk = f.D_v / f.o_block_scale;
    const int64_t rows_to_check = f.sf_o_layout == SfLayout::Planes ? f.sf_o_rows : f.S_q;
    int64_t nonzero = 0;
    for (int64_t b = 0; b < f.B; ++b)
      for (int64_t h = 0; h < f.H_q; ++h)
        for (int64_t r = 0; r < rows_to_check; ++r)
          for (int64_t c = r < f.S_q ? nblk : 0; c < f.sf_o_cols; ++c)
            if (blocks->sf[blocks->sf_offset(b, h, r, c)] != 0) ++nonzero;
    if (nonzero) fail(fmt::format("sf_o has {} nonzero bytes in pad rows or pad columns", nonzero));
  }

  // Rows to check: all, or a sample that always holds the first and last rows of each batch.
  std::vector<std::array<int64_t, 3>> rows;
  int64_t total = 0;
  for (int64_t b = 0; b < f.B; ++b) total += f.H_q * q_rows(b);
  std::mt19937_64 rng(inputs.seed ^ 0x5eedULL);
  if (total <= opt.max_reference_rows) {
    for (int64_t b = 0; b < f.B; ++b)
      for (int64_t h = 0; h < f.H_q; ++h)
        for (int64_t i = 0; i < q_rows(b); ++i) rows.push_back({b, h, i});
  } else {
    std::set<std::array<int64_t, 3>> picked;
    for (int64_t b = 0; b < f.B; ++b) {
      if (q_rows(b) == 0) continue;
      picked.insert({b, 0, 0});
      picked.insert({b, f.H_q - 1, q_rows(b) - 1});
    }
    while (static_cast<int64_t>(picked.size()) < opt.max_reference_rows) {
      const int64_t r = std::uniform_int_distribution<int64_t>(0, f.B * f.H_q * f.S_q - 1)(rng);
      const int64_t b = r / (f.H_q * f.S_q), i = r % f.S_q;
      if (i < q_rows(b)) picked.insert({b, (r / f.S_q) % f.H_q, i});
    }
    rows.assign(picked.begin(), picked.end());
  }

  const bool fp8_out = is_fp8(o.dtype) || f.o_block_scale != 0;
  // SPEC section 10 applies the FP8 criterion (atol + rtol per element) to every graph with FP8 inputs, whatever
  // the O dtype; a BF16/FP16 O of such a graph must also be within relative L2 3e-2 (P held in E4M3 costs about
  // 1-1.5%). The 1e-2 relative-L2 bound alone is the criterion of the BF16/FP16 op (sdpa).
  const bool fp8_criterion = f.is_fp8 || f.is_mxfp8;
  const double scale_o = fp8_out && g.operand(Role::ScaleO)
                             ? load_element(DataType::FP32, inputs.tensors.at(g.operand(Role::ScaleO)->uid).data(), 0)
                             : 1.0;
  namespace tol = tolerance;
  const double atol = o.dtype == DataType::FP8_E5M2 ? tol::kE5m2OAtol : tol::kFp8Atol, rtol = tol::kFp8Rtol;
  double err2 = 0, ref2 = 0, amax_ref = 0, amax_s_ref = 0;
  double quant_err2 = 0;      // block-scaled O: the reference's own quantization error, the floor of err2
  int64_t sf_off_by_more = 0;  // block scales more than one step from the reference's
  const TensorDesc* stats = g.operand(Role::Stats);
  // The double-precision reference dominates a check; rows are independent, so they are computed on every core.
  std::vector<reference::RowResult> refs(rows.size()), emulated(opt.emulate_fp8_p_tile > 0 ? rows.size() : 0);
  {
    const size_t workers = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (size_t w = 0; w < workers; ++w)
      pool.emplace_back([&, w] {
        for (size_t r = w; r < rows.size(); r += workers) {
          const int64_t i = seq_row(rows[r][0], rows[r][2]);
          refs[r] = reference::attention_row(g, f, inputs.tensors, rows[r][0], rows[r][1], i);
          if (!emulated.empty())
            emulated[r] = reference::attention_row_fp8_p(g, f, inputs.tensors, rows[r][0], rows[r][1], i,
                                                         opt.emulate_fp8_p_tile, opt.emulate_fp8_p_terms);
        }
      });
    for (std::thread& t : pool) t.join();
  }
  for (size_t n = 0; n < rows.size(); ++n) {
    const int64_t b = rows[n][0], h = rows[n][1], i = rows[n][2];
    const reference::RowResult& ref = refs[n];
    ++rep.rows_checked;
    if (ref.live) amax_s_ref = std::max(amax_s_ref, ref.max_p);
    ReferenceBlock rblk;
    for (int64_t d = 0; d < f.D_v; ++d) {
      const double got = element(b, h, i, d) / scale_o;
      const double want = ref.o[d];
      if (ref.live) amax_ref = std::max(amax_ref, std::fabs(want));
      const double err = std::fabs(got - want);
      // SPEC section 10: a block-scaled O widens atol to 3 steps of the reference block's grid at the value.
      double elem_atol = atol;
      if (blocks) {
        if (d % f.o_block_scale == 0) {
          rblk = reference_block(f, ref.o, scale_o, d / f.o_block_scale);
          // Non-negative E4M3 and UE8M0 bytes order like their values: one step is one code.
          const int got_byte = blocks->sf[blocks->sf_offset(b, h, i, d / f.o_block_scale)];
          if (got_byte != 0xFF && std::abs(got_byte - int{rblk.byte}) > 1) ++sf_off_by_more;
        }
        const double s = rblk.dec > 0 ? rblk.dec : 1e-30;
        const double step = s * grid_step(f.o_block_scale, want * scale_o / s);
        elem_atol = std::max(atol, tol::kBlockScaledGridSteps * step / scale_o);
        const double q = rblk.dequantized[static_cast<size_t>(d % f.o_block_scale)] / scale_o;
        quant_err2 += (q - want) * (q - want);
      }
      ++rep.elements_checked;
      if (!std::isfinite(got)) continue;  // counted above
      rep.o_max_abs_err = std::max(rep.o_max_abs_err, err);
      err2 += err * err;
      ref2 += want * want;
      double emulated_value = 0;
      if (!emulated.empty()) {
        emulated_value = emulated[n].o[static_cast<size_t>(d)];
        const double e = std::fabs(got - emulated_value);
        rep.emulated_max_abs_err = std::max(rep.emulated_max_abs_err, e);
        if (e > elem_atol + rtol * std::fabs(emulated_value)) ++rep.emulated_outside;
      }
      if (fp8_criterion && err > elem_atol + rtol * std::fabs(want)) {
        if (++rep.elements_outside <= 3)
          fail(fmt::format("O[{},{},{},{}] = {} vs reference {} (atol {}, rtol {}){}", b, h, i, d, got, want, elem_atol,
                           rtol,
                           emulated.empty() ? std::string()
                                            : fmt::format("; with P held in E4M3 as the kernel holds it: {}",
                                                          emulated_value)));
      }
    }
    if (stats) {
      double lse = ref.lse;
      if (f.stats_log2) lse *= 1.4426950408889634;
      const double got = load_element(DataType::FP32, rep.outputs[stats->uid].data(), row_offset(*stats, b, h, i, 0));
      const bool both_neg_inf = std::isinf(got) && got < 0 && std::isinf(lse) && lse < 0;
      if (!both_neg_inf) {
        const double e = std::fabs(got - lse);
        if (!(e <= tol::kLseAtol + tol::kLseRtol * std::fabs(lse)))
          fail(fmt::format("Stats[{},{},{}] = {} vs reference {}", b, h, i, got, lse));
        if (std::isfinite(e)) rep.lse_max_abs_err = std::max(rep.lse_max_abs_err, e);
      }
    }
  }
  rep.o_rel_l2 = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  if (blocks) {
    // Beyond SPEC's per-element bound, which is loose for 4-bit values: the whole O may be off the reference by
    // the reference's own quantization error plus 5% (the FP8 P of the kernels costs 2-4%), and no block scale
    // may be more than one code of its type from the reference block's.
    const double quant_rel = ref2 > 0 ? std::sqrt(quant_err2 / ref2) : 0.0;
    rep.quant_rel_l2 = quant_rel;
    if (!(rep.o_rel_l2 <= quant_rel + tol::kBlockScaledRelL2Slack))
      fail(fmt::format("block-scaled O relative L2 error {:.4f} > the reference's own quantization error {:.4f} + {}",
                       rep.o_rel_l2, quant_rel, tol::kBlockScaledRelL2Slack));
    if (sf_off_by_more) fail(fmt::format("{} sf_o block scales are more than one code from the reference's", sf_off_by_more));
  }
  if (fp8_criterion) {
    // SPEC section 10: at most 1e-5 of the elements outside atol + rtol * |ref|.
    if (static_cast<double>(rep.elements_outside) > tol::kOutsideFraction * static_cast<double>(rep.elements_checked))
      fail(fmt::format("{} of {} O elements outside the FP8 tolerance", rep.elements_outside, rep.elements_checked));
    else
      rep.failures.erase(std::remove_if(rep.failures.begin(), rep.failures.end(),
                                        [](const std::string& s) { return s.rfind("O[", 0) == 0; }),
                         rep.failures.end());
    if (!fp8_out && !(rep.o_rel_l2 < tol::kFp8Graph16BitORelL2))
      fail(fmt::format("O relative L2 error {:.3g} >= {} (a 16-bit O of an FP8 graph)", rep.o_rel_l2,
                       tol::kFp8Graph16BitORelL2));
  } else if (!(rep.o_rel_l2 < tol::k16BitRelL2)) {
    fail(fmt::format("O relative L2 error {:.3g} >= {}", rep.o_rel_l2, tol::k16BitRelL2));
  }
  rep.passed = rep.failures.empty();

  const bool all_rows = static_cast<int64_t>(rows.size()) == total;
  if (const TensorDesc* a = g.operand(Role::AmaxO)) {
    rep.amax_o_gpu = load_element(DataType::FP32, rep.outputs[a->uid].data(), 0);
    rep.amax_o_ref = amax_ref;
    const double bound = atol + rtol * amax_ref;
    if (!(std::fabs(rep.amax_o_gpu - amax_ref) <= bound) && (all_rows || rep.amax_o_gpu < amax_ref - bound))
      fail(fmt::format("Amax_O {} vs reference {}{}", rep.amax_o_gpu, amax_ref, all_rows ? "" : " (sampled rows)"));
  }
  if (const TensorDesc* a = g.operand(Role::AmaxS)) {
    rep.amax_s_gpu = load_element(DataType::FP32, rep.outputs[a->uid].data(), 0);
    rep.amax_s_ref = amax_s_ref;
    const double bound = tol::kAmaxSAtol + tol::kAmaxSRtol * amax_s_ref;
    if (!(std::fabs(rep.amax_s_gpu - amax_s_ref) <= bound) && (all_rows || rep.amax_s_gpu < amax_s_ref - bound))
      fail(fmt::format("Amax_S {} vs reference {}{}", rep.amax_s_gpu, amax_s_ref, all_rows ? "" : " (sampled rows)"));
  }
  return rep;
}

}  // namespace rime::testing
