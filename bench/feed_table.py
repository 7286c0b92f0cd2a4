#!/usr/bin/env python3
"""feed_table.py: the markdown of bench/gpu_feed.sh - SEEDS.md section 2's
data-loading table for trainbench's loader and for torchvision + Pillow +
DataLoader on the same data and GPU, with each row's CPU budget (cores used:
CPU seconds per wall second; img/s per core), the real-JPEG rows against the
same call's on-device rate (the `resident` row), the loader's stages, the
decode rates without training, the memory of a long loader run, and the GPU
path's decode quality.

  bench/feed_table.py --tb FEED.h5 [--torch FEED.jsonl] [--decode LOADER.h5 ...]
      [--memory LOADER.h5] [--psnr PSNR.md ...] [--note TEXT ...] --out feed.md

FEED.h5: `trainbench loader-bench --feed --results`; FEED.jsonl:
bench/torch_feed.py --json; LOADER.h5: `trainbench loader-bench --results`
(decode alone; with --memory-every: a /memory table); PSNR.md:
bench/loader_psnr.py --out. GPU idle is shown only for rows of 1 s or more
(NVML's GPU-Util speaks for a window that long; older files without row_s:
"n/r", not resolved)."""
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
STAGES = ["read", "check", "decode", "resize", "gpu_plan", "gpu_submit", "gpu_wait", "gpu_fallback", "dev_upload",
          "dev_decode", "dev_resize", "next_wait"]


def s(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def num(v, fmt="{:.1f}"):
    return "n/m" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)


def idle(r, key="gpu_idle_pct"):
    """GPU idle % (or GPU-Util %: key) where it was measured ("n/m"
    otherwise) over a row long enough for NVML to resolve it ("n/r"
    otherwise)."""
    v = r.get(key)
    if v is None or math.isnan(float(v)):
        return "n/m"
    row_s = r.get("row_s")
    if row_s is None or float(row_s) < 1.0:
        return "n/r"
    return num(float(v))


def min_row_note(at):
    m = float(at.get("min_row_seconds", 0))
    return f" (more until a row lasts {m:.2f} s)" if m > 0 else ""


def tb_label(r):
    if int(r.get("resident", 0)):
        return "resident: the same step on data in device memory (no loader)"
    threads, prefetch, pinned, gpu = int(r["threads"]), int(r["prefetch"]), int(r["pinned"]), int(r["gpu_decode"])
    who = "no worker (main thread decodes)" if threads == 0 else f"{threads} worker thread{'s' if threads > 1 else ''}"
    parts = [who, f"prefetch {prefetch}", "pinned memory" if pinned else "pageable memory"]
    if gpu:
        own = s(r.get("nvjpeg", b""))
        parts.append("nvJPEG decode" + (f" --nvjpeg {own}" if own else ""))
        # files from before the GPU stage's columns have none of them
        if "gpu_stages" in r:
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


COLS = ("| loader configuration | GPU idle % | waiting for data % | img/s | ms per batch | GPU-Util % | cores used | "
        "img/s per core |")
SEP = "|---|---:|---:|---:|---:|---:|---:|---:|"


def tb_tables(paths, out):
    """trainbench's feed tables; returns its rows (dicts) and the batch size."""
    rows, batch = [], None
    for path in paths:
        try:
            f = h5py.File(path, "r")
        except OSError as e:
            out += [f"trainbench results {path}: not readable ({e})", ""]
            continue
        with f:
            at = f.attrs
            batch = int(at["batch_size"])
            out += [f"## trainbench: {s(at['model'])} {s(at['precision'])}, batch {batch} at "
                    f"{int(at['image_size'])}, {int(at['samples'])} JPEGs ({s(at['data'])})", "",
                    f"{s(at['backend'])} on {s(at['device_names'])}; {int(at['warmup_steps'])} untimed + "
                    f"{int(at['steps'])} timed steps per row{min_row_note(at)}; GPU columns: "
                    f"{s(at['device_columns'])}.", "",
                    f"`{s(at['command_line'])}`", "", COLS, SEP]
            g = f["feed"]
            for i in range(len(g["threads"])):
                r = {k: g[k][i] for k in g}
                rows.append(r)
                out.append(f"| {tb_label(r)} | {idle(r)} | {num(float(r['wait_pct']))} | "
                           f"{num(float(r['img_per_s']), '{:.0f}')} | {num(float(r['ms_per_batch']))} | "
                           f"{idle(r, 'gpu_util_pct')} | {num(float(r.get('cpu_cores', math.nan)), '{:.2f}')} | "
                           f"{num(float(r.get('img_per_s_per_core', math.nan)), '{:.0f}')} |")
            out.append("")
            stage_table(rows[-len(g["threads"]):], out)
    return rows, batch


