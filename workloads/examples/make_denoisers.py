#!/usr/bin/python3
"""Scripts small 3D denoisers with PyTorch and saves them as TorchScript user models for medprof.

    /usr/bin/python3 workloads/examples/make_denoisers.py --out DIR [--width 8]

Writes into DIR (created if missing), nothing downloaded, weights drawn from a fixed seed:

  good models (the contract of workloads/torchscript/workload.h)
    tiny_unet.pt         forward(x, t, cond): a two-level 3D U-Net, image 1 + cond 2 channels
                         (run it with --in-channels 3 --out-channels 1, the defaults)
    tiny_resnet.pt       forward(x, t): an unconditional residual stack at full resolution,
                         another shape (run it with --out-channels 1)
    zero_output.pt       tiny_resnet with a zero-initialised output conv (as an untrained
                         guided-diffusion U-Net): runs, with a note that t-dependence was not checked
  manifest.json          per good model: PyTorch's parameter count and whether forward takes cond
  bad models (each refused by medprof with its cause)
    not_torchscript.pt   torch.save of a state_dict: a zip archive, but no TorchScript
    wrong_signature.pt   forward(x) only
    wrong_shape.pt       returns twice the channels of x
    nan_output.pt        returns NaN everywhere
    ignores_t.pt         forward(x, t) whose output does not depend on t
    out_of_memory.pt     allocates 256 TiB inside forward

Debian 12's python3-torch 1.13 writes archives that Debian's LibTorch 1.13 and PyTorch 2.x's
libtorch both load. torch.jit.script needs the source of these classes, so run this file (not
a pasted copy). Exit status 0 on success; 2 when torch cannot be imported.
"""
import argparse
import json
import math
import os
import sys

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # the ctest fixture shows this line when it fails
    sys.stderr.write("make_denoisers.py: python3 with torch is required (Debian: apt-get install "
                     "python3-torch); import failed: %s\n" % e)
    sys.exit(2)


class TimeEmbedding(nn.Module):
    """Sinusoidal embedding of the integer timestep (max period 1000), then a small MLP."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.SiLU(), nn.Linear(2 * dim, dim))

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        half = self.dim // 2
        freqs = torch.exp(-math.log(1000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
        args = t.to(torch.float32)[:, None] * freqs[None, :]
        return self.mlp(torch.cat([torch.cos(args), torch.sin(args)], dim=1))


class ResBlock(nn.Module):
    """GroupNorm, SiLU, conv3d; the timestep embedding added per channel; a second conv; skip."""

    def __init__(self, cin: int, cout: int, emb: int):
        super().__init__()
        self.norm1 = nn.GroupNorm(min(4, cin), cin)
        self.conv1 = nn.Conv3d(cin, cout, 3, padding=1)
        self.emb = nn.Linear(emb, cout)
        self.norm2 = nn.GroupNorm(min(4, cout), cout)
        self.conv2 = nn.Conv3d(cout, cout, 3, padding=1)
        self.skip = nn.Conv3d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.emb(e)[:, :, None, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return self.skip(x) + h


class TinyUNet(nn.Module):
    """Conditional: the noisy image and the masks concatenated, one downsampling level."""

    def __init__(self, image_channels: int = 1, cond_channels: int = 2, width: int = 8):
        super().__init__()
        self.time = TimeEmbedding(4 * width)
        self.conv_in = nn.Conv3d(image_channels + cond_channels, width, 3, padding=1)
        self.enc = ResBlock(width, width, 4 * width)
        self.down = nn.Conv3d(width, 2 * width, 3, stride=2, padding=1)
        self.mid = ResBlock(2 * width, 2 * width, 4 * width)
        self.up = nn.Conv3d(2 * width, width, 3, padding=1)
        self.dec = ResBlock(2 * width, width, 4 * width)
        self.norm_out = nn.GroupNorm(min(4, width), width)
        self.conv_out = nn.Conv3d(width, image_channels, 3, padding=1)

    def forward(self, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        e = self.time(t)
        h1 = self.enc(self.conv_in(torch.cat([x, cond], dim=1)), e)
        h2 = self.mid(self.down(h1), e)
        u = self.up(F.interpolate(h2, scale_factor=2.0, mode="nearest"))
        h = self.dec(torch.cat([u, h1], dim=1), e)
        return self.conv_out(F.silu(self.norm_out(h)))


class TinyResNet(nn.Module):
    """Unconditional: three residual blocks at full resolution, wider than the U-Net's first level."""

    def __init__(self, image_channels: int = 1, width: int = 12):
        super().__init__()
        self.time = TimeEmbedding(2 * width)
        self.conv_in = nn.Conv3d(image_channels, width, 3, padding=1)
        self.blocks = nn.ModuleList([ResBlock(width, width, 2 * width) for _ in range(3)])
        self.conv_out = nn.Conv3d(width, image_channels, 3, padding=1)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        e = self.time(t)
        h = self.conv_in(x)
        for block in self.blocks:
            h = block(h, e)
        return self.conv_out(F.silu(h))


class WrongSignature(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(1, 1, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


class WrongShape(nn.Module):
    def __init__(self):
        super().__init__()
        self.time = TimeEmbedding(8)
        self.conv = nn.Conv3d(1, 2, 3, padding=1)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self.conv(x) + self.time(t)[:, :2, None, None, None]


class NanOutput(nn.Module):
    def __init__(self):
        super().__init__()
        self.time = TimeEmbedding(8)
        self.conv = nn.Conv3d(1, 1, 3, padding=1)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        h = self.conv(x) + self.time(t)[:, :1, None, None, None]
        return h * float("nan")


class IgnoresT(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(1, 1, 3, padding=1)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


class OutOfMemory(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(1, 1, 3, padding=1)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        # 2^46 float32 = 256 TiB: more than any GPU, host or 47-bit address space holds; never touched.
        big = torch.empty([70368744177664], dtype=torch.float32, device=x.device)
        return self.conv(x) + big[:1].view(1, 1, 1, 1, 1) * t.to(torch.float32)[:, None, None, None, None]


def save_scripted(module: nn.Module, path: str) -> None:
    torch.jit.script(module.eval()).save(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="directory to write the .pt files into")
    parser.add_argument("--width", type=int, default=8, help="TinyUNet base width (default 8)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    zero = TinyResNet()
    nn.init.zeros_(zero.conv_out.weight)
    nn.init.zeros_(zero.conv_out.bias)
    good = {"tiny_unet.pt": TinyUNet(width=args.width), "tiny_resnet.pt": TinyResNet(), "zero_output.pt": zero}
    bad = {"wrong_signature.pt": WrongSignature(), "wrong_shape.pt": WrongShape(), "nan_output.pt": NanOutput(),
           "ignores_t.pt": IgnoresT(), "out_of_memory.pt": OutOfMemory()}
    for name, module in list(good.items()) + list(bad.items()):
        save_scripted(module, os.path.join(args.out, name))
    torch.save(TinyUNet(width=args.width).state_dict(), os.path.join(args.out, "not_torchscript.pt"))
    manifest = {name: {"parameters": sum(p.numel() for p in m.parameters()), "conditional": isinstance(m, TinyUNet)}
                for name, m in good.items()}
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
    for name in sorted(os.listdir(args.out)):
        print("%s/%s %d bytes" % (args.out, name, os.path.getsize(os.path.join(args.out, name))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
