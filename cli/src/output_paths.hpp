// Checks every subcommand makes on a file it is about to write, before any work: a file whose
// folder does not exist is a typo in the command line (exit 2), not a folder to invent, and a
// device, fifo or folder in its place is not something to rename a file over.
#pragma once

#include <filesystem>
#include <map>
#include <ostream>
#include <string>

#include "splitkv/tuner/atomic_file.hpp"

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

// False (and a message) when `path` exists but is not a regular file: writing would replace
// /dev/full or a fifo with a file, and reading it (fit --check) could block.
inline bool output_not_special(const std::string& path, const char* command, const char* option,
                               std::ostream& err) {
  if (path.empty()) return true;
  const std::string kind = tuner::non_regular_file_kind(path);
  if (kind.empty()) return true;
  err << "splitkv " << command << ": " << option << " " << path << ": exists and is " << kind
      << ", not a regular file; give a file path\n";
  return false;
}

inline bool output_path_usable(const std::string& path, const char* command, const char* option,
                               std::ostream& err) {
  return output_folder_exists(path, command, option, err) && output_not_special(path, command, option, err);
}

// One line per file written; a file that already held its bytes was left alone (its mtime too).
inline void print_written(const std::map<std::string, tuner::WriteResult>& results, std::ostream& out) {
  for (const auto& [path, result] : results) {
    if (result == tuner::WriteResult::unchanged) {
      out << "unchanged " << path << " (it already held these bytes; not rewritten)\n";
    } else {
      out << "wrote     " << path << "\n";
    }
  }
}

}  // namespace splitkv::cli
