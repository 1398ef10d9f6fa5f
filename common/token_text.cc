#include "common/token_text.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace medprof::token {
namespace {

// Debian's Abseil has its own string_view.
absl::string_view A(std::string_view v) { return absl::string_view(v.data(), v.size()); }

absl::Status Bad(std::string_view source, std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(A(source), ": ", A(why), " (expected ", A(kPrefix), "<", kIdHex,
                                                 " hex>_<", kSecretHex, " hex>)"));
}

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

}  // namespace

absl::Status CheckShape(std::string_view token, std::string_view source) {
  for (size_t i = 0; i < token.size(); ++i) {
    const auto c = static_cast<unsigned char>(token[i]);
    if (c >= 0x80) return Bad(source, absl::StrCat("byte ", i + 1, " is not ASCII"));
    if (c < 0x21 || c == 0x7f) {
      return Bad(source, absl::StrCat("byte ", i + 1, c == ' ' ? " is a space" : " is a control character"));
    }
  }
  if (token.substr(0, kPrefix.size()) != kPrefix) return Bad(source, "no mpt_ prefix");
  const size_t want = kPrefix.size() + kIdHex + 1 + kSecretHex;
  if (token.size() != want) return Bad(source, absl::StrCat(token.size(), " characters, not ", want));
  for (size_t i = kPrefix.size(); i < token.size(); ++i) {
    const bool separator = i == kPrefix.size() + kIdHex;
    if (separator ? token[i] != '_' : !IsLowerHex(token[i])) {
      return Bad(source, absl::StrCat("byte ", i + 1, separator ? " is not '_'" : " is not lower-case hex"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path, std::string_view source) {
  const std::string where = absl::StrCat(A(source), " ", path);
  std::string text;
  if (const int err = ReadWholeFile(path, &text); err != 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": cannot read (", std::strerror(err), ")"));
  }
  const std::string token(absl::StripAsciiWhitespace(text.substr(0, text.find('\n'))));
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": holds no token on its first line"));
  if (absl::Status s = CheckShape(token, where); !s.ok()) return s;
  return token;
}

std::string TokenFileWarning(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || (st.st_mode & (S_IRGRP | S_IROTH)) == 0) return std::string();
  char mode[8];
  std::snprintf(mode, sizeof(mode), "%03o", static_cast<unsigned>(st.st_mode & 0777));
  return absl::StrCat("warning: token file ", path, " is readable by ",
                      (st.st_mode & S_IROTH) != 0 ? "every user" : "its group", " (mode ", mode,
                      "); run: chmod 600 ", path);
}

absl::Status RefuseTokenOnCommandLine(const std::vector<std::string>& args, std::string_view use_instead) {
  for (const std::string& a : args) {
    if (a == "--token" || absl::StartsWith(a, "--token=")) {
      return absl::InvalidArgumentError(
          absl::StrCat("--token: tokens are not taken on the command line (every user can read it with ps); use ",
                       A(use_instead), " (the value is not shown)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace medprof::token
