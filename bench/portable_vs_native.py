#!/usr/bin/python3
"""portable_vs_native.py - trainbench builds (and forced vector levels) side
by side on the same machine, in alternating rounds: the JPEG loader
(`loader-bench --threads 2 --image-size 224`) and the CPU ResNet-50 training
step (bench/cpu_step_vs_pytorch.py's `train --backend cpu` command).

Each --bin LABEL=PATH[:LEVEL] is one contestant: a trainbench binary, run
with TB_CPU_LEVEL=LEVEL when given (core/cpu_dispatch.h). Every round
runs every contestant once, in an order that rotates from round to round,
so that load from other work on the machine falls on all of them alike;
each contestant's median and best over the rounds are reported, and the
speed of each against --ref: by the medians, by the bests, and the median
of the per-round ratios (the paired estimate: a round's runs are close in
time, so it cancels most of the load that changes from round to round). The load average is
printed before and after. --step-bins limits the (slow) CPU step to some
contestants.

  bench/portable_vs_native.py --data /tmp/photos \\
      --bin portable=build/trainbench --bin native=build-native/trainbench \\
      --ref native --rounds 5 --out results/cpu_dispatch.md
"""
import argparse
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_step_vs_pytorch import cpu_name, trainbench_rate  # noqa: E402


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def env_for(level):
    env = dict(os.environ)
    env.pop("TB_CPU_LEVEL", None)
    if level:
        env["TB_CPU_LEVEL"] = level
    return env


def loader_rate(binary, level, data, threads, size, batches):
    cmd = [binary, "loader-bench", "--data", data, "--threads", str(threads), "--image-size", str(size),
           "--batches", str(batches)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env_for(level)).stdout
    lvl = re.search(r"^# cpu vector loops: (\S+)", out, re.M)
    for line in out.splitlines():
        f = line.split()
        if line.startswith("#") or len(f) < 7 or f[0] != str(threads):
            continue
        return dict(img_s=float(f[1]), decode_ms=float(f[5]), resize_ms=float(f[6]),
                    level=lvl.group(1) if lvl else "(not printed)"), " ".join(cmd)
    raise RuntimeError("no row in loader-bench output:\n" + out)


def step_rate(binary, level, model, batch, size, threads, warmup, steps):
    old = os.environ.pop("TB_CPU_LEVEL", None)
    if level:
        os.environ["TB_CPU_LEVEL"] = level
    try:
        rate, cmd, _kernels = trainbench_rate(binary, model, batch, size, threads, 1000, warmup, steps)
        return rate, cmd
    finally:
        os.environ.pop("TB_CPU_LEVEL", None)
        if old is not None:
            os.environ["TB_CPU_LEVEL"] = old


