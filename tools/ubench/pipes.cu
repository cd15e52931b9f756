// Throughput of the instructions a FP8 attention softmax issues per score, on the GPU it runs on: MUFU.EX2
// (ex2.approx.ftz.f32), the FP8 pack F2FP (cvt.rn.satfinite.e4m3x2.f32), FFMA and FMNMX alone, and the softmax's
// per-score mix (FFMA -> EX2 -> FADD, FMNMX) with and without the pack, for 1 to 4 warps per SM sub-partition; and
// the latency of one dependent FFMA -> EX2 step. Each thread runs 8 independent chains, so all but the latency are
// throughputs: per SM per clock, from clock64 over the loop (one CTA per SM). Results: docs/perf-history.md (v18).
//   nvcc -arch=sm_90a -O3 -o pipes tools/ubench/pipes.cu && ./pipes
#include <cstdio>

#include "ubench.h"

constexpr int kIters = 4096, kChains = 8;

template <int kOp>
__global__ void pipe_kernel(float* out, long long* cycles, float seed) {
  float x[kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c) x[c] = seed * (threadIdx.x + c + 1) * 1e-3f;
  unsigned acc = 0;
  float sum[kChains] = {}, mx[kChains] = {}, prev = 0.f;
  __syncthreads();
  const long long t0 = clock64();
  for (int i = 0; i < kIters; ++i) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) {
      if constexpr (kOp == 0) {  // MUFU.EX2
        asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x[c]));
      } else if constexpr (kOp == 1) {  // F2FP: two floats to two E4M3
        unsigned short r;
        asm volatile("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(x[c]), "f"(x[(c + 1) % kChains]));
        acc += r;
        asm volatile("" : "+f"(x[c]));
      } else if constexpr (kOp == 2) {  // FFMA
        asm volatile("fma.rn.f32 %0, %0, 0f3F800001, 0f3A83126F;" : "+f"(x[c]));
      } else if constexpr (kOp == 3) {  // FMNMX
        asm volatile("max.f32 %0, %0, 0f3A83126F;" : "+f"(x[c]));
        asm volatile("" : "+f"(x[c]));
      } else if constexpr (kOp == 4 || kOp == 5) {
        // One score of the softmax: the exponent's FFMA, EX2, the row sum's FADD, the row max's FMNMX, each
        // chain independent of the others (as a thread's 64 scores of a tile are); kOp 5 also packs every pair.
        const float t = x[c];
        float e;
        asm volatile("fma.rn.f32 %0, %1, 0f3F000000, 0fBF800000;" : "=f"(e) : "f"(t));
        asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(e));
        asm volatile("add.f32 %0, %0, %1;" : "+f"(sum[c]) : "f"(e));
        asm volatile("max.f32 %0, %0, %1;" : "+f"(mx[c]) : "f"(t));
        asm volatile("fma.rn.f32 %0, %0, 0f3F800001, 0f3A83126F;" : "+f"(x[c]));  // the next score
        if (kOp == 5 && c % 2 == 1) {
          unsigned short r;
          asm volatile("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(e), "f"(prev));
          acc += r;
        }
        prev = e;
      } else {  // kOp 6: latency of one dependent FFMA -> EX2 step (chain 0 only carries work)
        if (c == 0) {
          asm volatile("fma.rn.f32 %0, %0, 0f3F000000, 0fBF800000;" : "+f"(x[0]));
          asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x[0]));
        }
      }
    }
  }
  const long long t1 = clock64();
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < kChains; ++c) s += x[c] + sum[c] + mx[c];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s + float(acc);
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

template <int kOp>
void run(const char* name, int sms, int warps_per_sm) {
  float* out;
  long long* cycles;
  const int threads = 32 * warps_per_sm;
  UBENCH_CHECK(cudaMalloc(&out, sizeof(float) * sms * threads));
  UBENCH_CHECK(cudaMalloc(&cycles, sizeof(long long) * sms));
  pipe_kernel<kOp><<<sms, threads>>>(out, cycles, 1.f);  // warm-up
  pipe_kernel<kOp><<<sms, threads>>>(out, cycles, 1.f);
  UBENCH_CHECK(cudaGetLastError());
  long long c[1024];
  UBENCH_CHECK(cudaMemcpy(c, cycles, sizeof(long long) * sms, cudaMemcpyDeviceToHost));
  long long mx = 0;
  for (int i = 0; i < sms; ++i) mx = c[i] > mx ? c[i] : mx;
  // Per SM (one CTA per SM); the latency test (6) counts its one step per iteration per thread.
  const double ops = double(threads) * kIters * (kOp == 6 ? 1 : kChains);
  if (kOp == 6)
    printf("%-28s warps/SM %2d: %7.2f cycles per FFMA -> EX2 step\n", name, warps_per_sm, double(mx) / kIters);
  else
    printf("%-28s warps/SM %2d: %7.2f per SM per clock (%lld cycles)\n", name, warps_per_sm, ops / double(mx), mx);
  cudaFree(out);
  cudaFree(cycles);
}

int main() {
  int sms = 0;
  UBENCH_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  if (sms > 1024) sms = 1024;  // the cycle counts are read into an array of 1024
  run<6>("latency: ffma -> ex2", sms, 4);
  for (int w : {4, 8, 16}) {
    run<0>("ex2.approx (MUFU.EX2)", sms, w);
    run<1>("cvt e4m3x2 (F2FP)", sms, w);
    run<2>("fma (FFMA)", sms, w);
    run<3>("max (FMNMX)", sms, w);
  }
  // The softmax's mix with one to four warps per SM sub-partition (the FP8 kernels run one or two consumer warps
  // per sub-partition in a softmax at a time).
  for (int w : {4, 8, 12, 16}) {
    run<4>("score: ffma ex2 fadd fmnmx", sms, w);
    run<5>("score + pack per pair", sms, w);
  }
  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}
