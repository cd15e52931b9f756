#include "rime/device.hpp"

#include <fmt/format.h>

#include <cctype>

namespace rime {

std::string DeviceDesc::arch_name() const { return fmt::format("sm_{}{}", arch, arch_specific ? "a" : ""); }

Result<DeviceDesc> DeviceDesc::from_arch(std::string_view text, int sm_count) {
  DeviceDesc d = h200();
  std::string_view s = text;
  if (s.substr(0, 3) == "sm_") s.remove_prefix(3);
  bool specific = false;
  if (!s.empty() && s.back() == 'a') {
    specific = true;
    s.remove_suffix(1);
  }
  int value = 0;
  if (s.empty() || s.size() > 3)
    return Status(StatusCode::InvalidArgument, fmt::format("bad arch '{}' (expected e.g. sm_90a, sm_89)", text));
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c)))
      return Status(StatusCode::InvalidArgument, fmt::format("bad arch '{}' (expected e.g. sm_90a, sm_89)", text));
    value = value * 10 + (c - '0');
  }
  if (value < 50 || value > 130)
    return Status(StatusCode::InvalidArgument, fmt::format("arch '{}' is outside sm_50..sm_130", text));
  if (sm_count < 1 || sm_count > 1024)
    return Status(StatusCode::InvalidArgument, fmt::format("SM count {} is outside 1..1024", sm_count));
  d.arch = value;
  d.arch_specific = specific;
  d.sm_count = sm_count;
  d.name = "given by --arch/--sms";
  return d;
}

}  // namespace rime
