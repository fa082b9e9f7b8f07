// A fast 64-bit non-cryptographic hash (wyhash-style multiply-fold) for cache keys and checksums.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace zero::text::detail {

__extension__ typedef unsigned __int128 uint128;

inline std::uint64_t mix64(std::uint64_t a, std::uint64_t b) {
  const uint128 product = static_cast<uint128>(a) * b;
  return static_cast<std::uint64_t>(product) ^ static_cast<std::uint64_t>(product >> 64);
}

inline std::uint64_t read64(const unsigned char* p) {
  std::uint64_t value;
  std::memcpy(&value, p, sizeof(value));
  return value;
}

// Stable across runs and machines of the same endianness (the cache files record it).
inline std::uint64_t hash_bytes(const void* data, std::size_t size_bytes, std::uint64_t seed = 0) {
  constexpr std::uint64_t k0 = 0xa0761d6478bd642full, k1 = 0xe7037ed1a0b428dbull,
                          k2 = 0x8ebc6af09c88c6e3ull, k3 = 0x589965cc75374cc3ull;
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = seed ^ mix64(seed ^ k0, static_cast<std::uint64_t>(size_bytes) ^ k1);
  std::size_t left = size_bytes;
  while (left >= 16) {
    h = mix64(read64(p) ^ k0 ^ h, read64(p + 8) ^ k1);
    p += 16;
    left -= 16;
  }
  std::uint64_t a = 0, b = 0;
  if (left > 8) {
    a = read64(p);
    std::memcpy(&b, p + 8, left - 8);
  } else if (left > 0) {
    std::memcpy(&a, p, left);
  }
  h = mix64(a ^ k2 ^ h, b ^ k3 ^ left);
  return mix64(h ^ k0, static_cast<std::uint64_t>(size_bytes) ^ k3);
}

inline std::uint64_t hash_string(std::string_view text, std::uint64_t seed = 0) {
  return hash_bytes(text.data(), text.size(), seed);
}

inline std::uint64_t hash_combine(std::uint64_t seed, std::uint64_t value) {
  return mix64(seed ^ 0x9e3779b97f4a7c15ull, value ^ 0xbf58476d1ce4e5b9ull);
}

}  // namespace zero::text::detail
