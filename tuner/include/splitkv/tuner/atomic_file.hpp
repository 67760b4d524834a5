// Output files that are either complete or absent: write a temporary file next to the
// target, fsync it, rename it over the target, fsync the folder. A crash or a failed write
// never leaves a half-written header or report behind.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace splitkv::tuner {

class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Creates missing parent folders. Throws OutputError naming the path and the reason.
void write_file_atomically(const std::string& path, std::string_view bytes);

// A file's bytes; `exists` is false (and `bytes` empty) when there is no such regular file.
struct FileContents {
  bool exists = false;
  std::string bytes;
};
FileContents read_file_if_exists(const std::string& path);

}  // namespace splitkv::tuner
