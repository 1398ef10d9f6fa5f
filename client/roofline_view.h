// `medprof roofline RUN|--study STUDY`: where each kernel of a run (on request each measured launch
// signature, and each phase range) stands against the run's own ceilings — work, traffic at one
// memory level, intensity, achieved rates, the binding roof, % of roof and the bound class
// (docs/metrics.md "Roofline"). Computed here from the stored counters and ceilings that GetRun
// returns, with common/roofline.h, as compare and the report compute theirs: nothing of it is
// stored, so a run imported from Nsight Compute gets the same view from the same counters.
//
// Pure functions over messages; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cli.h"
#include "common/roofline.h"
#include "medprof/v1/service.pb.h"

namespace medprof::client {

struct RooflineOptions {
  std::string phase;           // "" = all; else fwd|bwd|optim|sample_step: that phase's range and
                               // the kernels that ran in it
  std::string level = "dram";  // dram|l2|l1: the level whose bytes, intensity and bandwidth are shown
  bool signatures = false;     // also each kernel's measured launch signatures
};

struct RooflineRow {
  std::string run_id, gpu, preset;
  std::string scope;     // "kernel" | "signature" | "phase"
  std::string name;      // kernel name, "<id> <op> <shapes>" of a signature, or the phase
  std::string category;  // kernel category ("" for phases)
  double time_share = 0;  // kernel: of the run's kernel time; signature: of its kernel's; phase: 0
  roofline::Point point;
};

// INVALID_ARGUMENT naming --level or --phase when they are not one of the allowed values.
absl::Status ValidateRooflineOptions(const RooflineOptions& o);

// The rows of one run: kernels by time (largest first), each followed by its signatures (with
// `o.signatures`; `signatures` from ListKernels(signatures=true)), then the phase ranges. Scopes
// without duration_ns, or with neither FLOP nor byte counters, are left out.
std::vector<RooflineRow> RooflineRows(const v1::Run& run, const std::vector<v1::SignatureShare>& signatures,
                                      const RooflineOptions& o);

// Table: per run a ceilings line (measured, datasheet) and one row per scope; JSON: {"runs":
// [{"run_id", "gpu", "preset", "ceilings", "rows": [...]}]} with every level's bytes and intensity;
// CSV: one line per row.
std::string FormatRoofline(const std::vector<v1::Run>& runs, const std::vector<RooflineRow>& rows,
                           const RooflineOptions& o, OutputFormat format);

}  // namespace medprof::client
