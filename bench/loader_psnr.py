#!/usr/bin/env python3
"""loader_psnr.py - how close trainbench's transforms are to torchvision's
Pillow pipeline, per decode mode, on the same crop boxes and flips.

For --samples files of a data set (default: the mkdata set of
loader_vs_pillow.py), one torchvision RandomResizedCrop box + flip (torch
seeded) and the eval transform are rendered by trainbench (tests/tb_data_probe)
in each decode mode and by torchvision + Pillow; the table gives max and mean
|difference| (0..255) and PSNR over all renders, the worst single render and
how many renders used DCT scaling.

  bench/loader_psnr.py --probe build/tests/tb_data_probe [--data DIR]
      [--samples 300] [--size 224] [--out results/loader_psnr.md]
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torchvision.transforms.functional as F
import torchvision.transforms.transforms as TT
from PIL import Image

MODES = ("full", "partial", "fast", "fast-all")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--data", default="/tmp/tb_bench_set")
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--out")
    a = ap.parse_args()
    S = a.size
    files = sorted(os.path.join(r, f) for r, _, fs in os.walk(a.data) for f in fs
                   if f.lower().endswith((".jpg", ".jpeg")))
    random.Random(1).shuffle(files)
    files = files[: a.samples]
    torch.manual_seed(1)
    work = tempfile.mkdtemp(prefix="tb_psnr_")
    jobs = []  # (kind, file, geom, reference)
    for f in files:
        img = Image.open(f).convert("RGB")
        rs = int(round(S * 256 / 224))
        jobs.append(("eval", f, "eval", np.asarray(F.center_crop(F.resize(img, rs), S))))
        i, j, h, w = TT.RandomResizedCrop.get_params(img, [0.08, 1.0], [3 / 4, 4 / 3])
        flip = int(torch.rand(1) < 0.5)
        r = F.resized_crop(img, i, j, h, w, [S, S])
        jobs.append(("train", f, f"{i},{j},{h},{w},{flip}", np.asarray(F.hflip(r) if flip else r)))
    lines, outs = [], []
    for k, (kind, f, geom, ref) in enumerate(jobs):
        for mode in MODES:
            o = os.path.join(work, f"{k}_{mode}.raw")
            outs.append(o)
            lines.append(f"{f} {mode} {geom} u8 {o}")
    status = subprocess.run([a.probe, "render", str(S)], input="\n".join(lines) + "\n", capture_output=True,
                            text=True, check=True).stdout.strip().split("\n")
    stats = {}
    n = 0
    for kind, f, geom, ref in jobs:
        for mode in MODES:
            st, o = status[n], outs[n]
            n += 1
            if not st.startswith("ok"):
                print(f"render failed: {f} {mode}: {st}", file=sys.stderr)
                return 1
            got = np.fromfile(o, np.uint8).reshape(S, S, 3)
            os.remove(o)
            d = np.abs(got.astype(np.int32) - ref.astype(np.int32))
            mse = float((d.astype(np.float64) ** 2).mean())
            s = stats.setdefault((kind, mode), dict(max=0, sum=0.0, mse=0.0, n=0, worst=float("inf"), scaled=0))
            s["max"] = max(s["max"], int(d.max()))
            s["sum"] += float(d.mean())
            s["mse"] += mse
            s["n"] += 1
            s["worst"] = min(s["worst"], float("inf") if mse == 0 else 10 * np.log10(255 ** 2 / mse))
            s["scaled"] += int(st.split()[1]) < 8
    os.rmdir(work)

    def db(mse):
        return "exact" if mse == 0 else f"{10 * np.log10(255 ** 2 / mse):.2f} dB"

    out = [f"# loader_psnr: {len(files)} files of {a.data}, S={S}, one RandomResizedCrop box + flip and the eval "
           f"transform each; reference torchvision + Pillow on the same boxes",
           f"# command: {' '.join(sys.argv)}", "",
           "| transform | decode | renders | DCT-scaled | max abs | mean abs | PSNR (all) | worst render |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    for kind in ("train", "eval"):
        for mode in MODES:
            s = stats[(kind, mode)]
            worst = "exact" if s["worst"] == float("inf") else f"{s['worst']:.2f} dB"
            out.append(f"| {kind} | {mode} | {s['n']} | {s['scaled']} | {s['max']} | {s['sum'] / s['n']:.4f} | "
                       f"{db(s['mse'] / s['n'])} | {worst} |")
    print("\n".join(out))
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
