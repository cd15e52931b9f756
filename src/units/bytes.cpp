#include "units/bytes.hpp"

#include <fmt/format.h>

#include <limits>

namespace rime {

std::optional<int64_t> parse_bytes(std::string_view s) {
  size_t i = 0;
  int64_t value = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    if (__builtin_mul_overflow(value, int64_t{10}, &value) || __builtin_add_overflow(value, int64_t{s[i] - '0'}, &value))
      return std::nullopt;
    ++i;
  }
  if (i == 0) return std::nullopt;
  std::string_view unit = s.substr(i);
  int shift = 0;
  if (!unit.empty()) {
    switch (unit[0]) {
      case 'K': case 'k': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T': shift = 40; break;
      default: return std::nullopt;
    }
    unit.remove_prefix(1);
    if (!(unit.empty() || unit == "B" || unit == "iB")) return std::nullopt;
  }
  if (shift && value > (std::numeric_limits<int64_t>::max() >> shift)) return std::nullopt;
  return value << shift;
}

std::string describe_bytes(int64_t bytes) {
  const char* units[] = {"TiB", "GiB", "MiB", "KiB"};
  const int shifts[] = {40, 30, 20, 10};
  for (int u = 0; u < 4; ++u)
    if (bytes > 0 && bytes % (int64_t{1} << shifts[u]) == 0)
      return fmt::format("{} ({} {})", bytes, bytes >> shifts[u], units[u]);
  return std::to_string(bytes);
}

}  // namespace rime
