#include "client/client.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace medprof::client {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::HasSubstr;

TEST(IsLoopbackAddress, OnlyAddressesThatStayOnTheHost) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1:7000"));
  EXPECT_TRUE(IsLoopbackAddress("127.3.2.1:1"));
  EXPECT_TRUE(IsLoopbackAddress("localhost:7000"));
  EXPECT_TRUE(IsLoopbackAddress("LocalHost:7000"));
  EXPECT_TRUE(IsLoopbackAddress("[::1]:7000"));
  EXPECT_TRUE(IsLoopbackAddress("unix:/run/medprof.sock"));
  EXPECT_TRUE(IsLoopbackAddress("dns:///localhost:7000"));
  EXPECT_TRUE(IsLoopbackAddress("ipv4:127.0.0.1:7000"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.1:7000"));
  EXPECT_FALSE(IsLoopbackAddress("128.0.0.1:7000"));
  EXPECT_FALSE(IsLoopbackAddress("0.0.0.0:7000"));
  EXPECT_FALSE(IsLoopbackAddress("medprof.example.org:443"));
  EXPECT_FALSE(IsLoopbackAddress("localhost.example.org:443"));
  EXPECT_FALSE(IsLoopbackAddress("127.0.0.1.example.org:443"));
  EXPECT_FALSE(IsLoopbackAddress("[2001:db8::1]:443"));
  EXPECT_FALSE(IsLoopbackAddress("[::]:7000"));
}

TEST(UsesTls, PlaintextOnlyToLoopbackWithoutCa) {
  ConnectionOptions o;
  o.server = "127.0.0.1:7000";
  EXPECT_FALSE(UsesTls(o));
  o.tls_ca_file = "/etc/medprof/ca.pem";
  EXPECT_TRUE(UsesTls(o));
  o.tls_ca_file.clear();
  o.server = "medprof.example.org:443";
  EXPECT_TRUE(UsesTls(o));  // system roots
}

TEST(FromGrpcStatus, KeepsCodeAndNamesServerCallAndCause) {
  absl::Status s = FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "Connection refused"),
                                  "127.0.0.1:7000", "ListStudies", 30);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "server 127.0.0.1:7000 unreachable (UNAVAILABLE): Connection refused");

  s = FromGrpcStatus(grpc::Status(grpc::StatusCode::NOT_FOUND, "no run r-9"), "h:1", "GetRun", 30);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "server h:1: GetRun failed (NOT_FOUND): no run r-9");

  s = FromGrpcStatus(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded"), "h:1", "Compare", 5);
  EXPECT_EQ(s.message(),
            "server h:1: Compare got no answer within 5 s (DEADLINE_EXCEEDED): Deadline Exceeded (raise --timeout-s)");

  s = FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing token"), "h:1", "SubmitStudy", 5);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(s.message()), HasSubstr("(UNAUTHENTICATED): missing token (set MEDPROF_TOKEN"));

  s = FromGrpcStatus(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, ""), "h:1", "SubmitStudy", 5);
  EXPECT_EQ(s.message(), "server h:1: SubmitStudy failed (INVALID_ARGUMENT): (no message)");

  EXPECT_THAT(FromGrpcStatus(grpc::Status::OK, "h:1", "X", 1), IsOk());
}

std::string TempFile(const std::string& name, const std::string& content) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << content;
  return path;
}

TEST(Connect, LocalFilesAreCheckedBeforeAnyCall) {
  ConnectionOptions o;
  o.server = "127.0.0.1:7000";
  o.tls_ca_file = "/nonexistent/ca.pem";
  EXPECT_THAT(MedprofClient::Connect(o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tls-ca /nonexistent/ca.pem: cannot open")));

  o.tls_ca_file = TempFile("not_a_cert.pem", "hello\n");
  EXPECT_THAT(MedprofClient::Connect(o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a PEM file")));

  o.tls_ca_file.clear();
  o.token_file = TempFile("empty_token", "\n\n");
  EXPECT_THAT(MedprofClient::Connect(o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("holds no token on its first line")));

  o.token_file = TempFile("bad_token", "  abc123  \nsecond line\n");
  EXPECT_THAT(MedprofClient::Connect(o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bad_token: no mpt_ prefix")));
  o.token_file = TempFile("token", "  mpt_0123456789ab_cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc  \nsecond line\n");
  auto c = MedprofClient::Connect(o);
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ((*c)->server(), "127.0.0.1:7000");
}

TEST(Connect, RemoteAddressUsesTlsWithSystemRoots) {
  ConnectionOptions o;
  o.server = "medprof.example.org:443";
  auto c = MedprofClient::Connect(o);  // no dialing yet
  ASSERT_THAT(c, IsOk());
}

}  // namespace
}  // namespace medprof::client
