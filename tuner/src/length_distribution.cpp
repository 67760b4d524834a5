#include "splitkv/tuner/length_distribution.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "splitkv/tuner/grid_spec.hpp"
#include "splitkv/tuner/sha256.hpp"

namespace splitkv::tuner {
namespace {

// Portable generator (std::uniform_int_distribution differs between standard libraries, and
// the lengths must not): FNV-1a of the shape key seeds splitmix64.
std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform on [lo, hi] (the modulo bias is below 2^-32 for these ranges).
  std::int32_t between(std::int32_t lo, std::int32_t hi) {
    return lo + static_cast<std::int32_t>(next() % static_cast<std::uint64_t>(hi - lo + 1));
  }

 private:
  std::uint64_t state_;
};

// The key without the split count and without anything but the shape, so every split
// count, kernel and process of a shape draws the same batch.
std::uint64_t seed_of(const SweepPoint& point) { return fnv1a(point.shape_key()); }

std::vector<std::int32_t> generate(const SweepPoint& point, const LengthFile* file) {
  const int batch = std::max(point.batch, 0);
  const std::int32_t max_length = std::max(point.context_len, 1);
  std::vector<std::int32_t> lengths(batch, max_length);
  SplitMix64 random(seed_of(point));
  std::int32_t file_max = 1;
  if (file) {
    for (std::int32_t length : file->lengths) file_max = std::max(file_max, length);
  }
  for (int b = 1; b < batch; ++b) {
    switch (point.length_distribution.kind) {
      case LengthKind::fixed:
        break;
      case LengthKind::uniform:
        lengths[b] = random.between(std::max(1, max_length / 8), max_length);
        break;
      case LengthKind::long_tail:
        lengths[b] = random.between(1, std::max(1, max_length / 16));
        break;
      case LengthKind::file: {
        const std::int32_t drawn = file->lengths[random.next() % file->lengths.size()];
        const double scaled = std::round(double(drawn) * double(max_length) / double(file_max));
        lengths[b] = static_cast<std::int32_t>(std::clamp(scaled, 1.0, double(max_length)));
        break;
      }
    }
  }
  return lengths;
}

}  // namespace

std::vector<std::int32_t> parse_length_file(std::string_view text, const std::string& source) {
  std::vector<std::int32_t> lengths;
  std::size_t start = 0;
  int line_number = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    ++line_number;
    std::string line(text.substr(start, end - start));
    start = end + 1;
    if (const std::size_t hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) {
      if (end == text.size()) break;
      continue;
    }
    const auto last = line.find_last_not_of(" \t\r");
    const std::string token = line.substr(first, last - first + 1);
    if (token.find_first_not_of("0123456789") != std::string::npos) {
      throw GridError(fmt::format("{}:{}: \"{}\" is not a length (expected one positive integer per line)",
                                  source, line_number, token));
    }
    errno = 0;
    const long long value = std::strtoll(token.c_str(), nullptr, 10);
    if (errno == ERANGE || value < 1 || value > (1 << 30)) {
      throw GridError(fmt::format("{}:{}: length {} is out of range [1, {}]", source, line_number, token, 1 << 30));
    }
    lengths.push_back(static_cast<std::int32_t>(value));
    if (end == text.size()) break;
  }
  if (lengths.empty()) throw GridError(fmt::format("{}: holds no lengths (one positive integer per line)", source));
  return lengths;
}

LengthFile load_length_file(const std::string& name, const std::string& path, const std::string& field) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    throw GridError(fmt::format("{}: length file \"{}\": {}", field, path,
                                std::filesystem::exists(path, error) ? "is not a regular file" : "no such file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw GridError(fmt::format("{}: length file \"{}\": cannot open: {}", field, path, std::strerror(errno)));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  LengthFile file;
  file.name = name;
  file.path = path;
  file.sha256 = sha256_hex(bytes.str());
  try {
    file.lengths = parse_length_file(bytes.str(), path);
  } catch (const GridError& e) {
    throw GridError(fmt::format("{}: {}", field, e.what()));
  }
  return file;
}

bool file_free_lengths(const SweepPoint& point, std::vector<std::int32_t>* out) {
  if (point.length_distribution.kind == LengthKind::file) return false;
  *out = generate(point, nullptr);
  return true;
}

std::vector<std::int32_t> sequence_lengths(const SweepPoint& point, const LengthFiles& files) {
  if (point.length_distribution.kind != LengthKind::file) return generate(point, nullptr);
  const auto it = files.find(point.length_distribution.file);
  if (it == files.end() || it->second.lengths.empty()) {
    throw GridError(fmt::format("length distribution \"{}\": no length file named \"{}\" (add it to the "
                                "grid's \"length_files\")",
                                to_string(point.length_distribution), point.length_distribution.file));
  }
  return generate(point, &it->second);
}

}  // namespace splitkv::tuner
