#!/usr/bin/env python3
"""torch_feed.py DATA: the PyTorch side of the data-loading table (SEEDS.md
section 2): torchvision ImageFolder + Pillow + DataLoader feeding ResNet-50
training on the GPU, by loader configuration. DATA is an ImageFolder tree
(`trainbench mkdata` writes one).

For each configuration (workers, pin_memory, prefetch_factor, persistent
workers) it trains --steps timed steps after --warmup, with the standard
training transform (RandomResizedCrop 224, horizontal flip, ToTensor,
Normalize), bf16 autocast and channels_last, and reports (the warm-up is
--warmup steps plus workers x prefetch_factor more, the batches the
workers queued during the first steps, so the timed steps see the loader's
steady state, as trainbench's rows do):
  img/s         images trained per second
  ms/batch      wall time per step
  wait %        share of the step the main thread spent waiting for the
                loader (time in next(iterator)), the loader-bound share
  GPU-Util %    NVML's GPU-Util sampled during the timed steps (pynvml), when
                available; "GPU idle" = 100 - GPU-Util (only over a row of
                1 s or more: NVML's GPU-Util speaks for a window that long)
  cores         CPU seconds of the process and its DataLoader workers per
                wall second over the timed steps (the CPU budget; /proc)
  img/s/core    img/s per core used

  python3 bench/torch_feed.py /data/mk --workers 0,8,16 --json feed_torch.jsonl
"""
import argparse
import json
import os
import sys
import threading
import time

import torch
import torchvision
from torchvision import transforms


