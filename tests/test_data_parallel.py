#!/usr/bin/python3
"""test_data_parallel.py - data-parallel training is exactly the average of
per-shard gradients.

1. A starting checkpoint with non-zero momentum: one `trainbench train` step.
2. A batch file of N rows; `mpirun -np R trainbench train --batch-file` takes
   one step over it (rank r gets its shard by data/shard.h's rule); with
   --short, two steps over N = 2*R*b - 1 rows, so the second step's shards
   are uneven and samples must be weighted, not ranks. The last step is
   checked, from the data-parallel run's own state before it.
3. Independently, `trainbench step` computes each shard's gradient alone.
4. Here: g = sum_r (n_r/N) g_r, then torch.optim.SGD's update in float32,
   step after step; the parameters and momentum rank 0 saved must match
   within tolerance, and its BatchNorm running statistics must be exactly
   those of shard 0's last step (DDP keeps rank 0's buffers).
Exit 0 on success, 1 on mismatch, 77 when h5py/numpy or mpirun are missing.
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

RTOL, ATOL_SCALE = 1e-5, 1e-6   # float32; equal shards (n/N = 1/2) are bit-exact


def run(cmd, env=None):
    print("+ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout[-3000:], r.stderr[-3000:])
        sys.exit(f"command failed with exit {r.returncode}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainbench", required=True)
    ap.add_argument("--mpiexec", default="")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4, help="per-rank batch")
    ap.add_argument("--short", action="store_true", help="N = ranks*batch - 1 (uneven last shard)")
    a = ap.parse_args()
    if a.ranks > 1 and not a.mpiexec:
        print("SKIP: no mpiexec (trainbench built without MPI)")
        sys.exit(77)
    tb = a.trainbench
    lr, mom, wd = 0.05, 0.9, 1e-4
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    with tempfile.TemporaryDirectory(prefix="tb_dp_") as d:
        p = lambda n: os.path.join(d, n)
        common = ["--model", "resnet18", "--image-size", "32", "--threads", "1"]
        run([tb, "train", *common, "--classes", "10", "--batch-size", "4", "--steps", "1",
             "--warmup-steps", "0", "--scaling-steps", "0", "--results", "", "--save", p("ckpt0.h5")])

        # one full step, or (--short) a full step then a step whose R*b-1 samples split unevenly
        steps = 2 if a.short else 1
        n = steps * a.ranks * a.batch - (1 if a.short else 0)
        rng = np.random.default_rng(7)
        images = rng.standard_normal((n, 3, 32, 32)).astype(np.float32)
        labels = rng.integers(0, 10, n).astype(np.int64)
        with h5py.File(p("all.h5"), "w") as f:
            f["images"], f["labels"] = images, labels

        launcher = [a.mpiexec, "-n", str(a.ranks)] if a.ranks > 1 else []

        def dp_run(k):  # the data-parallel job over the first k steps -> dp{k}.h5
            run(launcher + [tb, "train", *common, "--init", p("ckpt0.h5"), "--batch-file", p("all.h5"),
                            "--batch-size", str(a.batch), "--steps", str(k), "--warmup-steps", "0",
                            "--scaling-steps", "0", "--lr", str(lr), "--lr-base-batch",
                            str(a.ranks * a.batch), "--lr-schedule", "constant", "--lr-warmup-steps",
                            "0", "--momentum", str(mom), "--weight-decay", str(wd), "--results", "",
                            "--save", p(f"dp{k}.h5")], env=env)

        # Each step is checked from the data-parallel run's own state before it
        # (ckpt0, then dp1.h5): data/shard.h's rule, `trainbench step` per shard,
        # the sample-weighted mean and torch.optim.SGD's update here, in float32.
        # (Rebuilding step 2 from this script's own step-1 weights would let
        # float32 rounding through 4-value BatchNorms at 32 px blur the check.)
        for s in range(steps):
            dp_run(s + 1)
            ckpt = p("ckpt0.h5") if s == 0 else p(f"dp{s}.h5")
            with h5py.File(ckpt) as c:
                params = {k: c["params"][k][()] for k in c["momentum"]}
                mom_buf = {k: c["momentum"][k][()] for k in c["momentum"]}
            g0 = s * a.ranks * a.batch
            left = min(a.ranks * a.batch, n - g0)
            if left == a.ranks * a.batch:
                counts = [a.batch] * a.ranks
            else:
                base, extra = divmod(left, a.ranks)
                counts = [base + (1 if r < extra else 0) for r in range(a.ranks)]
            starts = [g0 + sum(counts[:r]) for r in range(a.ranks)]
            grads = []
            for r in range(a.ranks):
                with h5py.File(p(f"shard{s}_{r}.h5"), "w") as f:
                    f["images"] = images[starts[r]:starts[r] + counts[r]]
                    f["labels"] = labels[starts[r]:starts[r] + counts[r]]
                run([tb, "step", "--ckpt", ckpt, "--batch", p(f"shard{s}_{r}.h5"), "--out",
                     p(f"step{s}_{r}.h5"), "--lr", str(lr), "--momentum", str(mom),
                     "--weight-decay", str(wd), "--threads", "1"])
                with h5py.File(p(f"step{s}_{r}.h5")) as f:
                    grads.append({k: f["grads"][k][()] for k in f["grads"]})
            total = sum(counts)
            for name in params:
                g = sum(np.float32(counts[r] / total) * grads[r][name] for r in range(a.ranks)).astype(np.float32)
                gi = g + np.float32(wd) * params[name]
                mom_buf[name] = np.float32(mom) * mom_buf[name] + gi
                params[name] = params[name] - np.float32(lr) * mom_buf[name]

        bad = 0
        worst = 0.0
        with h5py.File(p(f"dp{steps}.h5")) as dp, h5py.File(p(f"step{steps - 1}_0.h5")) as s0:
            for name in params:
                for what, want, got in (("params", params[name], dp["params"][name][()]),
                                        ("momentum", mom_buf[name], dp["momentum"][name][()])):
                    err = np.abs(got - want)
                    tol = ATOL_SCALE * np.abs(want).max() + RTOL * np.abs(want)
                    rel = float(err.max() / max(np.abs(want).max(), 1e-30))
                    worst = max(worst, rel)
                    if (err > tol).any():
                        bad += 1
                        print(f"FAIL {what}/{name}: max err {err.max():.3e} (rel {rel:.3e})")
            for name in s0["params"]:
                if "running" in name or "num_batches" in name:
                    if not np.array_equal(s0["params"][name][()], dp["params"][name][()]):
                        bad += 1
                        print(f"FAIL params/{name}: rank 0's BN buffer differs from shard 0's step")
        print(f"# data parallel, {a.ranks} ranks, {steps} step(s), last shards {counts}: {len(params)} tensors, "
              f"worst max-relative error {worst:.2e} (rtol {RTOL}, atol {ATOL_SCALE} x max|ref|), "
              f"{bad} failed")
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
