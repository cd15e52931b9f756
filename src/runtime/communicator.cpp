// rime/communicator.hpp: NCCL communicators made for a caller (rime.torch.NcclCommunicator), over the loader of
// runtime/nccl.hpp.
#include "rime/communicator.hpp"

#include <cstring>

#include "runtime/driver.hpp"
#include "runtime/nccl.hpp"
#include "status_macros.hpp"

namespace rime {

static_assert(sizeof(NcclUniqueId::bytes) == sizeof(nccl::UniqueId::internal), "ncclUniqueId is 128 bytes");

Result<NcclUniqueId> nccl_unique_id() {
  RIME_RETURN_IF_ERROR(nccl::load_status());
  nccl::UniqueId id{};
  RIME_RETURN_IF_ERROR(nccl::check(nccl::api()->ncclGetUniqueId(&id), "ncclGetUniqueId"));
  NcclUniqueId out{};
  std::memcpy(out.bytes, id.internal, sizeof(out.bytes));
  return out;
}

Result<void*> nccl_comm_init_rank(const NcclUniqueId& id, int world, int rank, int device_ordinal) {
  RIME_RETURN_IF_ERROR(nccl::load_status());
  Result<CUcontext> ctx = driver::primary_context(device_ordinal);
  if (!ctx.ok()) return ctx.status();
  const driver::ScopedContext in_ctx(ctx.value());  // NCCL takes the current GPU as the rank's
  RIME_RETURN_IF_ERROR(in_ctx.status());
  nccl::UniqueId nid{};
  std::memcpy(nid.internal, id.bytes, sizeof(id.bytes));
  nccl::Comm comm = nullptr;
  RIME_RETURN_IF_ERROR(nccl::check(nccl::api()->ncclCommInitRank(&comm, world, nid, rank), "ncclCommInitRank"));
  return static_cast<void*>(comm);
}

Status nccl_comm_destroy(void* comm) {
  RIME_RETURN_IF_ERROR(nccl::load_status());
  return nccl::check(nccl::api()->ncclCommDestroy(static_cast<nccl::Comm>(comm)), "ncclCommDestroy");
}

}  // namespace rime
