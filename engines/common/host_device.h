// Marks functions that the kernels (NVRTC) and the host launchers (g++) both call, so that a layout is
// computed by one function on both sides. No includes: NVRTC compiles it with no host headers.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define RIME_HOST_DEVICE __host__ __device__
#else
#define RIME_HOST_DEVICE
#endif
