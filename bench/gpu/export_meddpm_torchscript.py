"""Exports the PyTorch peer's Med-DDPM (meddpm_eager.py beside this file, class Net: the published
128^3 U-Net, 40,226,433 parameters) as a TorchScript user model for medprof (issue 21's H200
acceptance: the same network run as a user model and as the built-in workload).

Usage (GPU machine, PyTorch with CUDA):  python3 export_meddpm_torchscript.py --out FILE [--trace-volume 16]

The user-model contract is forward(x, t, cond) -> noise like x (workloads/torchscript/workload.h);
the peer's Net takes the image and the two masks concatenated, so the exported module is
    forward(x, t, cond) = Net(cat([x, cond], 1), t)
(one concatenation per forward more than the built-in workload, which writes x into its input
buffer's image channels). Weights: PyTorch's default initialisation, seed 0 (no zero-initialised
output layer, so medprof's dry run can see the output change with t).

The peer's code is not scriptable as written (tuple unpacking of x.shape), so it is traced on CUDA
at a small volume; the script checks that the trace generalises by comparing it with the eager
module at twice that volume, and prints the parameter count and the largest difference.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from meddpm_eager import Net  # noqa: E402  (the peer, copied into the repo from shared/peer)


class UserModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = Net()

    def forward(self, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([x, cond], 1), t)


def inputs(volume, device):
    g = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(1, 1, volume, volume, volume, generator=g).to(device)
    cond = torch.randn(1, 2, volume, volume, volume, generator=g).to(device)
    t = torch.tensor([37], device=device)
    return x, t, cond


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--trace-volume", type=int, default=16, help="volume the trace is recorded at (multiple of 16)")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("export_meddpm_torchscript: needs CUDA (the trace records the time embedding's device)")
    torch.manual_seed(0)
    m = UserModel().cuda().eval()
    params = sum(p.numel() for p in m.parameters())
    with torch.no_grad():
        traced = torch.jit.trace(m, inputs(a.trace_volume, "cuda"), check_trace=False)
        check = inputs(2 * a.trace_volume, "cuda")
        diff = (traced(*check) - m(*check)).abs().max().item()
    traced.save(a.out)
    print(f"exported {a.out}: {params} parameters, traced at {a.trace_volume}^3, "
          f"max |traced - eager| at {2 * a.trace_volume}^3 = {diff:.3g}")
    if params != 40226433:
        raise SystemExit(f"export_meddpm_torchscript: {params} parameters, expected 40226433 (the published model)")
    if not diff < 1e-3:
        raise SystemExit("export_meddpm_torchscript: the trace does not generalise to another volume")


if __name__ == "__main__":
    main()
