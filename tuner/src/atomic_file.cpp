#include "splitkv/tuner/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace splitkv::tuner {
namespace {

namespace fs = std::filesystem;

void fsync_directory(const fs::path& directory) {
  const int fd = ::open(directory.empty() ? "." : directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);  // makes the rename durable; best effort, some filesystems refuse
    ::close(fd);
  }
}

// What a write into `path` needs before any byte is written.
void check_target(const std::string& path) {
  const std::string kind = non_regular_file_kind(path);
  if (!kind.empty()) {
    throw OutputError(fmt::format("{}: exists and is {}, not a regular file; give a file path", path, kind));
  }
  const fs::path parent = fs::path(path).parent_path();
  std::error_code error;
  // A missing folder is the caller's typo more often than a wish: every command refuses it
  // (a report folder, which is an output of its own, is created by its command first).
  if (!parent.empty() && !fs::is_directory(parent, error))
    throw OutputError(fmt::format("{}: folder {} does not exist; create it first", path, parent.string()));
}

bool holds_exactly(const std::string& path, std::string_view bytes) {
  std::error_code error;
  if (!fs::is_regular_file(path, error) || fs::file_size(path, error) != bytes.size() || error) return false;
  const FileContents current = read_file_if_exists(path);
  return current.exists && current.bytes == bytes;
}

}  // namespace

std::string non_regular_file_kind(const std::string& path) {
  std::error_code error;
  switch (fs::status(path, error).type()) {
    case fs::file_type::not_found:
    case fs::file_type::none:
    case fs::file_type::regular:
      return "";
    case fs::file_type::directory:
      return "a folder";
    case fs::file_type::character:
      return "a character device";
    case fs::file_type::block:
      return "a block device";
    case fs::file_type::fifo:
      return "a fifo";
    case fs::file_type::socket:
      return "a socket";
    default:
      return "not a plain file";
  }
}

namespace {

// write_file_atomically once check_target(path) has passed.
WriteResult write_checked_target(const std::string& path, std::string_view bytes) {
  if (holds_exactly(path, bytes)) return WriteResult::unchanged;
  // The user named `path`, so every message leads with it; the temporary file is secondary.
  const std::string temp = fmt::format("{}.tmp.{}", path, ::getpid());
  const auto fail = [&](const char* what, int failure) {
    ::unlink(temp.c_str());
    return OutputError(fmt::format("{}: {}: {} (temporary file {})", path, what, std::strerror(failure), temp));
  };
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int failure = errno;
    throw OutputError(
        fmt::format("{}: cannot create the temporary file {}: {}", path, temp, std::strerror(failure)));
  }
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int failure = errno;
      ::close(fd);
      throw fail("write failed", failure);
    }
    written += std::size_t(n);
  }
  if (::fsync(fd) != 0) {
    const int failure = errno;
    ::close(fd);
    throw fail("fsync failed", failure);
  }
  if (::close(fd) != 0) throw fail("close failed", errno);
  if (::rename(temp.c_str(), path.c_str()) != 0) throw fail("cannot rename into place", errno);
  fsync_directory(fs::path(path).parent_path());
  return WriteResult::written;
}

}  // namespace

WriteResult write_file_atomically(const std::string& path, std::string_view bytes) {
  check_target(path);
  return write_checked_target(path, bytes);
}

std::map<std::string, WriteResult> write_files_atomically(const std::map<std::string, std::string>& files) {
  for (const auto& [path, bytes] : files) check_target(path);
  std::map<std::string, WriteResult> results;
  for (const auto& [path, bytes] : files) results[path] = write_checked_target(path, bytes);
  return results;
}

FileContents read_file_if_exists(const std::string& path) {
  FileContents out;
  std::error_code error;
  if (!fs::is_regular_file(path, error)) return out;
  std::ifstream in(path, std::ios::binary);
  if (!in) return out;
  std::ostringstream bytes;
  bytes << in.rdbuf();
  out.exists = true;
  out.bytes = bytes.str();
  return out;
}

}  // namespace splitkv::tuner
