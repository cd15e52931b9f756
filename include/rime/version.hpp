#pragma once

namespace rime {
// The library version; part of every plan-cache key.
inline constexpr const char* kVersion = "0.1.0";
}  // namespace rime
