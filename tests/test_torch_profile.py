#!/usr/bin/python3
"""test_torch_profile.py - the PyTorch side of the GPU bench's op profile,
on the CPU: bench/torch_resnet50.py --device cpu --profile 2 runs, prints
its category table and writes a JSON line whose categories hold the model's
ops (convolutions, BatchNorm both ways, loss, optimizer) and sum to its
ops total; then bench/op_profile_compare.py puts it beside a CPU
`trainbench train --op-profile 2` log: a markdown row per category with
numbers on both sides where both have the category, the sum and step rows;
and with neither input it fails with one line.

  test_torch_profile.py --trainbench BIN --repo DIR
Exit 0 when every check holds, 1 otherwise, 77 without torch/torchvision."""
import argparse
import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainbench", required=True)
    ap.add_argument("--repo", required=True)
    a = ap.parse_args()
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e} (the PyTorch baseline needs torch and torchvision)")
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="tb_torchprof_")
    atexit.register(shutil.rmtree, tmp, True)  # removed at exit, passed or failed
    pj = os.path.join(tmp, "prof.jsonl")
    bad = []
    cmd = [sys.executable, os.path.join(a.repo, "bench", "torch_resnet50.py"), "--device", "cpu", "--batch", "2",
           "--image", "32", "--classes", "10", "--steps", "1", "--warmup", "1", "--profile", "2",
           "--profile-json", pj]
    print("$ " + " ".join(cmd))
    p = subprocess.run(cmd, capture_output=True, text=True)
    print(p.stdout[-3000:] + p.stderr[-2000:])
    if p.returncode != 0:
        print(f"FAIL: torch_resnet50.py --profile exit {p.returncode}")
        sys.exit(1)
    if "# PyTorch op profile: 2 steps" not in p.stdout:
        bad.append("no '# PyTorch op profile' table printed")
    d = json.loads(open(pj).read().splitlines()[-1])
    cats = d["by_category"]
    for c in ("conv_fwd", "conv_bwd", "bn_fwd", "bn_bwd", "loss", "optimizer", "linear", "pool"):
        if c not in cats or not cats[c]["ms_per_step"] > 0:
            bad.append(f"category {c} empty in the CPU profile: {sorted(cats)}")
    tot = sum(v["ms_per_step"] for v in cats.values())
    if abs(tot - d["ms_per_step_ops"]) > 1e-6 * (1 + tot):
        bad.append(f"categories sum {tot} != ms_per_step_ops {d['ms_per_step_ops']}")
    if d["profile_steps"] != 2 or d["batch"] != 2:
        bad.append(f"profile_steps {d['profile_steps']} batch {d['batch']}")
    # most of the time is in a named category, not 'other'
    if cats.get("other", {}).get("ms_per_step", 0) > 0.2 * tot:
        bad.append(f"'other' holds {cats['other']['ms_per_step']:.3f} of {tot:.3f} ms: the CPU mapping misses ops")

    log = os.path.join(tmp, "tb.log")
    cmd = [a.trainbench, "--backend", "cpu", "--image-size", "32", "--batch-size", "2", "--steps", "2",
           "--warmup-steps", "1", "--scaling-steps", "0", "--threads", "1", "--op-profile", "2", "--results", ""]
    print("$ " + " ".join(cmd))
    with open(log, "w") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        bad.append(f"trainbench --op-profile exit {rc}")
    cmp = os.path.join(a.repo, "bench", "op_profile_compare.py")
    p = subprocess.run([sys.executable, cmp, "--tb-log", log, "--torch-json", pj], capture_output=True, text=True)
    md = p.stdout
    print(md[:3000])
    if p.returncode != 0:
        bad.append(f"op_profile_compare.py exit {p.returncode}: {p.stderr[-500:]}")
    num = r"[0-9]+\.[0-9]{3}"
    for cat in ("conv_fwd", "bn_fwd", "bn_bwd", "linear", "loss", "optimizer", "pool"):
        if not re.search(rf"^\| {cat} \| {num} \| {num} \| [0-9.]+ \|", md, re.M):
            bad.append(f"no markdown row with both sides for {cat}")
    for cat in ("conv_dgrad", "conv_wgrad"):  # trainbench only (PyTorch's CPU op does both)
        if not re.search(rf"^\| {cat} \| {num} \| - \| - \|", md, re.M):
            bad.append(f"no trainbench-only markdown row for {cat}")
    for row in ("**sum of ops**", "**step**", "not in an op"):
        if not re.search(rf"^\| {re.escape(row)} \| -?{num} \| -?{num} \|", md, re.M):
            bad.append(f"no '{row}' row with both sides")
    p = subprocess.run([sys.executable, cmp, "--tb-log", os.path.join(tmp, "none.log"), "--torch-json",
                        os.path.join(tmp, "none.jsonl")], capture_output=True, text=True)
    if p.returncode != 1 or len(p.stdout.strip().splitlines()) != 1 or "No op profile" not in p.stdout:
        bad.append(f"with no inputs: exit {p.returncode}, output {p.stdout!r}")
    for b in bad:
        print("FAIL: " + b)
    print("ok" if not bad else f"{len(bad)} failures")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
