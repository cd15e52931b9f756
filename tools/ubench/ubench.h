// What the GPU microbenchmarks of tools/ubench share.
#pragma once

#include <cstdio>
#include <cstdlib>

// Stops at the first CUDA error, naming the call (a failed launch must not print a figure).
#define UBENCH_CHECK(call)                                       \
  do {                                                           \
    const cudaError_t e = (call);                                \
    if (e != cudaSuccess) {                                      \
      fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e)); \
      exit(1);                                                   \
    }                                                            \
  } while (0)
