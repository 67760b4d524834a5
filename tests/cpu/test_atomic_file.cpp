#include "splitkv/heuristics/atomic_file.hpp"

#include <filesystem>

#include <gtest/gtest.h>

#include "tuner_test_support.hpp"

namespace splitkv::heuristics {
namespace {

using splitkv::testing::read_text;
using splitkv::testing::ScopedTempDir;

TEST(AtomicFile, WritesReplacesAndLeavesNoTemporaries) {
  ScopedTempDir dir;
  const std::string path = dir.file("deep/er/out.txt");
  EXPECT_THROW(write_file_atomically(path, "first\n"), OutputError);  // a missing folder is refused
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "deep"));
  std::filesystem::create_directories(dir.path() / "deep/er");
  write_file_atomically(path, "first\n");
  EXPECT_EQ(read_text(path), "first\n");
  write_file_atomically(path, "second\n");
  EXPECT_EQ(read_text(path), "second\n");
  int entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path() / "deep/er")) {
    (void)entry;
    ++entries;
  }
  EXPECT_EQ(entries, 1);
  const FileContents contents = read_file_if_exists(path);
  EXPECT_TRUE(contents.exists);
  EXPECT_EQ(contents.bytes, "second\n");
  EXPECT_FALSE(read_file_if_exists(dir.file("none")).exists);
}

TEST(AtomicFile, RefusesAFolder) {
  ScopedTempDir dir;
  EXPECT_THROW(write_file_atomically(dir.path().string(), "x"), OutputError);
}

}  // namespace
}  // namespace splitkv::heuristics
