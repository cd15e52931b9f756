// The GPU a plan is made for (SPEC section 7): given, not queried, so that Facts and plans can be made on a
// machine without a GPU.
#pragma once

#include <string>
#include <string_view>

#include "rime/status.hpp"

namespace rime {

struct DeviceDesc {
  int arch = 90;                     // compute capability x 10 (sm_90 -> 90)
  bool arch_specific = true;         // the "a" targets (sm_90a) that enable wgmma/setmaxnreg
  int sm_count = 132;                // H200 SXM
  int smem_per_block = 227 * 1024;   // opt-in dynamic shared memory per block (H100/H200)
  int smem_per_sm = 228 * 1024;      // shared memory per SM (H100/H200)
  std::string name = "NVIDIA H200";  // documentation only

  // The documented default: an H200 (sm_90a, 132 SMs).
  static DeviceDesc h200() { return DeviceDesc{}; }
  // "sm_90a", "sm_89", ...
  std::string arch_name() const;
  // Parses "sm_90a", "sm_89", "90" (InvalidArgument otherwise). Fills arch and arch_specific; keeps the rest.
  static Result<DeviceDesc> from_arch(std::string_view arch, int sm_count);
};

}  // namespace rime
