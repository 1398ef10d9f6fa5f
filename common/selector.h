// Target selectors: which agents (and which of their devices) may run a job.
//
// A selector is the text a user writes after `--target`, e.g. "gpu=h100,site=tacc" or
// "device=cpu". Grammar: comma-separated key=value pairs (spaces around keys and values are
// ignored); keys gpu (substring of the device name, case-insensitive), arch (compute
// capability "major.minor", e.g. 9.0), site, partition (the agent's labels of that name),
// host (the agent's host name, case-insensitive), agent (the agent's name), device (cpu|cuda)
// and label.<name> (any agent label). Each key appears at most once. The empty selector ""
// matches every agent.
//
// Agent-level keys (site, partition, host, agent, label.*) test the agent; device-level keys
// (gpu, arch, device) must all hold for one device of the agent, which is the device the job
// runs on. Used by the server (scheduling) and the CLI (previewing which agents match).
//
// Plain values and pure functions; thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace medprof::selector {

struct Selector {
  std::string gpu;        // substring of the device name, matched case-insensitively
  std::string arch;       // compute capability, exact ("9.0")
  std::string site;       // agent label "site", exact
  std::string partition;  // agent label "partition", exact
  std::string host;       // agent host, case-insensitive
  std::string agent;      // agent name, exact
  std::string device;     // "cpu" | "cuda" | "" (any)
  std::map<std::string, std::string> labels;  // label.<name>=value, exact

  bool empty() const;
  // Canonical text: keys in a fixed order (gpu, arch, site, partition, host, agent, device,
  // then labels by name). Parse(ToString()) gives back an equal selector.
  std::string ToString() const;
  bool operator==(const Selector&) const = default;
};

// Parses selector text. Errors are INVALID_ARGUMENT without a field prefix (the caller adds
// "targets[i]: "), e.g. "cannot parse 'gpu=' (expected key=value pairs separated by commas;
// keys gpu, arch, site, partition, host, agent, device, label.<name>)".
absl::StatusOr<Selector> Parse(std::string_view text);

// What a selector is matched against: a registered agent and its devices.
struct Device {
  int index = -1;                  // CUDA ordinal, -1 for the CPU device
  std::string kind;                // "cuda" | "cpu"
  std::string name;                // "NVIDIA H200", "cpu"
  std::string compute_capability;  // "9.0"; empty for the CPU
};
struct Agent {
  std::string name;
  std::string host;
  std::map<std::string, std::string> labels;
  std::vector<Device> devices;
};

// True when the agent-level keys hold for `agent`.
bool MatchesAgent(const Selector& s, const Agent& agent);
// True when the device-level keys hold for `device`.
bool MatchesDevice(const Selector& s, const Device& device);
// Indexes (into agent.devices) of the devices the selector accepts, in agent order; empty when
// the agent itself does not match.
std::vector<size_t> MatchingDevices(const Selector& s, const Agent& agent);

}  // namespace medprof::selector
