#!/usr/bin/python3
"""test_async_step.py - the asynchronous step (the CUDA backend's: events,
records collected later, the device's non-finite flag, lr and grad scale
preset before the step, labels through a pinned ring) run on the CPU backend
with --step-mode async, against the synchronous step every CPU test uses.

  test_async_step.py --trainbench TB [--mpiexec MPIEXEC --ranks N] [--last-batch keep] [--cuda] ...

For each mode the same run (--save, --results): the final weights and
momentum must be bit-identical, and so must every step's loss in /steps;
the async run must record step_mode async, its phases must be
non-negative and sum to at most the step time, and its /ranks must have a
timed summary. With --cuda the two runs are the CUDA backend's with and
without --comm nccl (label gpu; see tests/gpu/README.md), compared the same
way, or with --cuda-graph on and off (--graph).
Exit 0 on success, 1 on a difference, 77 when h5py or mpiexec is missing.
"""
import argparse
import os
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"SKIP: {e} (install python3-h5py)")
    sys.exit(77)


def run(cmd, env=None):
    print("+ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    print(r.stdout[-2500:])
    if r.returncode != 0:
        print(r.stderr[-3000:])
        print(f"FAIL: exit {r.returncode}")
        sys.exit(1)
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainbench", required=True)
    ap.add_argument("--mpiexec", default="")
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--last-batch", default="drop")
    ap.add_argument("--synthetic-size", type=int, default=40)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--image-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--mode", default="sync-async",
                    choices=["sync-async", "nccl-plain", "graph-eager", "staged-plain", "bf16-fp32"],
                    help="which two runs: sync vs async step (CPU); on CUDA: --comm nccl vs no comm, "
                         "--cuda-graph on vs off, --comm mpi (staged) vs no comm, bf16 vs fp32 wire")
    ap.add_argument("--extra", default="", help="more train flags for both runs")
    ap.add_argument("--tolerance", type=float, default=0.0,
                    help="largest relative L2 difference of the weights allowed (0: bit-identical)")
    a = ap.parse_args()
    if a.ranks > 1 and not a.mpiexec:
        print("SKIP: no mpiexec (trainbench built without MPI)")
        sys.exit(77)
    base = [a.trainbench, "--model", a.model, "--image-size", str(a.image_size), "--batch-size", str(a.batch),
            "--synthetic-size", str(a.synthetic_size), "--steps", str(a.steps), "--warmup-steps", "2",
            "--last-batch", a.last_batch, "--scaling-steps", "2", "--scaling-warmup", "1", "--print-every", "3",
            "--timeout", "120"] + a.extra.split()
    cpu = a.mode == "sync-async"
    if cpu:
        base += ["--backend", "cpu", "--threads", "1"]
        pair = (("sync", ["--step-mode", "sync"]), ("async", ["--step-mode", "async"]))
    elif a.mode == "nccl-plain":
        base += ["--backend", "cuda"]
        pair = (("plain", ["--cuda-graph", "off"]), ("nccl", ["--comm", "nccl", "--cuda-graph", "off"]))
    elif a.mode == "staged-plain":
        base += ["--backend", "cuda"]
        pair = (("plain", ["--cuda-graph", "off"]), ("staged", ["--comm", "mpi"]))
    elif a.mode == "bf16-fp32":
        base += ["--backend", "cuda", "--comm", "nccl"]
        pair = (("fp32", []), ("bf16", ["--allreduce-dtype", "bf16"]))
    else:
        base += ["--backend", "cuda"]
        pair = (("eager", ["--cuda-graph", "off"]), ("graph", ["--cuda-graph", "on", "--graph-warmup", "2"]))
    launch = [a.mpiexec, "-n", str(a.ranks)] if a.ranks > 1 else []
    tmp = tempfile.mkdtemp(prefix="tb_async_")
    out = {}
    for name, flags in pair:
        ck, res = os.path.join(tmp, f"{name}.ckpt.h5"), os.path.join(tmp, f"{name}.h5")
        text = run(launch + base + flags + ["--save", ck, "--results", res])
        out[name] = (ck, res, text)
    (na, (cka, ra, _)), (nb, (ckb, rb, tb_)) = [(n, out[n]) for n, _ in pair]
    bad = []
    with h5py.File(cka, "r") as A, h5py.File(ckb, "r") as B:
        num = den = 0.0
        for g in ("params", "momentum"):
            for k in A[g]:
                x, y = A[g][k][()].astype(np.float64), B[g][k][()].astype(np.float64)
                num += float(np.sum((x - y) ** 2))
                den += float(np.sum(x ** 2))
                if a.tolerance == 0 and not np.array_equal(x, y):
                    bad.append(f"/{g}/{k} differs: max |d| {np.max(np.abs(x - y)):.3g}")
        rel = (num / den) ** 0.5 if den > 0 else 0.0
        print(f"# weights and momentum, {na} vs {nb}: relative L2 difference {rel:.3e}")
        if a.tolerance > 0 and not rel <= a.tolerance:
            bad.append(f"relative L2 difference {rel:.3e} above {a.tolerance}")
        for k in A["params"]:
            if k.endswith("num_batches_tracked") and A["params"][k][()] != B["params"][k][()]:
                bad.append(f"{k}: {A['params'][k][()]} vs {B['params'][k][()]}")
    with h5py.File(ra, "r") as A, h5py.File(rb, "r") as B:
        la, lb = A["steps/loss"][()], B["steps/loss"][()]
        print(f"# losses {na}: {la}\n# losses {nb}: {lb}")
        if a.tolerance == 0 and not np.array_equal(la, lb):
            bad.append("the per-step losses differ")
        elif a.tolerance > 0 and not np.allclose(la, lb, rtol=10 * a.tolerance):
            bad.append("the per-step losses differ beyond the tolerance")
        if cpu:
            mode = B.attrs.get("step_mode")
            mode = mode.decode() if isinstance(mode, bytes) else str(mode)
            if mode != "async":
                bad.append(f"step_mode is {mode!r}, not 'async'")
        st = B["steps"]
        phases = sum(st[f"{p}_ms"][()] for p in ("data", "h2d", "forward", "backward", "allreduce", "optimizer"))
        if np.any(phases > st["step_ms"][()] * (1 + 1e-9) + 1e-6):
            bad.append(f"phases sum above the step time: {phases} vs {st['step_ms'][()]}")
        for p in ("data", "h2d", "forward", "backward", "allreduce", "optimizer"):
            if np.any(st[f"{p}_ms"][()] < -1e-6):
                bad.append(f"negative {p} time")
        if not np.all(B["ranks/steps"][()] > 0):
            bad.append("a rank has no timed steps in /ranks")
        if "devices" not in B or "conv_algorithms" not in B:
            bad.append("no /devices or /conv_algorithms table")
    for b in bad:
        print("FAIL " + b)
    print(f"# test_async_step {a.mode}: {len(bad)} problem(s)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
