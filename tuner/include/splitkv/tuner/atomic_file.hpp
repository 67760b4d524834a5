// Output files that are either complete or absent: write a temporary file next to the
// target, fsync it, rename it over the target, fsync the folder. A crash or a failed write
// never leaves a half-written header or report behind.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <string_view>

namespace splitkv::tuner {

class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Empty when `path` is missing or a regular file (through symlinks); else what is there ("a
// folder", "a character device", "a fifo", ...). The rename would replace that node with a file.
std::string non_regular_file_kind(const std::string& path);

enum class WriteResult { written, unchanged };

// A target that already holds exactly `bytes` is left alone (same mtime), so that the build
// rules depending on a generated header do not rerun. Refuses a missing folder and a target
// that is not a regular file. Throws OutputError naming `path` and the reason.
WriteResult write_file_atomically(const std::string& path, std::string_view bytes);

// Path -> bytes, each written as above once every target has been checked, so that one target
// that cannot be replaced leaves the others untouched too.
std::map<std::string, WriteResult> write_files_atomically(const std::map<std::string, std::string>& files);

// A file's bytes; `exists` is false (and `bytes` empty) when there is no such regular file.
struct FileContents {
  bool exists = false;
  std::string bytes;
};
FileContents read_file_if_exists(const std::string& path);

}  // namespace splitkv::tuner
