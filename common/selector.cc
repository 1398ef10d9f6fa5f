#include "common/selector.h"

#include <algorithm>
#include <cctype>
#include <regex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace medprof::selector {
namespace {

constexpr char kExpected[] =
    "expected key=value pairs separated by commas; keys gpu, arch, site, partition, host, "
    "agent, device, label.<name>";
constexpr char kLabelPrefix[] = "label.";

absl::Status CannotParse(absl::string_view text) {
  return absl::InvalidArgumentError(absl::StrCat("cannot parse '", text, "' (", kExpected, ")"));
}

bool ValidLabelName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '-' || c == '.';
  });
}

}  // namespace

bool Selector::empty() const {
  return gpu.empty() && arch.empty() && site.empty() && partition.empty() && host.empty() &&
         agent.empty() && device.empty() && labels.empty();
}

std::string Selector::ToString() const {
  std::vector<std::string> parts;
  auto add = [&](absl::string_view key, const std::string& value) {
    if (!value.empty()) parts.push_back(absl::StrCat(key, "=", value));
  };
  add("gpu", gpu);
  add("arch", arch);
  add("site", site);
  add("partition", partition);
  add("host", host);
  add("agent", agent);
  add("device", device);
  for (const auto& [k, v] : labels) parts.push_back(absl::StrCat(kLabelPrefix, k, "=", v));
  return absl::StrJoin(parts, ",");
}

absl::StatusOr<Selector> Parse(std::string_view text_in) {
  const absl::string_view text(text_in.data(), text_in.size());
  Selector s;
  if (absl::StripAsciiWhitespace(text).empty()) return s;
  if (text.size() > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("selector is ", text.size(), " characters long (allowed at most 1024)"));
  }
  for (absl::string_view pair : absl::StrSplit(text, ',')) {
    const size_t eq = pair.find('=');
    if (eq == absl::string_view::npos) return CannotParse(text);
    const absl::string_view key = absl::StripAsciiWhitespace(pair.substr(0, eq));
    const absl::string_view value = absl::StripAsciiWhitespace(pair.substr(eq + 1));
    if (key.empty() || value.empty() || absl::StrContains(value, '=')) return CannotParse(text);

    std::string* slot = nullptr;
    if (key == "gpu") slot = &s.gpu;
    else if (key == "arch") slot = &s.arch;
    else if (key == "site") slot = &s.site;
    else if (key == "partition") slot = &s.partition;
    else if (key == "host") slot = &s.host;
    else if (key == "agent") slot = &s.agent;
    else if (key == "device") slot = &s.device;
    else if (absl::StartsWith(key, kLabelPrefix)) {
      const absl::string_view name = key.substr(sizeof(kLabelPrefix) - 1);
      if (!ValidLabelName(name)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "label name '", name, "' in '", text,
            "' is not valid (allowed 1..64 characters: letters, digits, '_', '-', '.')"));
      }
      if (!s.labels.emplace(std::string(name), std::string(value)).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("key '", key, "' appears twice in '", text, "' (each key at most once)"));
      }
      continue;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown key '", key, "' in '", text, "' (",
                                                     kExpected, ")"));
    }
    if (!slot->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("key '", key, "' appears twice in '", text, "' (each key at most once)"));
    }
    *slot = std::string(value);
  }
  if (!s.device.empty()) {
    s.device = absl::AsciiStrToLower(s.device);
    if (s.device != "cpu" && s.device != "cuda") {
      return absl::InvalidArgumentError(
          absl::StrCat("device '", s.device, "' in '", text, "' is not a device kind (allowed cpu|cuda)"));
    }
  }
  if (!s.arch.empty()) {
    static const std::regex kArch(R"(\d{1,2}\.\d{1,2})");
    if (!std::regex_match(s.arch, kArch)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "arch '", s.arch, "' in '", text, "' is not a compute capability (expected major.minor, e.g. 9.0)"));
    }
  }
  return s;
}

bool MatchesAgent(const Selector& s, const Agent& agent) {
  auto label_is = [&](const std::string& key, const std::string& want) {
    auto it = agent.labels.find(key);
    return it != agent.labels.end() && it->second == want;
  };
  if (!s.site.empty() && !label_is("site", s.site)) return false;
  if (!s.partition.empty() && !label_is("partition", s.partition)) return false;
  if (!s.host.empty() && !absl::EqualsIgnoreCase(s.host, agent.host)) return false;
  if (!s.agent.empty() && s.agent != agent.name) return false;
  for (const auto& [k, v] : s.labels) {
    if (!label_is(k, v)) return false;
  }
  return true;
}

bool MatchesDevice(const Selector& s, const Device& device) {
  if (!s.device.empty() && s.device != device.kind) return false;
  if (!s.gpu.empty() &&
      !absl::StrContains(absl::AsciiStrToLower(device.name), absl::AsciiStrToLower(s.gpu))) {
    return false;
  }
  if (!s.arch.empty() && s.arch != device.compute_capability) return false;
  return true;
}

std::vector<size_t> MatchingDevices(const Selector& s, const Agent& agent) {
  std::vector<size_t> out;
  if (!MatchesAgent(s, agent)) return out;
  for (size_t i = 0; i < agent.devices.size(); ++i) {
    if (MatchesDevice(s, agent.devices[i])) out.push_back(i);
  }
  return out;
}

}  // namespace medprof::selector
