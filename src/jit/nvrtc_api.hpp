// Internal: NVRTC, opened at run time (dlopen) like the CUDA driver, so that the library, the CLI and the Python
// module load on a machine without the toolkit's libraries; only a compile needs NVRTC.
#pragma once

#include <nvrtc.h>

#include <string>

#include "rime/status.hpp"

namespace rime::jit {

struct NvrtcApi {
  decltype(&::nvrtcVersion) nvrtcVersion;
  decltype(&::nvrtcCreateProgram) nvrtcCreateProgram;
  decltype(&::nvrtcDestroyProgram) nvrtcDestroyProgram;
  decltype(&::nvrtcAddNameExpression) nvrtcAddNameExpression;
  decltype(&::nvrtcCompileProgram) nvrtcCompileProgram;
  decltype(&::nvrtcGetProgramLogSize) nvrtcGetProgramLogSize;
  decltype(&::nvrtcGetProgramLog) nvrtcGetProgramLog;
  decltype(&::nvrtcGetLoweredName) nvrtcGetLoweredName;
  decltype(&::nvrtcGetCUBINSize) nvrtcGetCUBINSize;
  decltype(&::nvrtcGetCUBIN) nvrtcGetCUBIN;
  decltype(&::nvrtcGetErrorString) nvrtcGetErrorString;
};

// The API, opened once: $RIME_NVRTC_LIBRARY when set, else libnvrtc.so.13 / libnvrtc.so through the loader's
// search path, else the toolkit's /usr/local/cuda/lib64 (the `nvidia-cuda-nvrtc` wheel's library is found by the
// Python package, which sets RIME_NVRTC_LIBRARY). nullptr when none loads; nvrtc_status() says why.
const NvrtcApi* nvrtc();
// CompileFailed naming every place it looked, or Ok.
Status nvrtc_status();

}  // namespace rime::jit
