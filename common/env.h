// The process environment behind a function, so that code reading variables (the CLI's
// MEDPROF_SERVER and MEDPROF_TOKEN, the agent's Slurm and container facts) takes the lookup as a
// parameter and tests pass their own.
//
// ProcessEnv reads getenv at each call; like getenv it must not race with setenv.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace medprof {

// Looks up an environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process environment (getenv).
EnvLookup ProcessEnv();

}  // namespace medprof
