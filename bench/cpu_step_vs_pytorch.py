#!/usr/bin/python3
"""cpu_step_vs_pytorch.py - one ResNet training step on the CPU: trainbench's
CPU backend against PyTorch CPU, same model, threads, batch and image size,
in the same run.

Both sides time full training steps (forward in train mode, mean
cross-entropy, backward, SGD with momentum 0.9 and weight decay 1e-4) after
warm-up steps; rounds alternate between the two so that machine noise hits
both alike, and each side's best round is reported with the median.

    bench/cpu_step_vs_pytorch.py --trainbench build/trainbench \
        --configs 8x224,16x112 --threads 2 --out results/cpu_step_resnet50.md

--tb-variant LABEL:NAME=VALUE,... (repeatable) runs trainbench once per
variant in every round, with those environment variables (PyTorch's side
never sees them): e.g. the BLAS kernels before and after trainbench chose
them on a machine whose OpenBLAS fell back, emulated with
  --tb-variant "generic kernels:OPENBLAS_CORETYPE=Prescott"
  --tb-variant "trainbench's choice:OPENBLAS_CORETYPE=Prescott,TB_TEST_BLAS_FALLBACK=1"
Each row names the BLAS kernels trainbench ran (its header line). A
variant's binary=PATH runs that trainbench instead of --trainbench (an A/B
of two builds in the same rounds):
  --tb-variant "before:binary=/tmp/old/build/trainbench" --tb-variant "after:"
"""
import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time


def pytorch_rate(model, batch, size, threads, classes, warmup, steps):
    import torch
    import torchvision
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    m = getattr(torchvision.models, model)(num_classes=classes)
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(batch, 3, size, size)
    y = torch.randint(0, classes, (batch,))
    for i in range(warmup + steps):
        if i == warmup:
            t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
    return steps * batch / (time.perf_counter() - t0)


def trainbench_rate(binary, model, batch, size, threads, classes, warmup, steps, env_extra=None):
    cmd = [binary, "train", "--backend", "cpu", "--model", model, "--batch-size", str(batch),
           "--image-size", str(size), "--threads", str(threads), "--classes", str(classes),
           "--steps", str(warmup + steps), "--warmup-steps", str(warmup),
           "--lr", "0.01", "--lr-base-batch", str(batch), "--lr-schedule", "constant",
           "--momentum", "0.9", "--weight-decay", "1e-4",
           "--print-every", "1000000", "--scaling-steps", "0", "--results", ""]
    env = dict(os.environ, **(env_extra or {}))
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    # "# training: 7 steps, loss a -> b, 5.61 img/s (137.9 GFLOP/s) over 5 timed steps"
    m = re.search(r"^# training: .* ([0-9.]+) img/s", out, re.M)
    if not m:
        raise RuntimeError("no summary in trainbench output:\n" + out)
    k = re.search(r"^# cpu: .*BLAS: \S+ \S+ (\S+) kernels", out, re.M)
    prefix = " ".join(f"{n}={v}" for n, v in (env_extra or {}).items())
    return float(m.group(1)), (prefix + " " if prefix else "") + " ".join(cmd), k.group(1) if k else "?"


def parse_variant(text, default_binary):
    """'LABEL:NAME=VALUE,...' -> (label, binary, {NAME: VALUE}); binary=PATH is the trainbench to run"""
    label, _, envs = text.partition(":")
    env = dict(kv.split("=", 1) for kv in envs.split(",") if kv)
    return label, env.pop("binary", default_binary), env


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trainbench", default="build/trainbench")
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--configs", default="8x224,16x112", help="BATCHxSIZE,...")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", help="write a markdown report here")
    ap.add_argument("--tb-variant", action="append", default=[], metavar="LABEL:NAME=VALUE,...",
                    help="run trainbench once per variant in each round, with these environment variables")
    a = ap.parse_args()

    import torch
    variants = [parse_variant(v, a.trainbench) for v in a.tb_variant] or [("", a.trainbench, {})]
    rows = []
    for cfg in a.configs.split(","):
        batch, size = (int(v) for v in cfg.split("x"))
        tb = {label: [] for label, _, _ in variants}
        pt, cmds, kern = [], {}, {}
        for r in range(a.rounds):
            for label, binary, env in variants:
                rate, cmds[label], kern[label] = trainbench_rate(binary, a.model, batch, size, a.threads,
                                                                 a.classes, a.warmup, a.steps, env)
                tb[label].append(rate)
            pt.append(pytorch_rate(a.model, batch, size, a.threads, a.classes, a.warmup, a.steps))
            print(f"# {a.model} {batch}x3x{size}x{size} round {r + 1}: " +
                  ", ".join(f"trainbench{' (' + l + ')' if l else ''} {tb[l][-1]:.2f} img/s" for l, _, _ in variants) +
                  f", pytorch {pt[-1]:.2f} img/s", flush=True)
        for label, _, _ in variants:
            rows.append((batch, size, max(tb[label]), statistics.median(tb[label]), max(pt), statistics.median(pt),
                         cmds[label], label, kern[label]))

    hdr = (f"| model | batch x size | threads | trainbench variant | BLAS kernels "
           f"| trainbench img/s (best / median) | PyTorch img/s (best / median) | ratio (best) | ratio (median) |")
    table = [hdr, "|---|---|---|---|---|---|---|---|---|"]
    for b, s, tbb, tbm, ptb, ptm, _, label, kern in rows:
        table.append(f"| {a.model} | {b} x 3 x {s} x {s} | {a.threads} | {label or 'default'} | {kern} "
                     f"| {tbb:.2f} / {tbm:.2f} | {ptb:.2f} / {ptm:.2f} | {tbb / ptb:.2f}x | {tbm / ptm:.2f}x |")
    print("\n".join(table))
    if a.out:
        tbv = "; ".join(dict.fromkeys(subprocess.run([b, "--version"], capture_output=True, text=True).stdout.strip()
                                      for _, b, _ in variants))
        with open(a.out + ".tmp", "w") as f:
            f.write(f"# {a.model} CPU training step: trainbench vs PyTorch\n\n")
            f.write(f"Machine: {cpu_name()}, {os.cpu_count()} cores; {platform.platform()}\n\n")
            f.write(f"Versions: {tbv}; PyTorch {torch.__version__} "
                    f"(oneDNN {'on' if torch.backends.mkldnn.is_available() else 'off'})\n\n")
            f.write(f"Each side: {a.warmup} warm-up + {a.steps} timed steps (forward in train mode, "
                    f"cross-entropy, backward, SGD momentum 0.9 wd 1e-4), {a.rounds} alternating "
                    f"rounds; img/s over the timed steps.\n\n")
            f.write("\n".join(table) + "\n\n")
            f.write("Command:\n\n```\n" + " ".join([sys.argv[0]] + sys.argv[1:]) + "\n```\n\n")
            f.write("trainbench was run as:\n\n```\n" + "\n".join(dict.fromkeys(r[6] for r in rows)) + "\n```\n")
        os.replace(a.out + ".tmp", a.out)


if __name__ == "__main__":
    main()
