#include "agent/agent/inventory.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "common/logging.h"

namespace medprof::agent {
namespace {

const Logger kLog("agent.inventory");

// Value of the first "key<sep>value" line whose key matches, whitespace-trimmed.
std::optional<std::string> FindField(const std::string& text, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    if (absl::StripAsciiWhitespace(line.substr(0, colon)) == key) {
      return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    }
  }
  return std::nullopt;
}

// Which probed GPUs a CUDA_VISIBLE_DEVICES value exposes, in its order, with the token that
// names each. Like CUDA, stops at the first entry that names no device.
std::vector<std::pair<const v1::Device*, std::string>> VisibleGpus(const std::vector<v1::Device>& gpus,
                                                                   const std::optional<std::string>& cvd) {
  std::vector<std::pair<const v1::Device*, std::string>> out;
  if (!cvd.has_value()) {
    for (const v1::Device& g : gpus) out.emplace_back(&g, absl::StrCat(g.index()));
    return out;
  }
  for (absl::string_view raw : absl::StrSplit(*cvd, ',')) {
    const std::string token(absl::StripAsciiWhitespace(raw));
    const v1::Device* match = nullptr;
    int ordinal = -1;
    if (absl::SimpleAtoi(token, &ordinal)) {
      for (const v1::Device& g : gpus) {
        if (g.index() == ordinal) match = &g;
      }
    } else if (absl::StartsWith(token, "GPU-")) {
      for (const v1::Device& g : gpus) {
        if (!g.uuid().empty() && absl::StartsWith(g.uuid(), token)) match = &g;
      }
    }
    if (match == nullptr) {
      if (!token.empty()) {
        kLog.Warn("CUDA_VISIBLE_DEVICES entry '{}' names no GPU this agent can see; ignoring it and the rest",
                  token);
      }
      break;
    }
    out.emplace_back(match, token);
  }
  return out;
}

}  // namespace

const OfferedDevice* Inventory::Find(int index) const {
  for (const OfferedDevice& d : devices) {
    if (d.device.index() == index) return &d;
  }
  return nullptr;
}

bool CountersAdminOnly(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return true;
  auto value = FindField(*text, "RmProfilingAdminOnly");
  if (!value.has_value()) return true;
  return *value != "0";
}

v1::Device CpuDevice(const std::string& cpuinfo_path, const std::string& meminfo_path) {
  v1::Device d;
  d.set_index(-1);
  d.set_kind("cpu");
  d.set_name("cpu");
  if (auto text = ReadFile(cpuinfo_path); text.ok()) {
    if (auto model = FindField(*text, "model name"); model.has_value() && !model->empty()) d.set_name(*model);
  }
  if (auto text = ReadFile(meminfo_path); text.ok()) {
    if (auto total = FindField(*text, "MemTotal"); total.has_value()) {
      uint64_t kib = 0;
      absl::string_view v = *total;
      absl::ConsumeSuffix(&v, "kB");
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(v), &kib)) d.set_memory_bytes(kib * 1024);
    }
  }
  return d;
}

Inventory BuildInventory(GpuProbe* probe, const InventoryInputs& in) {
  Inventory inv;
  std::vector<v1::Device> gpus;
  if (probe == nullptr) {
    inv.no_gpu_reason = "GPU probing is disabled";
  } else if (auto probed = probe->Probe(); !probed.ok()) {
    inv.no_gpu_reason = std::string(probed.status().message());
  } else if (probed->empty()) {
    inv.no_gpu_reason = "the NVIDIA driver reports no GPU";
  } else {
    gpus = *std::move(probed);
  }
  if (!gpus.empty()) {
    const bool admin_only = CountersAdminOnly(in.nvidia_params_path);
    int ordinal = 0;
    for (const auto& [gpu, token] : VisibleGpus(gpus, in.cuda_visible_devices)) {
      OfferedDevice d;
      d.device = *gpu;
      d.device.set_index(ordinal++);
      d.device.set_kind("cuda");
      d.device.set_counters_admin_only(admin_only);
      d.visible_token = token;
      inv.devices.push_back(std::move(d));
    }
    if (inv.devices.empty()) {
      inv.no_gpu_reason =
          absl::StrCat("CUDA_VISIBLE_DEVICES='", in.cuda_visible_devices.value_or(""), "' hides every GPU");
    }
  }
  if (inv.devices.empty()) {
    OfferedDevice cpu;
    cpu.device = CpuDevice(in.cpuinfo_path, in.meminfo_path);
    inv.devices.push_back(std::move(cpu));
  }
  return inv;
}

}  // namespace medprof::agent
