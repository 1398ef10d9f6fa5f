// meddpm-export: writes the files of the same-function check against the PyTorch peer
// (bench/gpu/peer_equivalence.py runs it, then loads the weights into peer/meddpm_eager.py's
// Net and compares outputs). The published 128^3 model shape, strict FP32.
//
//   meddpm-export --out DIR [--volume 32] [--device auto|cpu|cuda] [--seed 0] [--channels-last]
#include <cstdio>
#include <map>
#include <string>

#include "CLI/CLI.hpp"
#include "workloads/meddpm/workload.h"

int main(int argc, char** argv) {
  namespace m = medprof::meddpm;
  CLI::App app{"Export Med-DDPM weights, input and output for the PyTorch peer check"};
  std::string out_dir, device = "auto";
  int volume = 32, batch = 1;
  uint64_t seed = 0;
  bool channels_last = false;
  app.add_option("--out", out_dir, "directory to write (created)")->required();
  app.add_option("--volume", volume, "cubic volume side (a multiple of 16)")->capture_default_str();
  app.add_option("--batch", batch, "batch size")->capture_default_str();
  app.add_option("--seed", seed, "seed of inputs and weights")->capture_default_str();
  app.add_option("--device", device, "auto|cpu|cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_flag("--channels-last", channels_last, "ChannelsLast3d weights and activations");
  CLI11_PARSE(app, argc, argv);

  m::WorkloadOptions options;
  options.phase = m::Phase::kForward;
  options.depth = options.height = options.width = volume;
  options.batch = batch;
  options.seed = seed;
  options.steps = 1;
  options.warmup = 0;
  options.channels_last = channels_last;
  const std::map<std::string, m::Device> devices = {
      {"auto", m::Device::kAuto}, {"cpu", m::Device::kCpu}, {"cuda", m::Device::kCuda}};
  options.device = devices.at(device);

  auto workload = m::Workload::Create(options);
  if (!workload.ok()) {
    std::fprintf(stderr, "meddpm-export: %s\n", workload.status().ToString().c_str());
    return 1;
  }
  if (absl::Status s = (*workload)->ExportForPeer(out_dir); !s.ok()) {
    std::fprintf(stderr, "meddpm-export: %s\n", s.ToString().c_str());
    return 1;
  }
  const m::EffectiveFlags& f = (*workload)->flags();
  std::fprintf(stderr, "meddpm-export: wrote %s (%lld parameters, device %s, torch %s)\n", out_dir.c_str(),
               static_cast<long long>((*workload)->ParameterCount()), f.device.c_str(),
               f.torch_version.c_str());
  return 0;
}
