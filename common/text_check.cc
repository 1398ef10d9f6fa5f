#include "common/text_check.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"

namespace medprof::text {
namespace {

absl::Status Refuse(std::string_view field, size_t position, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(absl::string_view(field.data(), field.size()), ": character ",
                                                 position, " ", what,
                                                 "; names and labels may hold printable text only"));
}

std::string CodePoint(unsigned cp) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "U+%04X", cp);
  return buf;
}

// Length of the UTF-8 sequence starting with `lead`, 0 when `lead` cannot start one.
size_t SequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 0;
}

}  // namespace

absl::Status CheckNoControl(std::string_view value, std::string_view field) {
  size_t position = 0;  // characters, 1-based in messages
  for (size_t i = 0; i < value.size();) {
    ++position;
    const auto lead = static_cast<unsigned char>(value[i]);
    const size_t n = SequenceLength(lead);
    if (n == 0 || i + n > value.size()) return Refuse(field, position, "is not UTF-8");
    unsigned cp = n == 1 ? lead : lead & (0xff >> (n + 1));
    for (size_t k = 1; k < n; ++k) {
      const auto c = static_cast<unsigned char>(value[i + k]);
      if ((c & 0xc0) != 0x80) return Refuse(field, position, "is not UTF-8");
      cp = (cp << 6) | (c & 0x3f);
    }
    if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) {
      return Refuse(field, position, absl::StrCat("is a control character (", CodePoint(cp), ")"));
    }
    i += n;
  }
  return absl::OkStatus();
}

}  // namespace medprof::text
