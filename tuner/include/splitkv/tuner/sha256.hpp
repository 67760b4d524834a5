// SHA-256 of grid files, so a sidecar pins the exact grid a CSV was measured with and a
// resume can refuse a grid that changed underneath it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace splitkv::tuner {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, std::size_t size);
  void update(std::string_view text) { update(text.data(), text.size()); }
  // Finishes the hash; the object must not be updated afterwards.
  std::array<std::uint8_t, 32> digest();
  std::string hex_digest();

 private:
  void compress(const std::uint8_t* block);

  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t total_bytes_ = 0;
};

std::string sha256_hex(std::string_view bytes);

// Hash of a file's bytes; throws std::runtime_error naming the file when it cannot be read.
std::string sha256_file_hex(const std::string& path);

}  // namespace splitkv::tuner
