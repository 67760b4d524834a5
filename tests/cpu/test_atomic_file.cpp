#include "splitkv/heuristics/atomic_file.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <map>

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

// The rename would put a regular file where /dev/full or a fifo was.
TEST(AtomicFile, RefusesAFifoAndLeavesItInPlace) {
  ScopedTempDir dir;
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_EQ(tuner::non_regular_file_kind(fifo), "a fifo");
  EXPECT_EQ(tuner::non_regular_file_kind("/dev/null"), "a character device");
  EXPECT_EQ(tuner::non_regular_file_kind(dir.path().string()), "a folder");
  EXPECT_EQ(tuner::non_regular_file_kind(dir.file("none")), "");
  try {
    write_file_atomically(fifo, "x");
    ADD_FAILURE() << "a fifo was replaced";
  } catch (const OutputError& error) {
    EXPECT_NE(std::string(error.what()).find(fifo + ": exists and is a fifo"), std::string::npos) << error.what();
  }
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
}

// A generated header rewritten with its own bytes would get a new mtime and rebuild its dependents.
TEST(AtomicFile, LeavesAFileWithTheSameBytesAlone) {
  ScopedTempDir dir;
  const std::string path = dir.file("out.hpp");
  EXPECT_EQ(write_file_atomically(path, "same\n"), tuner::WriteResult::written);
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  EXPECT_EQ(write_file_atomically(path, "same\n"), tuner::WriteResult::unchanged);
  struct stat after {};
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);  // no rename happened
  EXPECT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  EXPECT_EQ(write_file_atomically(path, "same\nmore\n"), tuner::WriteResult::written);
  EXPECT_EQ(read_text(path), "same\nmore\n");
  EXPECT_EQ(write_file_atomically(path, "same\n"), tuner::WriteResult::written);  // shorter: rewritten too
  EXPECT_EQ(read_text(path), "same\n");
}

TEST(AtomicFile, WritesNoneOfSeveralFilesWhenOneTargetIsRefused) {
  ScopedTempDir dir;
  const std::string fifo = dir.file("b_pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const std::map<std::string, std::string> files{{dir.file("a.csv"), "a\n"}, {fifo, "b\n"}, {dir.file("c.md"), "c\n"}};
  EXPECT_THROW(tuner::write_files_atomically(files), OutputError);
  EXPECT_FALSE(std::filesystem::exists(dir.file("a.csv")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("c.md")));
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));

  const std::string kept = dir.file("kept.csv");
  tuner::write_files_atomically({{kept, "k\n"}, {dir.file("new.csv"), "n\n"}});
  const auto results = tuner::write_files_atomically({{kept, "k\n"}, {dir.file("new.csv"), "n2\n"}});
  EXPECT_EQ(results.at(kept), tuner::WriteResult::unchanged);
  EXPECT_EQ(results.at(dir.file("new.csv")), tuner::WriteResult::written);
}

}  // namespace
}  // namespace splitkv::heuristics
