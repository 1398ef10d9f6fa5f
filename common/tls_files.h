// TLS material checked before use: the one place that reads PEM certificates and keys for the
// server, the agent and the CLI, and says in words what is wrong with them.
//
// CheckKeyCert() parses a certificate chain and a private key and checks that the key is the
// certificate's, that the first (leaf) certificate is valid now (not before its notBefore, not
// after its notAfter) and, when a CA bundle is given, that the leaf chains to it (through the
// other certificates of the chain file). CheckCaBundle() checks that a CA file holds at least
// one certificate and that none of them has expired. Every message starts with the flag and
// the file it is about ("--tls-key server.key: does not match the certificate of --tls-cert
// server.crt"); no message contains key material.
//
// OpenSSL (libcrypto) behind this header; a separate library (medprof_tls) so that the
// worker, which never speaks TLS, does not link it. Pure functions; thread-safe.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace medprof::tls {

// A PEM file as read from disk, with the flag that named it (for messages).
struct PemFile {
  std::string flag;  // "--tls-cert"
  std::string path;
  std::string pem;
};

// Reads `path`. FAILED_PRECONDITION "<flag> <path>: cannot open (<errno text>)" or "...: not a
// PEM file (no -----BEGIN line)".
absl::StatusOr<PemFile> ReadPemFile(const std::string& flag, const std::string& path);

// See the header comment. `ca` may be null (no chain check). FAILED_PRECONDITION naming the
// file and the cause.
absl::Status CheckKeyCert(const PemFile& cert, const PemFile& key, const PemFile* ca);

// At least one certificate, none expired. FAILED_PRECONDITION naming the file and the cause.
absl::Status CheckCaBundle(const PemFile& ca);

// The client side (agent, CLI): the CA that signed the server certificate and, for mutual TLS,
// the client's certificate and key, read and checked (CheckCaBundle, CheckKeyCert). Empty paths
// are skipped; cert and key go together. FAILED_PRECONDITION naming the flag, file and cause.
struct ClientPems {
  std::string ca, cert, key;  // PEM texts ("" where no path was given)
};
absl::StatusOr<ClientPems> LoadClientFiles(const std::string& ca_path, const std::string& cert_path,
                                           const std::string& key_path);

// "CN=localhost, valid until 2126-11-08 11:49:04 UTC" for the leaf of `cert_pem` (log lines);
// "" when it does not parse.
std::string DescribeLeaf(const std::string& cert_pem);

}  // namespace medprof::tls