def stage_table(rows, out):
    """The loader's stages, ms per batch, for the rows that have them."""
    have = [r for r in rows if "stage_read_ms" in r and not int(r.get("resident", 0))]
    if not have:
        return
    used = [st for st in STAGES if any(float(r[f"stage_{st}_ms"]) > 0 for r in have)]
    out += ["Where a loader row's time goes, ms per batch by stage (host stages summed over the threads that ran "
            "them; dev_*: device time; data/loader_timeline.h):", "",
            "| loader configuration | loader cores | " + " | ".join(used) + " |",
            "|---|---:|" + "---:|" * len(used)]
    for r in have:
        out.append(f"| {tb_label(r)} | {num(float(r['loader_cores']), '{:.2f}')} | " +
                   " | ".join(num(float(r[f"stage_{st}_ms"]), "{:.2f}") for st in used) + " |")
    out.append("")


def headline(rows, torch_rows, batch, out):
    """The issue's figures: the best real-JPEG row against the resident row,
    and the 4-thread rows of both paths beside PyTorch's best."""
    res = [r for r in rows if int(r.get("resident", 0))]
    jpeg = [r for r in rows if not int(r.get("resident", 0))]
    if not jpeg:
        return
    best = max(jpeg, key=lambda r: float(r["img_per_s"]))
    lines = [f"## Batch {batch} fed from JPEG files", ""]
    cores = float(best.get("cpu_cores", math.nan))
    lines.append(f"- best real-JPEG row: {float(best['img_per_s']):.0f} img/s ({tb_label(best)}), "
                 f"{num(cores, '{:.2f}')} cores used")
    if res:
        on_dev = float(res[0]["img_per_s"])
        lines.append(f"- the same call's on-device rate (resident row): {on_dev:.0f} img/s; the JPEG row reaches "
                     f"{100 * float(best['img_per_s']) / on_dev:.1f} % of it")
    # nvJPEG on its defaults (any stage count), as bench/summary/feed.py's feed_nvjpeg_4thr_img_s: not the A/B
    # rows with their own --nvjpeg (sync=on, hybrid, cpu=PCT, whose batch is partly the CPU's)
    for gpu, name in ((1, "nvJPEG"), (0, "CPU (libjpeg-turbo)")):
        four = [r for r in jpeg if int(r["threads"]) == 4 and int(r["gpu_decode"]) == gpu
                and not s(r.get("nvjpeg", b""))]
        if four:
            b4 = max(four, key=lambda r: float(r["img_per_s"]))
            lines.append(f"- 4 loader threads, {name}: {float(b4['img_per_s']):.0f} img/s ({tb_label(b4)}), "
                         f"{num(float(b4.get('cpu_cores', math.nan)), '{:.2f}')} cores used "
                         f"({num(float(b4.get('img_per_s_per_core', math.nan)), '{:.0f}')} img/s per core)")
    if torch_rows:
        tb = max(torch_rows, key=lambda r: r["img_per_s"])
        lines.append(f"- PyTorch's best DataLoader row on the same files: {tb['img_per_s']:.0f} img/s "
                     f"({torch_label(tb)}), {num(tb.get('cpu_cores'), '{:.2f}')} cores used")
    out += lines + [""]


def torch_table(path, out):
    rows = []
    try:
        with open(path) as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
    except OSError as e:
        out += [f"PyTorch results {path}: not readable ({e})", ""]
    if rows:
        r0 = rows[0]
        out += [f"## PyTorch: {r0['loader']} feeding ResNet-50 (bf16 autocast, channels_last), batch {r0['batch']}",
                "", "GPU-Util from NVML (pynvml); cores from /proc (the process and its DataLoader workers).", "",
                COLS, SEP]
        for r in rows:
            out.append(f"| {torch_label(r)} | {idle(r)} | {num(r.get('wait_pct'))} | "
                       f"{num(r.get('img_per_s'), '{:.0f}')} | {num(r.get('ms_per_batch'))} | "
                       f"{idle(r, 'gpu_util_pct')} | {num(r.get('cpu_cores'), '{:.2f}')} | "
                       f"{num(r.get('img_per_s_per_core'), '{:.0f}')} |")
        out.append("")
    return rows


def seeds_table(tb_rows, torch_rows, out):
    out += ["## Side by side, at the seeds' rows", "",
            "| loader configuration | seeds: GPU idle | seeds: img/s | trainbench: GPU idle / img/s | "
            "PyTorch: GPU idle / img/s |", "|---|---:|---:|---:|---:|"]
    cpu_rows = [r for r in tb_rows if not int(r.get("resident", 0)) and not int(r["gpu_decode"])]

    def pick_tb(threads, prefetch, pinned):
        # the row with these settings, else the closest of that thread count (same pinning first)
        c = [r for r in cpu_rows if int(r["threads"]) == threads and int(r["prefetch"]) == prefetch
             and int(r["pinned"]) == pinned]
        c = c or [r for r in cpu_rows if int(r["threads"]) == threads and int(r["pinned"]) == pinned]
        c = c or [r for r in cpu_rows if int(r["threads"]) == threads]
        return c[0] if c else None

    def pick_torch(workers, pin=None):
        c = [r for r in torch_rows if r["workers"] == workers and (pin is None or r["pin_memory"] == pin)]
        return c[-1] if c else None

    def cell(r):
        return "-" if r is None else f"{idle(r)} % / {float(r['img_per_s']):.0f}"

    picks = [(pick_tb(0, 2, 0), pick_torch(0)), (pick_tb(8, 2, 0), pick_torch(8)),
             (pick_tb(16, 2, 0), pick_torch(16)), (pick_tb(16, 3, 1), pick_torch(16, True))]
    for (label, sidle, ips), (t, p) in zip(SEEDS, picks):
        out.append(f"| {label} | {sidle} | {ips} | {cell(t)} | {cell(p)} |")
    out += ["", "The seeds' rows are a field report on other hardware (SEEDS.md); trainbench's loader threads are "
            "always persistent; PyTorch's pinned row is the 16-worker DataLoader with pin_memory.", ""]


