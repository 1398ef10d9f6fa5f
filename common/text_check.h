// Free text that may reach a terminal: names, labels, notes, reasons. The one check every
// server-side validation applies to such a field, so that nothing stored can later move a
// user's cursor, recolour their terminal, ring its bell or split a table row when printed.
//
// medprof refuses control characters at validation (it does not escape them on output):
// C0 (U+0000..U+001F, tab and newline included), DEL (U+007F) and C1 (U+0080..U+009F, the
// UTF-8 pairs C2 80..C2 9F), and byte sequences that are not UTF-8. Other Unicode passes.
// Pure function; thread-safe.
#pragma once

#include <string_view>

#include "absl/status/status.h"

namespace medprof::text {

// OK, or INVALID_ARGUMENT "<field>: character N is a control character (U+001B); names and
// labels may hold printable text only" — the value itself is never echoed.
absl::Status CheckNoControl(std::string_view value, std::string_view field);

}  // namespace medprof::text
