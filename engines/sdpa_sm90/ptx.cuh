// sdpa_sm90: the PTX the kernel's roles speak, one wrapper each: mbarriers (the ring's full/empty signals), TMA
// loads, named barriers (the consumers' turns), proxy fences, the wgmma group protocol and register reallocation.
#pragma once

#include "common/device.cuh"

namespace rime_dev {
namespace sm90 {

__device__ __forceinline__ void mbar_init(u64* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
// Adds `bytes` to the barrier's expected transaction count and arrives once (the producer, before its TMA).
__device__ __forceinline__ void mbar_expect_tx(u64* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u64* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(u64* bar, unsigned parity) {
  u32 done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(smem_addr(bar)), "r"(parity)
      : "memory");
  return done != 0;
}
// Waits until the phase of parity `parity` has completed (a fresh barrier is in phase 0: parity 1 passes).
__device__ __forceinline__ void mbar_wait(u64* bar, unsigned parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}
// One box of a 4-D tensor map (coordinates innermost first, in elements) into shared memory; completes on bar.
__device__ __forceinline__ void tma_load_4d(void* dst, const RimeTensorMap* map, int c0, int c1, int c2, int c3,
                                            u64* bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar))
      : "memory");
}
__device__ __forceinline__ void prefetch_tensor_map(const RimeTensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<u64>(map)) : "memory");
}
__device__ __forceinline__ void named_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_fence_all() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit_group() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Ties every accumulator register to this point: after a wgmma wait, the compiler may not move reads or writes
// of the accumulators above it (they would race with the asynchronous wgmma).
template <int M>
__device__ __forceinline__ void fence_operands(float (&x)[M][4]) {
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(x[m][e])::"memory");
}
// The producer gives registers back (to kRegs per thread) and the consumers take them (rime_sm90::producer_regs,
// consumer_regs): warpgroup-wide, before either touches the registers it gives up or takes.
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs) : "memory");
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs) : "memory");
}
// Makes barrier initializations visible to the async proxy (the TMA's complete_tx) and to the other threads.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

}  // namespace sm90
}  // namespace rime_dev
