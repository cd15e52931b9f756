// Test graphs built in C++: tensors added under uids 1, 2, ... (the order of the calls), with packed strides
// unless given. Shared by the CPU and GPU tests' graph builders.
#pragma once

#include <utility>
#include <vector>

#include "rime/graph.hpp"

namespace rime::test {

struct TensorAdder {
  Graph& graph;
  int64_t uid = 0;
  // Returns the new tensor's uid.
  int64_t operator()(const char* name, std::vector<int64_t> dims, DataType type, bool output = false,
                     std::vector<int64_t> strides = {}) {
    if (strides.empty()) strides = TensorDesc::packed_strides(dims);
    return graph.add_tensor({name, ++uid, std::move(dims), std::move(strides), type, output});
  }
};

}  // namespace rime::test
