// NCCL communicators for callers that have none to give a context-parallel plan or a RingPlan (a torch.distributed
// group exposes none; rime.torch.NcclCommunicator makes one over it): one rank makes the unique id, every rank
// receives it over any channel, and each joins on its GPU. NCCL is opened at run time (RIME_NCCL_LIBRARY, else
// libnccl.so.2), as for context-parallel plans; without it each call is CudaError saying where it looked.
#pragma once

#include "rime/status.hpp"

namespace rime {

// ncclUniqueId: 128 opaque bytes.
struct NcclUniqueId {
  char bytes[128];
};

Result<NcclUniqueId> nccl_unique_id();
// Joins rank `rank` of `world` to the communicator of `id` on GPU `device_ordinal` (NCCL takes the current GPU as
// the rank's: that GPU's primary context is made current for the call). Collective: returns once every rank has
// joined. The ncclComm_t.
Result<void*> nccl_comm_init_rank(const NcclUniqueId& id, int world, int rank, int device_ordinal);
Status nccl_comm_destroy(void* comm);

}  // namespace rime
