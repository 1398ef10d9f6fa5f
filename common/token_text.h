// Bearer-token text on the client side (the CLI and the agent): the one check of a token's
// shape before it is sent, the token file's first line, and the refusal of a token typed on a
// command line. No message here ever contains a token or any byte of one.
//
// The shape is the one medprof-server issues (server/domain/tokens.h, which uses these
// constants): `mpt_<12 lower-case hex id>_<64 lower-case hex secret>`, printable ASCII only.
// Pure functions (ReadTokenFile and TokenFileWarning read the file system); thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace medprof::token {

inline constexpr std::string_view kPrefix = "mpt_";
inline constexpr size_t kIdHex = 12;
inline constexpr size_t kSecretHex = 64;

// OK when `token` has the shape above. Else INVALID_ARGUMENT "<source>: <why> (expected
// mpt_<12 hex>_<64 hex>)", where why names a position and a kind ("byte 7 is a control
// character"), never the token's text. `source` names where it came from ("MEDPROF_TOKEN").
absl::Status CheckShape(std::string_view token, std::string_view source);

// The first line of the file at `path`, surrounding white space stripped, shape-checked.
// INVALID_ARGUMENT "<source> <path>: ..." when unreadable, empty or malformed.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path, std::string_view source);

// A warning for a token file that users other than its owner may read ("" when none, or when
// the file cannot be stat'ed — ReadTokenFile reports that).
std::string TokenFileWarning(const std::string& path);

// INVALID_ARGUMENT when `args` holds "--token" or "--token=..." (a secret on a command line is
// visible to every user through ps and lands in shell history); the message names the option
// and `use_instead`, never the value.
absl::Status RefuseTokenOnCommandLine(const std::vector<std::string>& args, std::string_view use_instead);

}  // namespace medprof::token
