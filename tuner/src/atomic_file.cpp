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

}  // namespace

void write_file_atomically(const std::string& path, std::string_view bytes) {
  const fs::path target(path);
  std::error_code error;
  if (fs::is_directory(target, error)) throw OutputError(fmt::format("{}: is a folder, not a file", path));
  const fs::path parent = target.parent_path();
  // A missing folder is the caller's typo more often than a wish: every command refuses it
  // (a report folder, which is an output of its own, is created by its command first).
  if (!parent.empty() && !fs::is_directory(parent, error))
    throw OutputError(fmt::format("{}: folder {} does not exist; create it first", path, parent.string()));
  const std::string temp = fmt::format("{}.tmp.{}", path, ::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw OutputError(fmt::format("{}: cannot create: {}", temp, std::strerror(errno)));
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int failure = errno;
      ::close(fd);
      ::unlink(temp.c_str());
      throw OutputError(fmt::format("{}: write failed: {}", temp, std::strerror(failure)));
    }
    written += std::size_t(n);
  }
  if (::fsync(fd) != 0) {
    const int failure = errno;
    ::close(fd);
    ::unlink(temp.c_str());
    throw OutputError(fmt::format("{}: fsync failed: {}", temp, std::strerror(failure)));
  }
  if (::close(fd) != 0) {
    const int failure = errno;
    ::unlink(temp.c_str());
    throw OutputError(fmt::format("{}: close failed: {}", temp, std::strerror(failure)));
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int failure = errno;
    ::unlink(temp.c_str());
    throw OutputError(fmt::format("{}: cannot rename into place: {}", path, std::strerror(failure)));
  }
  fsync_directory(parent);
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