def decode_tables(paths, out):
    out += ["## Decode alone (no training): the loader's ceiling", "",
            "| decoder | threads | img/s | ms per batch | batch, size | cores used | img/s per core | samples GPU / CPU (/ CPU's share) |",
            "|---|---:|---:|---:|---|---:|---:|---|"]
    for path in paths:
        try:
            with h5py.File(path, "r") as f:
                at = f.attrs
                g = f["loader"]
                dec = s(at["decode"])
                opts = s(at.get("nvjpeg", ""))
                for i in range(len(g["threads"])):
                    who = f"--decode {dec}" + (f" --nvjpeg {opts}" if opts else "")
                    if "gpu_stages" in g and int(g["gpu_stages"][i]) > 0:
                        who += f", {int(g['gpu_stages'][i])} GPU stages"
                    if "decoder" in at:
                        who += f": {s(at['decoder'])}"
                    cores = g["cpu_cores"][i] if "cpu_cores" in g else math.nan
                    ipc = g["img_per_s_per_core"][i] if "img_per_s_per_core" in g else math.nan
                    out.append(f"| {who} | {int(g['threads'][i])} | {g['img_per_s'][i]:.0f} | "
                               f"{g['ms_per_batch'][i]:.2f} | {int(at['batch_size'])}, {int(at['image_size'])} | "
                               f"{num(float(cores), '{:.2f}')} | {num(float(ipc), '{:.0f}')} | "
                               f"{s(at.get('gpu_split', '-'))} |")
        except (OSError, KeyError) as e:
            out.append(f"| {path}: not readable ({e}) | | | | | | | |")
    out.append("")


def memory_table(path, out):
    """The memory samples of a long loader run: first, last, growth."""
    out += ["## Memory through a long loader run", ""]
    try:
        with h5py.File(path, "r") as f:
            g = f["memory"]
            at = f.attrs
            n = len(g["batch"])
            out += [f"`{s(at['command_line'])}`: {n} samples over {g['t_s'][n - 1]:.1f} s, "
                    f"{int(g['batch'][n - 1])} batches of {int(at['batch_size'])}.", "",
                    "| memory | first sample MiB | half-way MiB | last sample MiB | growth | growth, second half |",
                    "|---|---:|---:|---:|---:|---:|"]

            def grow(a, b):
                return f"{100 * (b - a) / a:+.2f} %" if a > 0 and not math.isnan(b) else "-"

            for col, what in (("rss_mib", "host RSS"), ("decoder_device_mib", "decoders' device memory"),
                              ("decoder_pinned_mib", "decoders' pinned host memory"),
                              ("device_used_mib", "device memory in use (cudaMemGetInfo)")):
                a, m, b = float(g[col][0]), float(g[col][n // 2]), float(g[col][n - 1])
                out.append(f"| {what} | {num(a)} | {num(m)} | {num(b)} | {grow(a, b)} | {grow(m, b)} |")
            out += ["", "The first half holds the warm-up (buffers growing to the largest batch they meet); a leak "
                    "grows the second half too."]
    except (OSError, KeyError) as e:
        out.append(f"{path}: no memory samples ({e})")
    out.append("")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tb", action="append", default=[])
    ap.add_argument("--torch")
    ap.add_argument("--decode", action="append", default=[])
    ap.add_argument("--memory")
    ap.add_argument("--psnr", action="append", default=[])
    ap.add_argument("--note", action="append", default=[])
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    out = ["# Feeding the GPU: the data-loading table (SEEDS.md section 2)", ""]
    out += [f"- {n}" for n in a.note]
    if a.note:
        out.append("")
    body = []
    tb_rows, batch = tb_tables(a.tb, body)
    torch_rows = torch_table(a.torch, body) if a.torch else []
    if tb_rows:
        headline(tb_rows, torch_rows, batch, out)
    out += body
    if tb_rows or torch_rows:
        seeds_table(tb_rows, torch_rows, out)
    if a.decode:
        decode_tables(a.decode, out)
    if a.memory:
        memory_table(a.memory, out)
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
