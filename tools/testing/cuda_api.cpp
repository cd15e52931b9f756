#include "testing/cuda_api.hpp"

namespace rime::testing {

const CudaApi* cuda() { return driver::ensure_context().ok() ? driver::api() : nullptr; }

// The library's words for a missing driver or GPU, else the context's.
Status cuda_status() { return driver::ensure_context(); }

}  // namespace rime::testing
