#!/usr/bin/env python3
"""feed_table.py: the markdown of bench/gpu_feed.sh - SEEDS.md section 2's
data-loading table for trainbench's loader and for torchvision + Pillow +
DataLoader on the same data and GPU, the decode rates without training, and
the GPU path's decode quality.

  bench/feed_table.py --tb FEED.h5 [--torch FEED.jsonl] [--decode LOADER.h5 ...]
      [--psnr PSNR.md ...] [--note TEXT ...] --out feed.md

FEED.h5: `trainbench loader-bench --feed --results`; FEED.jsonl:
bench/torch_feed.py --json; LOADER.h5: `trainbench loader-bench --results`
(decode alone); PSNR.md: bench/loader_psnr.py --out."""
import argparse
import json
import math
import sys

import h5py

SEEDS = [  # SEEDS.md section 2, as reported
    ("no worker (main thread decodes)", "48 %", "125"),
    ("8 workers", "12 %", "410"),
    ("16 workers, persistent", "5 %", "482"),
    ("16 workers, prefetch 3, pinned memory", "3 %", "495"),
]


def s(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def num(v, fmt="{:.1f}"):
    return "n/m" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)


def tb_label(threads, prefetch, pinned, gpu, r=None):
    who = "no worker (main thread decodes)" if threads == 0 else f"{threads} worker thread{'s' if threads > 1 else ''}"
    parts = [who, f"prefetch {prefetch}", "pinned memory" if pinned else "pageable memory"]
    if gpu:
        parts.append("nvJPEG decode")
        # files from before the GPU stage's columns have none of them
        if r is not None and "gpu_stages" in r:
            n = int(r["gpu_stages"])
            parts[-1] += (f" ({n} GPU stage{'s' if n != 1 else ''}: {num(float(r['gpu_stage_ms_per_batch']))} ms "
                          f"per batch, {num(float(r['gpu_stage_busy_pct']), '{:.0f}')} % busy)")
    return ", ".join(parts)


