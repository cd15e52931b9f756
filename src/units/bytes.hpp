// Internal: byte sizes written by people ("2147483648", "512M", "1G"), for RIME_CACHE_MAX_BYTES and the CLI.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rime {

// Digits, optionally followed by one binary unit K, M, G or T (2^10 .. 2^40; "KiB"-style spellings K, KB, KiB
// are all accepted). No sign, no fraction, no exponent, no spaces; at most INT64_MAX. nullopt otherwise.
std::optional<int64_t> parse_bytes(std::string_view text);

// "2147483648 (2 GiB)": the exact value and, when it is a whole number of a unit, that unit.
std::string describe_bytes(int64_t bytes);

}  // namespace rime
