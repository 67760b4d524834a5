#include "splitkv/tuner/sha256.hpp"

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "tuner_test_support.hpp"

namespace splitkv::tuner {
namespace {

// FIPS 180-2 / NIST example vectors.
TEST(Sha256, MatchesPublishedVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklm"
                       "nopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Lengths around the 55/56/64-byte padding boundaries, where off-by-one bugs live
// (reference digests from Python's hashlib).
TEST(Sha256, PaddingBoundaries) {
  const std::pair<int, const char*> cases[] = {
      {55, "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072"},
      {56, "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e"},
      {63, "75220b47218278e656f2013bb8f0c455a25eaf01e86c64924e9d48d89776d6f2"},
      {64, "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c"},
      {65, "9537c5fdf120482f7d58d25e9ed583f52c02b4e304ea814db1633ad565aed7e9"},
      {119, "000b48d4edf0fa7bee3c6236ecd2785baa5db4eeb8bb54341b029e0d9fa5fb0c"},
      {120, "13f05a0b594787f5ecd315edc96141bd3243203d1b7d4f0836f37308b276ba98"},
  };
  for (const auto& [length, digest] : cases) {
    EXPECT_EQ(sha256_hex(std::string(std::size_t(length), 'x')), digest) << "length " << length;
  }
}

TEST(Sha256, IncrementalUpdatesEqualOneShot) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += char('a' + i % 26);
  for (std::size_t chunk : {1u, 3u, 63u, 64u, 65u, 127u}) {
    Sha256 hash;
    for (std::size_t at = 0; at < text.size(); at += chunk) {
      hash.update(std::string_view(text).substr(at, chunk));
    }
    EXPECT_EQ(hash.hex_digest(), sha256_hex(text)) << "chunk " << chunk;
  }
}

TEST(Sha256, HashesFileBytesAndNamesAMissingFile) {
  testing::ScopedTempDir dir;
  const std::string path = dir.file("grid.json");
  testing::write_text(path, "abc");
  EXPECT_EQ(sha256_file_hex(path), sha256_hex("abc"));
  try {
    sha256_file_hex(dir.file("missing.json"));
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("missing.json: cannot open"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace splitkv::tuner
