#!/usr/bin/env python3
"""Same-function check: medprof's LibTorch Med-DDPM U-Net against the PyTorch peer.

meddpm-export (workloads/meddpm/export_main.cc, i.e. Workload::ExportForPeer) draws dense
weights (no zero-init, so the output depends on every parameter), runs one strict-FP32
forward and writes manifest.json, weights.bin (parameters in registration order), input.bin
and output.bin. This script loads those weights into the peer's Net (bench/gpu/meddpm_eager.py,
a verbatim copy of shared/peer/meddpm_eager.py), checks that the parameter names, order and
shapes are the peer's state_dict, runs the peer on the same input in strict FP32 (TF32 off)
and requires ||ours - peer|| / ||peer|| <= --tol (1e-5).

  python3 bench/gpu/peer_equivalence.py --volume 64 --device cuda       # runs the exporter
  python3 bench/gpu/peer_equivalence.py --dir /tmp/export               # an existing export
  --fp64 also compares both against the peer in float64 on the CPU (slow at 128^3).
Exit status: 0 pass, 1 mismatch, 2 usage or setup error.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from meddpm_eager import Net  # noqa: E402

PEER_MODEL = {"in_channels": 3, "out_channels": 1, "base_channels": 64,
              "channel_mult": [1, 1, 2, 3, 4], "res_blocks": 1, "attention_ds": [8], "groups": 32}


def fail(msg, code=1):
    print(f"peer_equivalence: FAIL: {msg}", flush=True)
    sys.exit(code)


def read_f32(path, shape=None):
    with open(path, "rb") as f:
        t = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)  # little-endian hosts
    return t.reshape(shape) if shape is not None else t


def default_exporter():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for d in (os.environ.get("MEDPROF_BIN_DIR", ""), os.path.join(root, "build-gpu", "bin"),
              os.path.join(root, "build", "bin")):
        p = os.path.join(d, "meddpm-export")
        if d and os.access(p, os.X_OK):
            return p
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", help="an existing export directory (skips running the exporter)")
    ap.add_argument("--exporter", help="path of meddpm-export (default: $MEDPROF_BIN_DIR, build-gpu/bin, build/bin)")
    ap.add_argument("--volume", type=int, default=32, help="cubic volume side for the export (multiple of 16)")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tol", type=float, default=1e-5, help="max relative L2 error")
    ap.add_argument("--fp64", action="store_true", help="also compare against the peer in float64 on the CPU")
    a = ap.parse_args()

    d = a.dir
    if d is None:
        exe = a.exporter or default_exporter()
        if not exe:
            fail("meddpm-export not found: build it (bench/gpu/build_worker.sh) or pass --exporter", 2)
        d = tempfile.mkdtemp(prefix="meddpm-peer-")
        cmd = [exe, "--out", d, "--volume", str(a.volume), "--device", a.device, "--seed", str(a.seed)]
        print("peer_equivalence: running", " ".join(cmd), flush=True)
        r = subprocess.run(cmd)
        if r.returncode != 0:
            fail(f"exporter exited with {r.returncode}", 2)

    with open(os.path.join(d, "manifest.json")) as f:
        man = json.load(f)
    if man["model"] != PEER_MODEL:
        fail(f"the peer only implements the published model {PEER_MODEL}; export has {man['model']}", 2)

    net = Net()
    sd = net.state_dict()
    names = [p["name"] for p in man["parameters"]]
    if names != list(sd.keys()):
        for i, (x, y) in enumerate(zip(names, sd.keys())):
            if x != y:
                fail(f"parameter {i}: medprof registers '{x}', the peer '{y}'")
        fail(f"medprof has {len(names)} parameters, the peer {len(sd)}")
    flat = read_f32(os.path.join(d, man["weights"]))
    if flat.numel() != man["parameter_count"] or flat.numel() != sum(v.numel() for v in sd.values()):
        fail(f"weights.bin holds {flat.numel()} floats; manifest {man['parameter_count']}, "
             f"peer {sum(v.numel() for v in sd.values())}")
    new_sd = {}
    for p in man["parameters"]:
        shape = tuple(p["shape"])
        if shape != tuple(sd[p["name"]].shape):
            fail(f"{p['name']}: medprof shape {shape}, peer {tuple(sd[p['name']].shape)}")
        n = sd[p["name"]].numel()
        new_sd[p["name"]] = flat[p["offset"]:p["offset"] + n].reshape(shape).clone()
    net.load_state_dict(new_sd, strict=True)
    print(f"peer_equivalence: {len(names)} parameter tensors, {flat.numel()} parameters, "
          "names/order/shapes identical")

    x = read_f32(os.path.join(d, man["input"]["file"]), man["input"]["shape"])
    ours = read_f32(os.path.join(d, man["output"]["file"]), man["output"]["shape"]).double()
    t = torch.tensor(man["timesteps"], dtype=torch.long)

    dev = man["device"] if a.device == "auto" or a.dir else a.device
    if dev.startswith("cuda") and not torch.cuda.is_available():
        fail(f"the export ran on {dev} but this PyTorch sees no GPU", 2)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    net = net.to(dev).eval()
    with torch.no_grad():
        peer = net(x.to(dev), t.to(dev)).double().cpu()
    rel = ((ours - peer).norm() / peer.norm()).item()
    print(f"peer_equivalence: torch {torch.__version__} on {dev}; medprof {man['torch_version']} on "
          f"{man['device']}; volume {man['volume']}, t {man['timesteps']}")
    print(f"peer_equivalence: |peer| = {peer.norm().item():.6g}, max|ours - peer| = "
          f"{(ours - peer).abs().max().item():.3g}, relative L2 error {rel:.3e} (tol {a.tol:g})")
    if a.fp64:
        net64 = net.cpu().double()
        # The peer builds its sinusoid with t.float(); feed the time MLP in float64.
        net64.t.register_forward_pre_hook(lambda m, inp: (inp[0].double(),))
        with torch.no_grad():
            ref = net64(x.double(), t).cpu()
        print(f"peer_equivalence: vs float64 peer: medprof {((ours - ref).norm() / ref.norm()).item():.3e}, "
              f"peer fp32 {((peer - ref).norm() / ref.norm()).item():.3e}")
    if not (rel <= a.tol):
        fail(f"relative error {rel:.3e} > {a.tol:g}")
    print("peer_equivalence: PASS")


if __name__ == "__main__":
    main()
