// Internal: the checked-indices mode of Plan::execute (ExecuteOptions::check_indices).
#pragma once

#include <mutex>

#include "engine.hpp"
#include "rime/inspect/facts.hpp"
#include "rime/status.hpp"
#include "runtime/driver.hpp"

namespace rime {

// The check kernel of one plan, compiled (through the kernel cache) and loaded on its first checked execute.
struct IndexChecker {
  std::once_flag once;
  Status load_status;
  CUfunction function = nullptr;
};

// Verifies, in stream order, the per-sequence lengths and the page ids the kernels will read (docs/graph-json.md
// says what they must hold). Synchronises the stream and allocates one 8-byte word: a debugging mode, not
// capturable in a CUDA graph. InvalidArgument naming the first bad entry, its value and its bound. The check kernel
// is loaded into `ctx`, the plan's context, which the caller has made current. `kv_length`: the keys K and V hold in
// this execute (the graph's S_kv, or ExecuteOptions::kv_extent's length).
Status check_indices(IndexChecker& checker, const Facts& facts, const engines::RoleBuffers& buffers,
                     CUstream stream, CUcontext ctx, int64_t kv_length);

}  // namespace rime
