// tls_files: the checks the server runs before it listens (and at every renewal), and the
// agent and CLI before they dial: parse, key matches certificate, validity dates, chain to a CA.
#include "common/tls_files.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace medprof::tls {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

PemFile Data(const std::string& flag, const std::string& name) {
  const std::string path = std::string(MEDPROF_TLS_TESTDATA) + "/" + name;
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return PemFile{flag, name, s.str()};
}

// A self-signed EC certificate valid from now+from_days to now+to_days, and its key.
std::pair<PemFile, PemFile> SelfSigned(long from_days, long to_days) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 7);
  X509_gmtime_adj(X509_getm_notBefore(x), from_days * 86400);
  X509_gmtime_adj(X509_getm_notAfter(x), to_days * 86400);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("dated"), -1, -1, 0);
  X509_set_issuer_name(x, X509_get_subject_name(x));
  X509_set_pubkey(x, key);
  X509_sign(x, key, EVP_sha256());
  auto pem = [](auto write) {
    BIO* bio = BIO_new(BIO_s_mem());
    write(bio);
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio, &data);
    std::string out(data, static_cast<size_t>(n));
    BIO_free(bio);
    return out;
  };
  PemFile cert{"--tls-cert", "dated.crt", pem([&](BIO* b) { PEM_write_bio_X509(b, x); })};
  PemFile k{"--tls-key", "dated.key",
            pem([&](BIO* b) { PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr); })};
  X509_free(x);
  EVP_PKEY_free(key);
  return {cert, k};
}

TEST(TlsFiles, AMatchingValidPairPasses) {
  EXPECT_THAT(CheckKeyCert(Data("--tls-cert", "server.crt"), Data("--tls-key", "server.key"), nullptr), IsOk());
  EXPECT_THAT(CheckCaBundle(Data("--tls-ca", "ca.crt")), IsOk());
  EXPECT_THAT(DescribeLeaf(Data("--tls-cert", "server.crt").pem),
              HasSubstr("CN=localhost, valid until 2126-11-08"));
}

TEST(TlsFiles, AKeyOfAnotherCertificateIsRefusedWithoutShowingIt) {
  const PemFile key = Data("--tls-key", "client.key");
  const absl::Status s = CheckKeyCert(Data("--tls-cert", "server.crt"), key, nullptr);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kFailedPrecondition,
                          HasSubstr("--tls-key client.key: does not match the certificate of --tls-cert server.crt "
                                    "(/CN=localhost)")));
  EXPECT_THAT(std::string(s.message()), Not(HasSubstr("PRIVATE")));
}

TEST(TlsFiles, AKeyGivenAsTheCertificateIsRefused) {
  EXPECT_THAT(CheckKeyCert(Data("--tls-cert", "server.key"), Data("--tls-key", "server.key"), nullptr),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("--tls-cert server.key: holds no PEM certificate (is it the key?)")));
  EXPECT_THAT(CheckKeyCert(Data("--tls-cert", "server.crt"), Data("--tls-key", "server.crt"), nullptr),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("--tls-key server.crt: holds no readable PEM private key")));
}

TEST(TlsFiles, ExpiredAndNotYetValidCertificatesAreRefusedWithTheirDate) {
  auto [expired, expired_key] = SelfSigned(-10, -1);
  EXPECT_THAT(CheckKeyCert(expired, expired_key, nullptr),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("--tls-cert dated.crt: /CN=dated is expired on 20")));
  auto [future, future_key] = SelfSigned(2, 10);
  EXPECT_THAT(CheckKeyCert(future, future_key, nullptr),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("is not valid before 20")));
  expired.flag = "--tls-client-ca";
  EXPECT_THAT(CheckCaBundle(expired), StatusIs(absl::StatusCode::kFailedPrecondition,
                                               HasSubstr("--tls-client-ca dated.crt: /CN=dated is expired on")));
  auto [fresh, fresh_key] = SelfSigned(-1, 10);
  EXPECT_THAT(CheckKeyCert(fresh, fresh_key, nullptr), IsOk());
}

TEST(TlsFiles, ACertificateMustChainToTheGivenCa) {
  const PemFile ca = Data("--tls-ca", "ca.crt");
  EXPECT_THAT(CheckKeyCert(Data("--tls-cert", "client.crt"), Data("--tls-key", "client.key"), &ca), IsOk());
  const PemFile other = Data("--tls-ca", "other-ca.crt");
  EXPECT_THAT(CheckKeyCert(Data("--tls-cert", "client.crt"), Data("--tls-key", "client.key"), &other),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("--tls-cert client.crt: does not chain to --tls-ca other-ca.crt: "
                                 "unable to get local issuer certificate")));
}

TEST(TlsFiles, UnreadableFilesAreNamed) {
  EXPECT_THAT(ReadPemFile("--tls-cert", "/nonexistent/x.crt"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("--tls-cert /nonexistent/x.crt: cannot open (No such file or directory)")));
}

}  // namespace
}  // namespace medprof::tls
