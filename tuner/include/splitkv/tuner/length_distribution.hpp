// Real lengths of a sweep point's batch: one deterministic generator, seeded from the shape
// key, so every process, kernel and resume times the same batch. Every distribution pins
// sequence 0 at context_len, so the batch's max (what a host-side policy sees as max_seqlen,
// and what the contiguous cache's rotating copies are spaced by) is context_len.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "splitkv/tuner/sweep_point.hpp"

namespace splitkv::tuner {

// A file of real lengths named in a grid's "length_files": one integer per line, blank
// lines and '#' comments allowed.
struct LengthFile {
  std::string name;    // the <name> of "file:<name>"
  std::string path;    // resolved (relative to the grid file's folder)
  std::string sha256;  // of the file's bytes; the sidecar records it
  std::vector<std::int32_t> lengths;
};
using LengthFiles = std::map<std::string, LengthFile>;

// Parses the text of a length file. Throws GridError "<source>:<line>: <reason>" for a line
// that is not a positive integer, and "<source>: ..." for a file without lengths.
std::vector<std::int32_t> parse_length_file(std::string_view text, const std::string& source);
// Reads, hashes and parses one file. Errors name `field` (the grid's JSON path) and the path.
LengthFile load_length_file(const std::string& name, const std::string& path, const std::string& field);

// Lengths of every sequence, in [1, context_len], sequence 0 == context_len:
//   fixed      every sequence context_len
//   uniform    uniform on [max(1, L/8), L]
//   long_tail  the rest uniform on [1, max(1, L/16)]
//   file:<n>   draws from the file's lengths, scaled so the file's max maps to L, clipped to [1, L]
// Throws GridError when a file distribution names a file `files` lacks.
std::vector<std::int32_t> sequence_lengths(const SweepPoint& point, const LengthFiles& files);

// The generated lengths of distributions that need no file (fixed, uniform, long_tail);
// false for a file distribution.
bool file_free_lengths(const SweepPoint& point, std::vector<std::int32_t>* out);

}  // namespace splitkv::tuner
