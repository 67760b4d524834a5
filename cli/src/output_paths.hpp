// Checks every subcommand makes on a file it is about to write, before any work: a file whose
// folder does not exist is a typo in the command line (exit 2), not a folder to invent.
#pragma once

#include <filesystem>
#include <ostream>
#include <string>

namespace splitkv::cli {

// False (and a message naming the command, the option and the folder) when `path`'s folder is
// missing. An empty path is no output and passes.
inline bool output_folder_exists(const std::string& path, const char* command, const char* option,
                                 std::ostream& err) {
  if (path.empty()) return true;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ignored;
  if (parent.empty() || std::filesystem::is_directory(parent, ignored)) return true;
  err << "splitkv " << command << ": " << option << " " << path << ": folder " << parent.string()
      << " does not exist; create it first\n";
  return false;
}

}  // namespace splitkv::cli
