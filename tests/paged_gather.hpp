// Paged K/V in the tests: the dense equivalent of a paged graph's inputs, for comparing a paged plan (or the
// paged reference) with the dense one on the same data.
#pragma once

#include <cstring>

#include "graph/geometry.hpp"
#include "testing/reference/formats.hpp"
#include "testing/reference/sdpa.hpp"
#include "testing/trial.hpp"

namespace rime::test {

// `dense` is `paged` with K and V as [B, H_kv, S_kv, D] and no page table, every other tensor under the same uid.
// Returns its inputs: the paged inputs with K and V gathered through the page table (keys past a sequence's
// length zero). `gathered` counts the (sequence, key) rows copied; a page id outside the pool makes it -1.
inline testing::TrialInputs gather_paged_inputs(const Graph& paged, const Graph& dense, const testing::TrialInputs& in,
                                                int64_t& gathered) {
  testing::TrialInputs out = in;
  const TensorDesc &table = *paged.operand(Role::PageTable), &lens = *paged.operand(Role::SeqLenKv);
  out.tensors.erase(table.uid);
  gathered = 0;
  for (Role role : {Role::K, Role::V}) {
    const TensorDesc &pool = *paged.operand(role), &flat = *dense.operand(role);
    const int64_t num_pages = pool.dims[0], page = pool.dims[2], heads = pool.dims[1], d = pool.dims[3];
    const int64_t eb = bits_of(pool.dtype) / 8;  // K and V are 8- or 16-bit
    std::vector<uint8_t>& bytes = out.tensors[flat.uid];
    bytes.assign(static_cast<size_t>(tensor_storage_bytes(flat)), 0);
    for (int64_t b = 0; b < table.dims[0]; ++b) {
      const auto len = static_cast<int64_t>(
          reference::load_element(DataType::INT32, in.tensors.at(lens.uid).data(), b * lens.strides[0]));
      for (int64_t j = 0; j < len; ++j) {
        const auto id = static_cast<int64_t>(reference::load_element(
            DataType::INT32, in.tensors.at(table.uid).data(), b * table.strides[0] + (j / page) * table.strides[1]));
        if (id < 0 || id >= num_pages) {
          gathered = -1;
          return out;
        }
        for (int64_t h = 0; h < heads; ++h)
          std::memcpy(bytes.data() + reference::offset_of(flat, b, h, j, 0) * eb,
                      in.tensors.at(pool.uid).data() + reference::offset_of(pool, id, h, j % page, 0) * eb,
                      static_cast<size_t>(d * eb));
        if (role == Role::K) ++gathered;
      }
    }
  }
  return out;
}

}  // namespace rime::test
