// Ragged (THD) batches in the tests: the padded twin of a ragged graph (the same sequences as per-batch rows with
// seq_len_q / seq_len_kv), its inputs, and a comparison of the two plans' outputs at each sequence's rows. A
// ragged plan must compute what the padded plan of the same sequences computes.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "graph/geometry.hpp"
#include "rime/inspect/facts.hpp"
#include "rime/graph.hpp"
#include "testing/reference/formats.hpp"
#include "testing/reference/sdpa.hpp"
#include "testing/trial.hpp"

namespace rime::test {

// `ragged` with each ragged side's tensors as packed [B, H, S, D] (S its max_seqlen) and its offsets as a
// lengths tensor [B] under the same uid (cu_seqlens_q -> seq_len_q, cu_seqlens_kv -> seq_len_kv); every other
// tensor unchanged, under its uid.
inline Graph padded_twin(const Graph& ragged, const Facts& f) {
  const SdpaOp& op = *ragged.op();
  auto is = [&](const TensorDesc& t, Role r) { return op.operand(r) == t.uid; };
  Graph g(ragged.name() + "_padded");
  for (TensorDesc t : ragged.tensors()) {
    const bool q_side = f.ragged_q && (is(t, Role::Q) || is(t, Role::O) || is(t, Role::Stats));
    const bool kv_side = f.ragged_kv && (is(t, Role::K) || is(t, Role::V));
    if (q_side || kv_side) t.dims = {f.B, t.dims[1], q_side ? f.S_q : f.S_kv, t.dims[3]};
    if (is(t, Role::CuSeqlensQ) || is(t, Role::CuSeqlensKv)) {
      t.name = is(t, Role::CuSeqlensQ) ? "seq_len_q" : "seq_len_kv";
      t.dims = {f.B};
    }
    if (q_side || kv_side || is(t, Role::CuSeqlensQ) || is(t, Role::CuSeqlensKv))
      t.strides = TensorDesc::packed_strides(t.dims);
    g.add_tensor(t);
  }
  SdpaOp twin = op;
  for (auto [offsets, lens] :
       {std::pair{Role::CuSeqlensQ, Role::SeqLenQ}, std::pair{Role::CuSeqlensKv, Role::SeqLenKv}}) {
    if (!op.operand(offsets)) continue;
    twin.operands[static_cast<int>(lens)] = op.operand(offsets);
    twin.operands[static_cast<int>(offsets)].reset();
  }
  twin.attributes.max_seqlen_q.reset();
  twin.attributes.max_seqlen_kv.reset();
  (void)g.set_op(twin);  // the caller validates (Plan::build)
  return g;
}

// The twin's inputs holding the ragged inputs' sequences: sequence b's tokens become batch b's rows (the rows
// past a length hold unrelated values), the lengths the offsets' differences, every other tensor the same bytes.
inline testing::TrialInputs padded_inputs(const Graph& ragged, const Facts& rf, const testing::TrialInputs& rin,
                                          const Graph& padded) {
  testing::TrialInputs out = testing::make_inputs(padded, rin.seed + 1);
  const SdpaOp &rop = *ragged.op();
  auto same_tensor = [&](Role r) {
    return !(rf.ragged_q && (r == Role::Q || r == Role::CuSeqlensQ)) &&
           !(rf.ragged_kv && (r == Role::K || r == Role::V || r == Role::CuSeqlensKv));
  };
  for (int r = 0; r < kRoleCount; ++r)
    if (rop.operands[r] && same_tensor(static_cast<Role>(r)) && rin.tensors.count(*rop.operands[r]))
      out.tensors[*rop.operands[r]] = rin.tensors.at(*rop.operands[r]);
  for (int64_t b = 0; b < rf.B; ++b) {
    const reference::SeqExtent q = reference::q_extent(ragged, rf, rin.tensors, b);
    const reference::SeqExtent kv = reference::kv_extent(ragged, rf, rin.tensors, b);
    for (auto [side, lens, e] :
         {std::tuple{rf.ragged_q, Role::SeqLenQ, q}, std::tuple{rf.ragged_kv, Role::SeqLenKv, kv}})
      if (side)
        reference::store_element(DataType::INT32, out.tensors.at(padded.operand(lens)->uid).data(), b,
                                 static_cast<double>(e.length));
    for (auto [role, e] : {std::pair{Role::Q, q}, std::pair{Role::K, kv}, std::pair{Role::V, kv}}) {
      if (role == Role::Q ? !rf.ragged_q : !rf.ragged_kv) continue;
      const TensorDesc &from = *ragged.operand(role), &to = *padded.operand(role);
      const int64_t eb = bits_of(from.dtype) / 8;  // Q, K and V are 8- or 16-bit
      for (int64_t h = 0; h < from.dims[1]; ++h)
        for (int64_t i = 0; i < e.length; ++i)
          for (int64_t d = 0; d < from.dims[3]; ++d)
            std::memcpy(out.tensors.at(to.uid).data() + reference::offset_of(to, b, h, i, d) * eb,
                        rin.tensors.at(from.uid).data() + reference::seq_offset(from, e, h, i, d) * eb,
                        static_cast<size_t>(eb));
    }
  }
  return out;
}

// The rows at which the ragged plan's `role` output (O or Stats) and the twin's differ in any byte: each
// sequence's rows, read at its tokens in the ragged output and at batch b in the twin's. Returns the count and,
// in `first`, the first such row.
inline int64_t rows_differing(const Graph& ragged, const Facts& rf, const testing::TrialInputs& rin,
                              const reference::HostTensors& ragged_out, const Graph& padded,
                              const reference::HostTensors& padded_out,
                              Role role, std::string& first) {
  const TensorDesc &r = *ragged.operand(role), &p = *padded.operand(role);
  const int64_t eb = bits_of(r.dtype) / 8;  // O of 8, 16 or 32 bits, Stats FP32
  int64_t differing = 0;
  for (int64_t b = 0; b < rf.B; ++b) {
    const reference::SeqExtent q = reference::q_extent(ragged, rf, rin.tensors, b);
    const int64_t rows = std::min(std::max<int64_t>(q.length, 0), rf.S_q);
    for (int64_t h = 0; h < r.dims[1]; ++h)
      for (int64_t i = 0; i < rows; ++i) {
        bool same = true;
        for (int64_t d = 0; d < r.dims[3] && same; ++d)
          same = std::memcmp(ragged_out.at(r.uid).data() + reference::seq_offset(r, q, h, i, d) * eb,
                             padded_out.at(p.uid).data() + reference::offset_of(p, b, h, i, d) * eb,
                             static_cast<size_t>(eb)) == 0;
        if (!same && differing++ == 0)
          first = "sequence " + std::to_string(b) + " head " + std::to_string(h) + " row " + std::to_string(i);
      }
  }
  return differing;
}

// The bytes of a ragged Q side's output (O or Stats) at tokens outside every sequence that are not the poison
// (0xFF) the harness wrote before the run: a kernel must leave them alone (they belong to no sequence, or to
// another batch's). Returns the count and, in `first`, the first such token.
inline int64_t foreign_tokens_written(const Graph& ragged, const Facts& rf, const testing::TrialInputs& rin,
                                      const reference::HostTensors& out, Role role, std::string& first) {
  const TensorDesc& t = *ragged.operand(role);
  const int64_t eb = bits_of(t.dtype) / 8, T = t.dims[2];
  std::vector<bool> owned(static_cast<size_t>(T), false);
  for (int64_t b = 0; b < rf.B; ++b) {
    const reference::SeqExtent e = reference::q_extent(ragged, rf, rin.tensors, b);
    const int64_t rows = std::min(std::max<int64_t>(e.length, 0), rf.S_q);
    for (int64_t i = 0; i < rows; ++i) owned[static_cast<size_t>(e.first + i)] = true;
  }
  int64_t written = 0;
  for (int64_t tok = 0; tok < T; ++tok) {
    if (owned[static_cast<size_t>(tok)]) continue;
    bool poisoned = true;
    for (int64_t h = 0; h < t.dims[1] && poisoned; ++h)
      for (int64_t d = 0; d < t.dims[3] && poisoned; ++d) {
        const uint8_t* at = out.at(t.uid).data() + reference::offset_of(t, 0, h, tok, d) * eb;
        for (int64_t k = 0; k < eb; ++k) poisoned = poisoned && at[k] == 0xFF;
      }
    if (!poisoned && written++ == 0) first = "token " + std::to_string(tok);
  }
  return written;
}

}  // namespace rime::test
