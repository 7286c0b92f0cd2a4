#!/usr/bin/env python3
"""loader_psnr.py - how close trainbench's transforms are to torchvision's
Pillow pipeline, per decode mode, on the same crop boxes and flips.

For --samples files of a data set (default: the mkdata set of
loader_vs_pillow.py), --crops torchvision RandomResizedCrop boxes + flips
(torch seeded) and the eval transform are rendered by trainbench
(tests/tb_data_probe) in each decode mode and by torchvision + Pillow; the
table gives max and mean |difference| (0..255) and PSNR over all renders,
the worst single render and how many renders used DCT scaling. The CPU
modes full and partial are bit-identical to Pillow, so the reference is
also the CPU path's own output on the same boxes.

--gpu adds the --decode gpu path (nvJPEG on CUDA device 0, the crop and
resize kernels; run it on a GPU machine, with a build that has nvJPEG), with
the number of renders the GPU decoded ("on GPU"; the others went to the CPU
path as the loader sends them); --gpu-emulated the same logic on the host
emulation of the decoder (a check of the script: exact by construction).
Real photos: bench/photo_set.py makes a JPEG set from the photographs that
ship with scikit-image and matplotlib.

  bench/loader_psnr.py --probe build/tests/tb_data_probe [--data DIR]
      [--samples 300] [--crops 1] [--size 224] [--gpu] [--out results/loader_psnr.md]
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
    ap.add_argument("--crops", type=int, default=1, help="train crop boxes per file")
    ap.add_argument("--gpu", action="store_true", help="add the --decode gpu path (nvJPEG)")
    ap.add_argument("--gpu-emulated", action="store_true", help="add the GPU path's host emulation")
    ap.add_argument("--modes", default=",".join(MODES), help="CPU decode modes to compare")
    ap.add_argument("--title", default="", help="a heading for the markdown table")
    ap.add_argument("--out")
    a = ap.parse_args()
    S = a.size
    modes = [m for m in a.modes.split(",") if m]
    if a.gpu:
        modes.append("gpu")
    if a.gpu_emulated:
        modes.append("gpu-emulated")
    files = sorted(os.path.join(r, f) for r, _, fs in os.walk(a.data) for f in fs
                   if f.lower().endswith((".jpg", ".jpeg")))
    random.Random(1).shuffle(files)
    files = files[: a.samples]
    if not files:
        print(f"no .jpg/.jpeg files under {a.data}", file=sys.stderr)
        return 1
    torch.manual_seed(1)
    work = tempfile.mkdtemp(prefix="tb_psnr_")
    jobs = []  # (kind, file, geom, reference)
    for f in files:
        img = Image.open(f).convert("RGB")
        rs = int(round(S * 256 / 224))
        jobs.append(("eval", f, "eval", np.asarray(F.center_crop(F.resize(img, rs), S))))
        for _ in range(a.crops):
            i, j, h, w = TT.RandomResizedCrop.get_params(img, [0.08, 1.0], [3 / 4, 4 / 3])
            flip = int(torch.rand(1) < 0.5)
            r = F.resized_crop(img, i, j, h, w, [S, S])
            jobs.append(("train", f, f"{i},{j},{h},{w},{flip}", np.asarray(F.hflip(r) if flip else r)))
    lines, outs = [], []
    for k, (kind, f, geom, ref) in enumerate(jobs):
        for mode in modes:
            o = os.path.join(work, f"{k}_{mode}.raw")
            outs.append(o)
            lines.append(f"{f} {mode} {geom} u8 {o}")
    run = subprocess.run([a.probe, "render", str(S)], input="\n".join(lines) + "\n", capture_output=True,
                         text=True)
    if run.returncode != 0:
        print(f"tb_data_probe failed ({run.returncode}): {run.stderr.strip()}", file=sys.stderr)
        return 1
    decoder = " ".join(l[2:].strip() for l in run.stderr.splitlines() if l.startswith("# tb_data_probe:"))
    status = run.stdout.strip().split("\n")
    stats = {}
    n = 0
    for kind, f, geom, ref in jobs:
        for mode in modes:
            st, o = status[n], outs[n]
            n += 1
            if not st.startswith("ok"):
                print(f"render failed: {f} {mode}: {st}", file=sys.stderr)
                return 1
            got = np.fromfile(o, np.uint8).reshape(S, S, 3)
            os.remove(o)
            d = np.abs(got.astype(np.int32) - ref.astype(np.int32))
            mse = float((d.astype(np.float64) ** 2).mean())
            s = stats.setdefault((kind, mode),
                                 dict(max=0, sum=0.0, mse=0.0, n=0, worst=float("inf"), scaled=0, gpu=0))
            s["max"] = max(s["max"], int(d.max()))
            s["sum"] += float(d.mean())
            s["mse"] += mse
            s["n"] += 1
            s["worst"] = min(s["worst"], float("inf") if mse == 0 else 10 * np.log10(255 ** 2 / mse))
            s["scaled"] += int(st.split()[1]) < 8
            s["gpu"] += len(st.split()) > 4 and st.split()[4] == "gpu"
    os.rmdir(work)

    def db(mse):
        return "exact" if mse == 0 else f"{10 * np.log10(255 ** 2 / mse):.2f} dB"

    gpu_modes = [m for m in modes if m.startswith("gpu")]
    out = ([f"### {a.title}", ""] if a.title else []) + [
           f"# loader_psnr: {len(files)} files of {a.data}, S={S}, {a.crops} RandomResizedCrop box(es) + flip and "
           f"the eval transform each; reference torchvision + Pillow on the same boxes (= trainbench's CPU path, "
           f"decode full/partial)",
           f"# command: {' '.join(sys.argv)}"] + ([f"# GPU path: {decoder}"] if decoder else []) + ["",
           "| transform | decode | renders | " + ("on GPU | " if gpu_modes else "") +
           "DCT-scaled | max abs | mean abs | PSNR (all) | worst render |",
           "|---|---|---:|" + ("---:|" if gpu_modes else "") + "---:|---:|---:|---:|---:|"]
    for kind in ("train", "eval"):
        for mode in modes:
            s = stats[(kind, mode)]
            worst = "exact" if s["worst"] == float("inf") else f"{s['worst']:.2f} dB"
            on_gpu = (f"{s['gpu']} | " if mode in gpu_modes else "- | ") if gpu_modes else ""
            out.append(f"| {kind} | {mode} | {s['n']} | {on_gpu}{s['scaled']} | {s['max']} | "
                       f"{s['sum'] / s['n']:.4f} | {db(s['mse'] / s['n'])} | {worst} |")
    print("\n".join(out))
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