def summary(rows, ref, key, fmt, higher_better=True):
    """Median and best of each contestant, and its speed against ref: by the
    medians, by the bests, and the median of the per-round ratios (each
    round's pair ran minutes apart at most: the paired estimate). Speed:
    x / ref for rates, ref / x for times, so < 1 is slower either way."""
    pick = max if higher_better else min
    speed = (lambda x, r: x / r) if higher_better else (lambda x, r: r / x)
    out = [f"| contestant | level run | median {key} | best {key} | speed vs {ref}: medians | bests "
           f"| per-round ratios, median | rounds |", "|---|---|---:|---:|---:|---:|---:|---|"]
    rv = [r[key] for r in rows[ref]]
    for label, rs in rows.items():
        v = [r[key] for r in rs]
        paired = statistics.median(speed(x, r) for x, r in zip(v, rv))
        out.append(f"| {label} | {rs[0].get('level', '')} | {statistics.median(v):{fmt}} | {pick(v):{fmt}} "
                   f"| {speed(statistics.median(v), statistics.median(rv)):.3f} | {speed(pick(v), pick(rv)):.3f} "
                   f"| {paired:.3f} | {', '.join(f'{x:{fmt}}' for x in v)} |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", action="append", required=True, help="LABEL=PATH[:LEVEL]")
    ap.add_argument("--ref", required=True, help="the label the others are divided by")
    ap.add_argument("--data", required=True, help="JPEG set (bench/photo_set.py)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--batches", type=int, default=40, help="loader-bench --batches")
    ap.add_argument("--step", default="8x224", help="CPU step BATCHxSIZE ('' to skip)")
    ap.add_argument("--step-bins", help="labels that run the CPU step too (default: all)")
    ap.add_argument("--step-model", default="resnet50")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--out", help="write a markdown report here")
    ap.add_argument("--note", action="append", default=[], help="a paragraph for the report (how a build was made)")
    a = ap.parse_args()
    bins = {}
    for b in a.bin:
        label, spec = b.split("=", 1)
        path, _, level = spec.partition(":")
        bins[label] = (path, level)
    if a.ref not in bins:
        sys.exit(f"--ref {a.ref}: not one of the --bin labels")
    labels = list(bins)
    load0 = loadavg()
    print(f"# load average before: {load0}", flush=True)
    loader = {k: [] for k in labels}
    step_labels = a.step_bins.split(",") if a.step_bins else labels
    if a.ref not in step_labels or any(k not in bins for k in step_labels):
        sys.exit("--step-bins: labels of --bin, --ref among them")
    step = {k: [] for k in step_labels}
    cmds = {}
    for r in range(a.rounds):
        order = labels[r % len(labels):] + labels[:r % len(labels)]
        for k in order:
            path, level = bins[k]
            row, cmds["loader"] = loader_rate(path, level, a.data, a.threads, a.image_size, a.batches)
            loader[k].append(row)
            print(f"# round {r + 1} loader {k}: {row['img_s']:.1f} img/s (decode {row['decode_ms']:.3f}, resize "
                  f"{row['resize_ms']:.3f} ms/img, level {row['level']}), load {loadavg()}", flush=True)
        if a.step:
            bsz, size = (int(v) for v in a.step.split("x"))
            for k in [k for k in order if k in step_labels]:
                path, level = bins[k]
                rate, cmds["step"] = step_rate(path, level, a.step_model, bsz, size, a.threads, a.warmup, a.steps)
                step[k].append(dict(img_s=rate, level=loader[k][0]["level"]))
                print(f"# round {r + 1} step {k}: {rate:.2f} img/s, load {loadavg()}", flush=True)
    load1 = loadavg()
    print(f"# load average after: {load1}")
    text = [f"## loader-bench --threads {a.threads} --image-size {a.image_size} (img/s)", ""]
    text += summary(loader, a.ref, "img_s", ".1f")
    text += ["", "resize + normalise ms per image (loader-bench's resize_ms column):", ""]
    text += summary(loader, a.ref, "resize_ms", ".3f", higher_better=False)
    if a.step:
        text += ["", f"## CPU {a.step_model} training step, batch x size {a.step}, {a.threads} threads (img/s)", ""]
        text += summary(step, a.ref, "img_s", ".2f")
    print("\n".join(text))
    if a.out:
        with open(a.out + ".tmp", "w") as f:
            f.write("# Portable build vs -DTB_NATIVE=ON: runtime CPU dispatch (issue 32)\n\n")
            f.write(f"Machine: {cpu_name()}, {os.cpu_count()} cores; {platform.platform()}\n\n")
            for k in labels:
                v = subprocess.run([bins[k][0], "--version"], capture_output=True, text=True).stdout.strip()
                lv = f", TB_CPU_LEVEL={bins[k][1]}" if bins[k][1] else ""
                f.write(f"- {k}: `{bins[k][0]}`{lv}: {v}\n")
            for n in a.note:
                f.write(f"\n{n}\n")
            f.write(f"\n{a.rounds} rounds; each round runs every contestant once, the order rotating from round "
                    f"to round, so that the load of other work on the machine (other jobs shared its cores) "
                    f"falls on all alike. Load average before {load0}, after {load1}. Speed against {a.ref}: "
                    f"below 1 is slower (rates: x / {a.ref}; times: {a.ref} / x); 'per-round ratios, median' "
                    f"pairs each round's runs, which ran close in time.\n\n")
            f.write("\n".join(text) + "\n\n")
            f.write("Command:\n\n```\n" + shlex.join(sys.argv) + "\n```\n\n")
            f.write("Each contestant ran:\n\n```\n" + cmds["loader"] + "\n" + cmds.get("step", "") + "\n```\n")
        os.replace(a.out + ".tmp", a.out)


if __name__ == "__main__":
    main()
