// Internal: NCCL, opened at run time with dlopen as the CUDA driver is (runtime/driver.hpp), so that the library and
// the CLI build and run without it; only a context-parallel plan needs it. The few types of its C API are declared
// here with NCCL's ABI (nccl.h's enums and the opaque communicator), so no NCCL header is needed to build either.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string>

#include "rime/status.hpp"

namespace rime::nccl {

using Comm = void*;  // ncclComm_t
enum Result : int { kSuccess = 0 };
enum DataType : int { kUint8 = 1, kFloat32 = 7 };  // ncclUint8, ncclFloat32
// ncclUniqueId: 128 opaque bytes.
struct UniqueId {
  char internal[128];
};

struct Api {
  Result (*ncclGetVersion)(int*);
  const char* (*ncclGetErrorString)(Result);
  Result (*ncclCommCount)(Comm, int*);
  Result (*ncclCommUserRank)(Comm, int*);
  Result (*ncclCommCuDevice)(Comm, int*);
  Result (*ncclAllGather)(const void*, void*, size_t, DataType, Comm, CUstream);
  Result (*ncclSend)(const void*, size_t, DataType, int, Comm, CUstream);
  Result (*ncclRecv)(void*, size_t, DataType, int, Comm, CUstream);
  Result (*ncclGroupStart)();
  Result (*ncclGroupEnd)();
  // For callers that make their own communicators (tests, a launcher): rime never creates one behind a plan.
  Result (*ncclGetUniqueId)(UniqueId*);
  Result (*ncclCommInitRank)(Comm*, int, UniqueId, int);
  Result (*ncclCommInitAll)(Comm*, int, const int*);
  Result (*ncclCommDestroy)(Comm);
};

// NCCL's entry points, loaded once from $RIME_NCCL_LIBRARY when set, else libnccl.so.2 on the loader's path;
// nullptr when it did not load (load_status() then says where it looked and why).
const Api* api();
Status load_status();
// NCCL's version as ncclGetVersion gives it (e.g. 22703 for 2.27.3), 0 when it did not load.
int version();

// Wraps an NCCL result into a Status (CudaError) naming the call.
Status check(Result result, const char* what);

}  // namespace rime::nccl
