// Tensors in and out of `rime run` as NumPy .npy files (docs/cli.md), so that users can compare rime with their
// own model on the same data.
//
// A tensor is stored dense in its logical dims, C order, whatever its strides in the graph. Types NumPy has
// are stored as themselves (FP32 <f4, FP16 <f2, INT32 <i4, INT64 <i8); the others as their raw codes: BF16 as
// uint16 (<u2), FP8_E4M3 / FP8_E5M2 / FP8_E8M0 as uint8 (|u1), FP4_E2M1 as uint8 holding two values per byte
// (element 2j in the low nibble), so its last dim is halved. `tensors.json` beside the files names each one's
// rime dtype, role, logical dims and stored dtype and shape.
#pragma once

#include <string>
#include <vector>

#include "rime/graph.hpp"
#include "rime/status.hpp"
#include "testing/reference/sdpa.hpp"

namespace rime::testing {

// The .npy dtype and shape a tensor is stored with.
struct NpyLayout {
  std::string descr;           // "<f4", "|u1", ...
  std::vector<int64_t> shape;  // the logical dims (FP4: last dim halved)
};
NpyLayout npy_layout(const TensorDesc& t);

// One .npy file's bytes for `t` from its strided host copy `bytes` (as reference::HostTensors holds it).
std::string npy_encode(const TensorDesc& t, const std::vector<uint8_t>& bytes);
// The strided host copy of `t` from a .npy file's bytes: InvalidArgument naming the tensor when the dtype,
// shape or size does not match, or the file is not .npy (C order, version 1-3). Bytes of `bytes` that the
// tensor's strides skip keep their value.
Status npy_decode(const TensorDesc& t, const std::string& file_bytes, std::vector<uint8_t>& bytes);

// Every input of the graph whose file DIR/<name>.npy exists replaces the generated one in `tensors`; `read`
// lists those names.
Status read_npy_inputs(const Graph& graph, const std::string& dir, reference::HostTensors& tensors,
                       std::vector<std::string>& read);
// Writes DIR/<name>.npy for every tensor in `tensors` (inputs and outputs alike) and DIR/tensors.json.
Status write_npy_tensors(const Graph& graph, const std::string& dir, const reference::HostTensors& tensors);

}  // namespace rime::testing
