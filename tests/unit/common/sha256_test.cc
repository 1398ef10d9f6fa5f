// SHA-256 against the FIPS 180-4 / NIST example vectors, across block boundaries and chunked
// updates, and of a file against the same bytes in memory.
#include "common/sha256.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace medprof {
namespace {

TEST(Sha256, MatchesTheNistExampleVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, ChunkedUpdatesGiveTheSameDigestAsOneUpdate) {
  std::string data;
  for (int i = 0; i < 1000; ++i) data.push_back(static_cast<char>(i * 7));
  for (size_t len : {55u, 56u, 63u, 64u, 65u, 119u, 120u, 1000u}) {
    const std::string whole = Sha256Hex(data.substr(0, len));
    Sha256 chunked;
    for (size_t at = 0; at < len; at += 13) chunked.Update(data.substr(at, std::min<size_t>(13, len - at)));
    EXPECT_EQ(chunked.HexDigest(), whole) << "length " << len;
  }
}

TEST(Sha256, AFileHashesAsItsBytesAndAMissingFileNamesThePath) {
  const std::string path = ::testing::TempDir() + "/sha256_test.bin";
  std::string data(3 << 20, 'x');
  data[12345] = 'y';
  std::ofstream(path, std::ios::binary) << data;
  auto hex = Sha256OfFile(path);
  ASSERT_TRUE(hex.ok()) << hex.status();
  EXPECT_EQ(*hex, Sha256Hex(data));
  EXPECT_TRUE(IsSha256Hex(*hex));
  auto missing = Sha256OfFile(path + ".absent");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("sha256_test.bin.absent"), std::string::npos);
}

TEST(Sha256, HexCheckAcceptsOnlySixtyFourLowercaseHexDigits) {
  EXPECT_TRUE(IsSha256Hex(std::string(64, 'a')));
  EXPECT_FALSE(IsSha256Hex(std::string(63, 'a')));
  EXPECT_FALSE(IsSha256Hex(std::string(64, 'A')));
  EXPECT_FALSE(IsSha256Hex(std::string(63, 'a') + "g"));
}

}  // namespace
}  // namespace medprof
