// Internal: how the prefill ring (rime/ring.hpp) moves K/V between its steps, so that tests can run every rank's
// part of a ring of several ranks on one GPU (NCCL takes no two ranks on one GPU).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <unordered_map>

#include "rime/ring.hpp"
#include "rime/status.hpp"

namespace rime {

// The transfer of one ring step, queued on `stream`: send the K/V this rank holds at step `step` to rank + 1 and
// receive into recv_k / recv_v what it holds at step + 1 (rank - 1's, from it).
class RingTransport {
 public:
  virtual ~RingTransport() = default;
  virtual Status exchange(int step, const void* send_k, const void* send_v, void* recv_k, void* recv_v,
                          size_t k_bytes, size_t v_bytes, CUstream stream) const = 0;
};

struct RingInternals {
  // RingPlan::prepare without the communicator (a ring whose transport is not NCCL's).
  static Status prepare_without_communicator(RingPlan& ring, int device_ordinal);
  static Status prepare(RingPlan& ring, int device_ordinal, bool check_communicator);
  // RingPlan::execute with `transport` in place of NCCL's.
  static Status execute(const RingPlan& ring, const std::unordered_map<int64_t, void*>& buffers, void* workspace,
                        void* stream, const RingTransport& transport);
};

}  // namespace rime