class UtilSampler:
    """GPU-Util over the window: the driver's own timestamped samples whose
    whole period lies in it (nvmlDeviceGetSamples), as trainbench's rows
    take it (src/device/nvml.c); else NVML's reading every 100 ms, on a
    thread, averaged."""

    def __init__(self, index):
        self.vals, self.stop, self.t = [], threading.Event(), None
        try:
            import pynvml
            pynvml.nvmlInit()
            self.nv, self.h = pynvml, pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception:
            self.nv = None

    def __enter__(self):
        self.t0_us = int(time.time() * 1e6)  # the window starts here, after NVML's set-up
        if self.nv:
            def run():
                while not self.stop.wait(0.1):
                    self.vals.append(self.nv.nvmlDeviceGetUtilizationRates(self.h).gpu)
            self.t = threading.Thread(target=run, daemon=True)
            self.t.start()
        return self

    def __exit__(self, *a):
        self.t1_us = int(time.time() * 1e6)
        self.stop.set()
        if self.t:
            self.t.join()

    def driver_mean(self):
        """(mean, samples) of the driver's samples inside the window, or (nan, 0)."""
        if not self.nv:
            return float("nan"), 0
        try:
            vt, samples = self.nv.nvmlDeviceGetSamples(self.h, self.nv.NVML_GPU_UTILIZATION_SAMPLES, self.t0_us)
        except Exception:
            return float("nan"), 0
        field = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal"}.get(vt, "uiVal")
        pts = sorted((s.timeStamp, float(getattr(s.sampleValue, field))) for s in samples)
        steps = sorted(b[0] - a[0] for a, b in zip(pts, pts[1:]) if b[0] > a[0])
        if not steps:
            return float("nan"), 0
        period = steps[len(steps) // 2]
        t1 = getattr(self, "t1_us", None) or int(time.time() * 1e6)
        inside = [v for t, v in pts if self.t0_us + period - period // 20 <= t <= t1]
        return (sum(inside) / len(inside), len(inside)) if inside else (float("nan"), 0)

    def mean(self):
        m, n = self.driver_mean()
        if n:
            return m
        return sum(self.vals) / len(self.vals) if self.vals else float("nan")


def _proc_cpu_s(pid):
    """utime + stime of a process (all its threads), seconds; 0 when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _children(pid):
    """Every live descendant of pid (DataLoader workers and what they start)."""
    kids = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for e in entries:
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(e))
    out, todo = [], [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def cpu_now():
    """CPU seconds so far of this process and of its live descendants, by pid."""
    me = os.getpid()
    return {p: _proc_cpu_s(p) for p in [me] + _children(me)}


def cpu_used(before, after):
    """CPU seconds between two cpu_now() readings (a worker that started in
    between counts from 0)."""
    return sum(v - before.get(p, 0.0) for p, v in after.items())


def run(args, workers, pin, prefetch, persistent):
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    tf = transforms.Compose([
        transforms.RandomResizedCrop(args.image),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ])
    ds = torchvision.datasets.ImageFolder(args.data, tf)
    kw = {}
    if workers > 0:
        kw = {"prefetch_factor": prefetch, "persistent_workers": persistent}
    dl = torch.utils.data.DataLoader(ds, batch_size=args.batch, shuffle=True, num_workers=workers,
                                     pin_memory=pin and cuda, drop_last=True, **kw)
    torch.manual_seed(1)
    model = torchvision.models.resnet50(num_classes=len(ds.classes)).to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5)
    lossf = torch.nn.CrossEntropyLoss()
    if cuda:
        torch.backends.cudnn.benchmark = True

    def batches():
        while True:
            for b in dl:
                yield b

    it = batches()
    wait = 0.0
    n = 0

    def step(x, y):
        x = x.to(dev, non_blocking=True).to(memory_format=torch.channels_last)
        y = y.to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
            loss = lossf(model(x), y)
        loss.backward()
        opt.step()

    # the warm-up, then as many steps again as the workers queued meanwhile
    # (workers x prefetch_factor batches, filled while cuDNN autotuned the
    # first step): timed, that queue would drain at the GPU's speed and
    # read as loader throughput
    queued = workers * prefetch if workers > 0 else 0
    for _ in range(args.warmup + queued):
        step(*next(it))
    if cuda:
        torch.cuda.synchronize()
    with UtilSampler(dev.index or 0 if cuda else 0) as u:
        c0 = cpu_now()
        t0 = time.perf_counter()
        steps = 0
        # --steps timed steps, then more until the row has lasted --min-row-seconds
        while steps < args.steps or time.perf_counter() - t0 < args.min_row_seconds:
            tw = time.perf_counter()
            x, y = next(it)
            wait += time.perf_counter() - tw
            step(x, y)
            n += x.shape[0]
            steps += 1
        if cuda:
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        cpu = cpu_used(c0, cpu_now())
    # the driver's samples inside the window speak for it; NVML's readings
    # only over a window of 1 s or more
    dm, dk = u.driver_mean()
    util = dm if dk else (u.mean() if dt >= 1.0 else float("nan"))
    cores = cpu / dt
    return {
        "framework": "pytorch", "loader": "torchvision ImageFolder + Pillow + DataLoader",
        "workers": workers, "pin_memory": pin, "prefetch": prefetch if workers else 0,
        "persistent": persistent if workers else False, "batch": args.batch, "steps": steps,
        "img_per_s": n / dt, "ms_per_batch": 1e3 * dt / steps, "wait_pct": 100 * wait / dt,
        "gpu_util_pct": util, "gpu_idle_pct": 100 - util, "row_s": dt,
        "cpu_cores": cores, "img_per_s_per_core": n / dt / cores if cores > 0 else float("nan"),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data")
    ap.add_argument("--workers", default="0,8,16")
    ap.add_argument("--pin", default="0,1", help="comma list of 0/1 (pin_memory)")
    ap.add_argument("--prefetch", type=int, default=2, help="prefetch_factor (PyTorch's default 2)")
    ap.add_argument("--persistent", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--min-row-seconds", type=float, default=1.25,
                    help="more timed steps than --steps until a row lasts this long (GPU-Util needs 1 s)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: no CUDA device for PyTorch")
        sys.exit(77)
    print(f"# PyTorch {torch.__version__}: DataLoader feeding ResNet-50 (bf16, channels_last), batch {args.batch}")
    print(f"# {'workers':>7} {'pin':>3} {'prefetch':>8} {'img/s':>8} {'ms/batch':>8} {'wait %':>6} "
          f"{'GPU-Util %':>10} {'GPU idle %':>10} {'cores':>6} {'img/s/core':>10}")
    for w in (int(v) for v in args.workers.split(",")):
        for pin in (bool(int(v)) for v in args.pin.split(",")):
            r = run(args, w, pin, args.prefetch, bool(args.persistent))
            print(f"  {w:>7} {int(pin):>3} {r['prefetch']:>8} {r['img_per_s']:8.1f} {r['ms_per_batch']:8.1f} "
                  f"{r['wait_pct']:6.1f} {r['gpu_util_pct']:10.1f} {r['gpu_idle_pct']:10.1f} {r['cpu_cores']:6.2f} "
                  f"{r['img_per_s_per_core']:10.1f}")
            sys.stdout.flush()
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
