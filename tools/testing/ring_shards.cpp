#include "testing/ring_shards.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "graph/geometry.hpp"
#include "plan/context_parallel.hpp"

namespace rime::testing {

namespace {

constexpr Role kSequence[] = {Role::Q, Role::K, Role::V, Role::O, Role::Stats};

const TensorDesc* sequence_tensor(const Graph& g, int64_t uid) {
  for (Role r : kSequence)
    if (const TensorDesc* t = g.operand(r); t && t->uid == uid) return t;
  return nullptr;
}

// Copies n rows (each dims[3] elements, contiguous) of every (b, h): rows [from, from + n) of `src` to rows
// [to, to + n) of `dst`.
void copy_rows(const TensorDesc& src_desc, const std::vector<uint8_t>& src, int64_t from, const TensorDesc& dst_desc,
               std::vector<uint8_t>& dst, int64_t to, int64_t n) {
  const int64_t elem = bits_of(src_desc.dtype) / 8, row = src_desc.dims[3] * elem;
  for (int64_t b = 0; b < src_desc.dims[0]; ++b)
    for (int64_t h = 0; h < src_desc.dims[1]; ++h)
      for (int64_t i = 0; i < n; ++i) {
        const auto& ss = src_desc.strides;
        const auto& ds = dst_desc.strides;
        std::memcpy(dst.data() + (b * ds[0] + h * ds[1] + (to + i) * ds[2]) * elem,
                    src.data() + (b * ss[0] + h * ss[1] + (from + i) * ss[2]) * elem, static_cast<size_t>(row));
      }
}

}  // namespace

Result<Graph> ring_shard_graph(const Graph& whole, int world) {
  if (Status s = validate(whole); !s.ok()) return s;
  const TensorDesc* q = whole.operand(Role::Q);
  const TensorDesc* k = whole.operand(Role::K);
  if (!q || !k || q->dims.size() != 4 || k->dims.size() != 4)
    return Status(StatusCode::InvalidGraph, "the ring needs an SDPA op with rank-4 Q, K and V");
  const int64_t S = q->dims[2];
  if (k->dims[2] != S)
    return Status(StatusCode::InvalidArgument,
                  fmt::format("the ring shards a self-attention prefill: S_q {} and S_kv {} differ", S, k->dims[2]));
  if (S % (2 * world) != 0)
    return Status(StatusCode::InvalidArgument,
                  fmt::format("a ring of {} ranks cuts the sequence into {} equal chunks; S {} is not a multiple of {}",
                              world, 2 * world, S, 2 * world));
  Graph out(whole.name());
  for (TensorDesc t : whole.tensors()) {
    if (sequence_tensor(whole, t.uid)) {
      const Layout layout = classify_layout(t.dims, t.strides);
      if (layout != Layout::Bhsd && layout != Layout::Bshd)
        return Status(StatusCode::InvalidArgument,
                      fmt::format("the ring cuts tensors stored as BHSD or BSHD; {} is {}", t.name, to_string(layout)));
      t.dims[2] = S / world;
      t.strides = layout == Layout::Bhsd ? TensorDesc::packed_strides(t.dims) : TensorDesc::bshd_strides(t.dims);
    }
    out.add_tensor(t);
  }
  if (Status s = out.set_op(*whole.op()); !s.ok()) return s;
  return out;
}

TrialInputs ring_shard_inputs(const Graph& whole, const Graph& shard, const TrialInputs& inputs, int rank, int world) {
  TrialInputs out = inputs;
  for (const TensorDesc& t : shard.tensors()) {
    const TensorDesc* w = sequence_tensor(whole, t.uid);
    if (!w || t.is_output) continue;
    const int64_t chunk = t.dims[2] / 2;
    std::vector<uint8_t>& dst = out.tensors[t.uid];
    dst.assign(static_cast<size_t>(tensor_storage_bytes(t)), 0);
    const auto chunks = context_parallel::zigzag_chunks(rank, world);
    for (int l = 0; l < 2; ++l) copy_rows(*w, inputs.tensors.at(t.uid), chunks[l] * chunk, t, dst, l * chunk, chunk);
  }
  return out;
}

void ring_gather_outputs(const Graph& whole, const Graph& shard, int rank, int world,
                         const reference::HostTensors& shard_outputs, reference::HostTensors& whole_outputs) {
  for (const TensorDesc& t : whole.tensors()) {
    if (!t.is_output) continue;
    std::vector<uint8_t>& dst = whole_outputs[t.uid];
    if (dst.empty()) dst.assign(static_cast<size_t>(tensor_storage_bytes(t)), 0);
    const std::vector<uint8_t>& src = shard_outputs.at(t.uid);
    if (const TensorDesc* s = sequence_tensor(shard, t.uid)) {
      const int64_t chunk = s->dims[2] / 2;
      const auto chunks = context_parallel::zigzag_chunks(rank, world);
      for (int l = 0; l < 2; ++l) copy_rows(*s, src, l * chunk, t, dst, chunks[l] * chunk, chunk);
    } else if (t.dtype == DataType::FP32 && src.size() == 4 && dst.size() == 4) {  // Amax_O: the max over the ranks
      float a = 0, b = 0;
      std::memcpy(&a, src.data(), 4);
      std::memcpy(&b, dst.data(), 4);
      const float m = std::max(a, b);
      std::memcpy(dst.data(), &m, 4);
    } else {
      dst = src;
    }
  }
}

}  // namespace rime::testing