def torch_label(r):
    w = r["workers"]
    who = "no worker (main thread decodes)" if w == 0 else f"{w} workers" + (", persistent" if r["persistent"] else "")
    parts = [who]
    if w:
        parts.append(f"prefetch {r['prefetch']}")
    parts.append("pinned memory" if r["pin_memory"] else "pageable memory")
    return ", ".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tb", action="append", default=[])
    ap.add_argument("--torch")
    ap.add_argument("--decode", action="append", default=[])
    ap.add_argument("--psnr", action="append", default=[])
    ap.add_argument("--note", action="append", default=[])
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    out = ["# Feeding the GPU: the data-loading table (SEEDS.md section 2)", ""]
    out += [f"- {n}" for n in a.note]
    if a.note:
        out.append("")
    cols = "| loader configuration | GPU idle % | waiting for data % | img/s | ms per batch | GPU-Util % |"
    sep = "|---|---:|---:|---:|---:|---:|"
    tb_rows = []
    for path in a.tb:
        try:
            f = h5py.File(path, "r")
        except OSError as e:
            out += [f"trainbench results {path}: not readable ({e})", ""]
            continue
        with f:
            at = f.attrs
            out += [f"## trainbench: {s(at['model'])} {s(at['precision'])}, batch {int(at['batch_size'])} at "
                    f"{int(at['image_size'])}, {int(at['samples'])} JPEGs ({s(at['data'])})", "",
                    f"{s(at['backend'])} on {s(at['device_names'])}; {int(at['warmup_steps'])} untimed + "
                    f"{int(at['steps'])} timed steps per row; GPU columns: {s(at['device_columns'])}.", "",
                    f"`{s(at['command_line'])}`", "", cols, sep]
            g = f["feed"]
            n = len(g["threads"])
            for i in range(n):
                r = {k: g[k][i] for k in g}
                gpu = bool(r.get("gpu_decode", 0))
                label = tb_label(int(r["threads"]), int(r["prefetch"]), int(r["pinned"]), gpu, r)
                tb_rows.append((int(r["threads"]), int(r["prefetch"]), int(r["pinned"]), gpu, r))
                out.append(f"| {label} | {num(float(r['gpu_idle_pct']))} | {num(float(r['wait_pct']))} | "
                           f"{num(float(r['img_per_s']), '{:.0f}')} | {num(float(r['ms_per_batch']))} | "
                           f"{num(float(r['gpu_util_pct']))} |")
            out.append("")
    torch_rows = []
    if a.torch:
        try:
            with open(a.torch) as fh:
                torch_rows = [json.loads(l) for l in fh if l.strip()]
        except OSError as e:
            out += [f"PyTorch results {a.torch}: not readable ({e})", ""]
        if torch_rows:
            r0 = torch_rows[0]
            out += [f"## PyTorch: {r0['loader']} feeding ResNet-50 (bf16 autocast, channels_last), batch {r0['batch']}",
                    "", f"{r0['steps']} timed steps per row; GPU-Util from NVML (pynvml).", "", cols, sep]
            for r in torch_rows:
                out.append(f"| {torch_label(r)} | {num(r.get('gpu_idle_pct'))} | {num(r.get('wait_pct'))} | "
                           f"{num(r.get('img_per_s'), '{:.0f}')} | {num(r.get('ms_per_batch'))} | "
                           f"{num(r.get('gpu_util_pct'))} |")
            out.append("")
    if tb_rows or torch_rows:
        out += ["## Side by side, at the seeds' rows", "",
                "| loader configuration | seeds: GPU idle | seeds: img/s | trainbench: GPU idle / img/s | "
                "PyTorch: GPU idle / img/s |", "|---|---:|---:|---:|---:|"]

        def pick_tb(threads, prefetch, pinned):
            # the row with these settings, else the closest of that thread count (same pinning first)
            c = [r for (t, p, pn, gpu, r) in tb_rows if t == threads and not gpu and p == prefetch and pn == pinned]
            c = c or [r for (t, p, pn, gpu, r) in tb_rows if t == threads and not gpu and pn == pinned]
            c = c or [r for (t, p, pn, gpu, r) in tb_rows if t == threads and not gpu]
            return c[0] if c else None

        def pick_torch(workers, pin=None):
            c = [r for r in torch_rows if r["workers"] == workers and (pin is None or r["pin_memory"] == pin)]
            return c[-1] if c else None

        def cell_tb(r):
            return "-" if r is None else f"{num(float(r['gpu_idle_pct']))} % / {float(r['img_per_s']):.0f}"

        def cell_torch(r):
            return "-" if r is None else f"{num(r.get('gpu_idle_pct'))} % / {r['img_per_s']:.0f}"

        picks = [(pick_tb(0, 2, 0), pick_torch(0)), (pick_tb(8, 2, 0), pick_torch(8)),
                 (pick_tb(16, 2, 0), pick_torch(16)), (pick_tb(16, 3, 1), pick_torch(16, True))]
        for (label, idle, ips), (t, p) in zip(SEEDS, picks):
            out.append(f"| {label} | {idle} | {ips} | {cell_tb(t)} | {cell_torch(p)} |")
        out += ["", "The seeds' rows are a field report on other hardware (SEEDS.md); trainbench's loader threads are "
                "always persistent; PyTorch's pinned row is the 16-worker DataLoader with pin_memory.", ""]
    if a.decode:
        out += ["## Decode alone (no training): the loader's ceiling", "",
                "| decoder | threads | img/s | ms per batch | batch, size | samples GPU / CPU |",
                "|---|---:|---:|---:|---|---|"]
        for path in a.decode:
            try:
                with h5py.File(path, "r") as f:
                    at = f.attrs
                    g = f["loader"]
                    dec = s(at["decode"])
                    for i in range(len(g["threads"])):
                        who = (f"--decode {dec}: {s(at['decoder'])}" if "decoder" in at
                               else f"--decode {dec}")
                        out.append(f"| {who} | {int(g['threads'][i])} | {g['img_per_s'][i]:.0f} | "
                                   f"{g['ms_per_batch'][i]:.2f} | {int(at['batch_size'])}, {int(at['image_size'])} | "
                                   f"{s(at.get('gpu_split', '-'))} |")
            except (OSError, KeyError) as e:
                out.append(f"| {path}: not readable ({e}) | | | | | |")
        out.append("")
    for path in a.psnr:
        out += ["## Decode quality: the GPU path against the CPU path on the same crop boxes", ""]
        try:
            with open(path) as fh:
                out += [fh.read().rstrip(), ""]
        except OSError as e:
            out += [f"{path}: not readable ({e})", ""]
    with open(a.out, "w") as fh:
        fh.write("\n".join(out) + "\n")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
