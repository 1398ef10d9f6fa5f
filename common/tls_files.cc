#include "common/tls_files.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace medprof::tls {
namespace {

struct BioFree { void operator()(BIO* b) const { BIO_free(b); } };
struct X509Free { void operator()(X509* x) const { X509_free(x); } };
struct KeyFree { void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); } };
struct StoreFree { void operator()(X509_STORE* s) const { X509_STORE_free(s); } };
struct StoreCtxFree { void operator()(X509_STORE_CTX* c) const { X509_STORE_CTX_free(c); } };
struct StackFree { void operator()(STACK_OF(X509)* s) const { sk_X509_free(s); } };
using X509Ptr = std::unique_ptr<X509, X509Free>;

absl::Status Bad(const PemFile& f, absl::string_view why) {
  return absl::FailedPreconditionError(absl::StrCat(f.flag, " ", f.path, ": ", why));
}

// OpenSSL's reason for the last failure ("no start line"), and the error queue cleared.
std::string OpensslReason() {
  const unsigned long e = ERR_peek_last_error();
  const char* reason = e != 0 ? ERR_reason_error_string(e) : nullptr;
  ERR_clear_error();
  return reason != nullptr ? reason : "unknown reason";
}

std::unique_ptr<BIO, BioFree> MemBio(const std::string& pem) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// Every certificate of a PEM file, in order.
std::vector<X509Ptr> ReadCerts(const std::string& pem) {
  std::vector<X509Ptr> out;
  auto bio = MemBio(pem);
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) out.emplace_back(x);
  ERR_clear_error();  // the read that ends the loop always fails
  return out;
}

std::string AsnTime(const ASN1_TIME* t) {
  struct tm tm {};
  if (ASN1_TIME_to_tm(t, &tm) != 1) return "an unreadable date";
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

// Empty when `x` is valid now; else why not.
std::string ValidityProblem(X509* x) {
  if (X509_cmp_current_time(X509_get0_notBefore(x)) > 0) {
    return absl::StrCat("not valid before ", AsnTime(X509_get0_notBefore(x)));
  }
  if (X509_cmp_current_time(X509_get0_notAfter(x)) < 0) {
    return absl::StrCat("expired on ", AsnTime(X509_get0_notAfter(x)));
  }
  return std::string();
}

std::string Subject(X509* x) {
  char buf[256] = {};
  X509_NAME_oneline(X509_get_subject_name(x), buf, sizeof(buf) - 1);
  return buf;
}

absl::Status CheckChain(const std::vector<X509Ptr>& chain, const PemFile& cert, const PemFile& ca) {
  std::vector<X509Ptr> roots = ReadCerts(ca.pem);
  if (roots.empty()) return Bad(ca, "holds no PEM certificate");
  std::unique_ptr<X509_STORE, StoreFree> store(X509_STORE_new());
  for (const X509Ptr& r : roots) X509_STORE_add_cert(store.get(), r.get());
  std::unique_ptr<STACK_OF(X509), StackFree> intermediates(sk_X509_new_null());
  for (size_t i = 1; i < chain.size(); ++i) sk_X509_push(intermediates.get(), chain[i].get());
  std::unique_ptr<X509_STORE_CTX, StoreCtxFree> ctx(X509_STORE_CTX_new());
  if (!store || !intermediates || !ctx ||
      X509_STORE_CTX_init(ctx.get(), store.get(), chain[0].get(), intermediates.get()) != 1) {
    return Bad(cert, absl::StrCat("cannot set up the chain check: ", OpensslReason()));
  }
  if (X509_verify_cert(ctx.get()) != 1) {
    return Bad(cert, absl::StrCat("does not chain to ", ca.flag, " ", ca.path, ": ",
                                  X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()))));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PemFile> ReadPemFile(const std::string& flag, const std::string& path) {
  PemFile f{flag, path, ""};
  if (const int err = ReadWholeFile(path, &f.pem); err != 0) {
    return Bad(f, absl::StrCat("cannot open (", std::strerror(err), ")"));
  }
  if (f.pem.find("-----BEGIN") == std::string::npos) return Bad(f, "not a PEM file (no -----BEGIN line)");
  return f;
}

absl::Status CheckKeyCert(const PemFile& cert, const PemFile& key, const PemFile* ca) {
  std::vector<X509Ptr> chain = ReadCerts(cert.pem);
  if (chain.empty()) return Bad(cert, "holds no PEM certificate (is it the key?)");
  auto key_bio = MemBio(key.pem);
  std::unique_ptr<EVP_PKEY, KeyFree> pkey(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (pkey == nullptr) return Bad(key, absl::StrCat("holds no readable PEM private key (", OpensslReason(), ")"));
  if (X509_check_private_key(chain[0].get(), pkey.get()) != 1) {
    ERR_clear_error();
    return Bad(key, absl::StrCat("does not match the certificate of ", cert.flag, " ", cert.path, " (",
                                 Subject(chain[0].get()), ")"));
  }
  if (std::string why = ValidityProblem(chain[0].get()); !why.empty()) {
    return Bad(cert, absl::StrCat(Subject(chain[0].get()), " is ", why));
  }
  return ca != nullptr ? CheckChain(chain, cert, *ca) : absl::OkStatus();
}

absl::Status CheckCaBundle(const PemFile& ca) {
  std::vector<X509Ptr> certs = ReadCerts(ca.pem);
  if (certs.empty()) return Bad(ca, "holds no PEM certificate");
  for (const X509Ptr& c : certs) {
    if (std::string why = ValidityProblem(c.get()); !why.empty()) {
      return Bad(ca, absl::StrCat(Subject(c.get()), " is ", why));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ClientPems> LoadClientFiles(const std::string& ca_path, const std::string& cert_path,
                                           const std::string& key_path) {
  ClientPems out;
  if (!ca_path.empty()) {
    absl::StatusOr<PemFile> ca = ReadPemFile("--tls-ca", ca_path);
    if (!ca.ok()) return ca.status();
    if (absl::Status s = CheckCaBundle(*ca); !s.ok()) return s;
    out.ca = ca->pem;
  }
  if (cert_path.empty() != key_path.empty()) {
    return absl::FailedPreconditionError("--tls-cert and --tls-key go together: give both (mutual TLS) or neither");
  }
  if (!cert_path.empty()) {
    absl::StatusOr<PemFile> cert = ReadPemFile("--tls-cert", cert_path);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<PemFile> key = ReadPemFile("--tls-key", key_path);
    if (!key.ok()) return key.status();
    if (absl::Status s = CheckKeyCert(*cert, *key, nullptr); !s.ok()) return s;
    out.cert = cert->pem;
    out.key = key->pem;
  }
  return out;
}

std::string DescribeLeaf(const std::string& cert_pem) {
  std::vector<X509Ptr> chain = ReadCerts(cert_pem);
  if (chain.empty()) return std::string();
  return absl::StrCat(Subject(chain[0].get()), ", valid until ", AsnTime(X509_get0_notAfter(chain[0].get())));
}

}  // namespace medprof::tls
