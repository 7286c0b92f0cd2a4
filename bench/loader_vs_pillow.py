#!/usr/bin/env python3
"""loader_vs_pillow.py - trainbench's JPEG loader against the Python pipeline
people use, on the same files and the same number of cores.

  torchvision: ImageFolder + RandomResizedCrop(224) + RandomHorizontalFlip +
               ToTensor + Normalize, torch.utils.data.DataLoader with N worker
               processes (one torch thread each), batch 64
  trainbench:  `trainbench loader-bench --train --image-size 224
               --batch-size 64 --threads N` (float32 NCHW, normalised), for
               each decode mode (fast = DCT-scaled crop, partial = crop only,
               full = whole image, as Pillow does)
  tjbench:     libjpeg-turbo's own benchmark, whole-image decode to RGB, on a
               sample of the files (tjbench takes one file at a time; the
               rate is aggregated as images / sum of per-image times)

Each figure is the best of --repeat runs (other work on the machine only ever
slows a run down). The load average is printed before and after.

  bench/loader_vs_pillow.py --trainbench build/trainbench [--data DIR]
      [--threads 1,2] [--repeat 3] [--out results/loader_vs_pillow.md]

Without --data an mkdata set of 10 classes x 300 images is made in
/tmp/tb_bench_set (kept for the next run).
"""
import argparse
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import time


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, check=True, **kw).stdout


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def trainbench_rows(tb, data, threads, decode, batches, repeat):
    out = sh([tb, "loader-bench", "--data", data, "--threads", threads, "--train", "--image-size", "224",
              "--batch-size", "64", "--batches", str(batches), "--warmup", "3", "--repeat", str(repeat),
              "--decode", decode])
    rows = {}
    header = ""
    for line in out.splitlines():
        if line.startswith("# loader-bench:"):
            header = line
        if line.startswith("#") or not line.strip():
            continue
        f = line.split()
        rows[int(f[0])] = dict(img_s=float(f[1]), mb_s=float(f[3]), ms_batch=float(f[4]), decode_ms=float(f[5]),
                               resize_ms=float(f[6]), skipped=int(f[8]))
    return rows, header


def pillow_rate(data, workers, batches, repeat):
    import torch
    import torchvision
    import torchvision.transforms as T
    from torch.utils.data import DataLoader

    torch.set_num_threads(1)
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = torchvision.datasets.ImageFolder(data, transform=tf)
    best = 0.0
    for _ in range(repeat):
        dl = DataLoader(ds, batch_size=64, shuffle=True, num_workers=workers, persistent_workers=True,
                        prefetch_factor=4, worker_init_fn=lambda _: torch.set_num_threads(1))
        def forever(loader):  # epochs roll over, as in loader-bench
            while True:
                yield from loader

        it = forever(dl)
        for _ in range(3):  # warm-up: workers started, page cache hot
            next(it)
        t0, n = time.perf_counter(), 0
        for _ in range(batches):
            x, y = next(it)
            n += x.shape[0]
        best = max(best, n / (time.perf_counter() - t0))
        del it, dl
    return best


def tjbench_rate(data, sample):
    tj = shutil.which("tjbench")
    if not tj:
        return None, 0
    files = []
    for root, _, names in os.walk(data):
        files += [os.path.join(root, n) for n in names if n.lower().endswith((".jpg", ".jpeg"))]
    random.Random(0).shuffle(files)
    total_s = 0.0
    for f in files[:sample]:
        out = sh([tj, f, "-rgb", "-benchtime", "0.5", "-warmup", "0.1", "-nowrite"])
        w, h = map(int, re.search(r"Image size: (\d+) x (\d+)", out).groups())
        mpix = float(re.search(r"Decompress.*?Throughput:\s+([\d.]+) Megapixels/sec", out, re.S).group(1))
        total_s += w * h / (mpix * 1e6)
    return len(files[:sample]) / total_s, len(files[:sample])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trainbench", required=True)
    ap.add_argument("--data")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batches", type=int, default=40, help="timed batches per run (trainbench)")
    ap.add_argument("--pillow-batches", type=int, default=20, help="timed batches per run (DataLoader)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tjbench-files", type=int, default=30)
    ap.add_argument("--out", help="also write the markdown table here")
    a = ap.parse_args()

    data = a.data
    if not data:
        data = "/tmp/tb_bench_set"
        if not os.path.isdir(data):
            sh([a.trainbench, "mkdata", "--out", data, "--classes", "10", "--per-class", "300"])
    counts = [int(t) for t in a.threads.split(",")]
    import PIL
    import torch
    import torchvision

    lines = []

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    nfiles = sum(len(n) for _, _, n in os.walk(data))
    mb = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(data) for f in fs) / 1e6
    say(f"# loader_vs_pillow: {data}: {nfiles} files, {mb:.0f} MB; train transform at 224, batch 64")
    say(f"# machine: {cpu_model()}, {os.cpu_count()} CPUs, {platform.platform()}")
    say(f"# versions: {sh([a.trainbench, '--version']).strip()}; torch {torch.__version__}, "
        f"torchvision {torchvision.__version__}, Pillow {PIL.__version__}, Python {platform.python_version()}")
    say(f"# load average before: {loadavg()}")
    say(f"# command: {' '.join(sys.argv)}")

    tb = {}
    for mode in ("fast", "partial", "full"):
        tb[mode], header = trainbench_rows(a.trainbench, data, a.threads, mode, a.batches, a.repeat)
    say("# " + header[2:].replace("decode full", "decode fast|partial|full"))
    pil = {k: pillow_rate(data, k, a.pillow_batches, a.repeat) for k in counts}
    tj, tjn = tjbench_rate(data, a.tjbench_files)
    say(f"# load average after: {loadavg()}")
    say()
    say("| cores | pipeline | img/s | img/s per core | vs Pillow | decode ms/img | resize+store ms/img |")
    say("|---:|---|---:|---:|---:|---:|---:|")
    for k in counts:
        say(f"| {k} | torchvision + Pillow, DataLoader({k} workers) | {pil[k]:.0f} | {pil[k] / k:.0f} | 1.00 | | |")
        for mode in ("fast", "partial", "full"):
            r = tb[mode].get(k)
            if r:
                say(f"| {k} | trainbench loader, decode {mode} | {r['img_s']:.0f} | {r['img_s'] / k:.0f} | "
                    f"{r['img_s'] / pil[k]:.2f} | {r['decode_ms']:.3f} | {r['resize_ms']:.3f} |")
    if tj:
        say(f"| 1 | tjbench whole-image decode only ({tjn} files) | {tj:.0f} | {tj:.0f} | {tj / pil[counts[0]] * counts[0]:.2f} "
            f"| {1e3 / tj:.3f} | |")
    say()
    f1 = tb["fast"].get(1)
    if f1 and tj:
        say(f"crop-aware decode (fast) takes {f1['decode_ms']:.3f} ms per image (file read included) against "
            f"{1e3 / tj:.3f} ms for tjbench's whole-image decode and {tb['full'][1]['decode_ms']:.3f} ms for "
            f"trainbench's whole-image decode: {1e3 / tj / f1['decode_ms']:.2f}x and "
            f"{tb['full'][1]['decode_ms'] / f1['decode_ms']:.2f}x less decode time; the whole loader "
            f"(decode, resize, normalise) runs at {f1['img_s']:.0f} img/s per core, "
            f"{f1['img_s'] / tj:.2f}x tjbench's decode-only rate.")
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
