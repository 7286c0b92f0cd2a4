#!/usr/bin/python3
"""check_results.py - a results file meets DESIGN.md's contract: provenance
attributes, status, and the /scaling, /steps and /ranks tables as groups of
equal-length 1-D columns whose values mean what their names say (one /ranks
row per rank, /steps counting up, the scaling columns' relations). Optional
checks on the run's numbers.

  check_results.py RUN.h5 [--ranks 1,2] [--loss-falls 0.8] [--status complete] [--cpu-budget]
Exit 0 when every check holds, 1 otherwise, 77 without h5py."""
import argparse
import sys

try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"SKIP: {e} (install python3-h5py)")
    sys.exit(77)

ATTRS = ["trainbench_version", "git_revision", "command_line", "start_time", "end_time", "status",
         "world_size", "hostnames", "backend", "device_names", "cuda_runtime_version",
         "cuda_driver_version", "cudnn_version", "nccl_version", "mpi_version", "hdf5_version",
         "libjpeg_turbo_version", "cpu_dispatch_level", "model", "precision", "batch_size", "image_size", "seed"]
SCALING = ["ranks", "global_batch", "img_per_s", "img_per_s_per_rank", "speedup", "efficiency",
           "epoch_time_s", "device_util_pct", "allreduce_busbw_GBps", "comm_share_pct"]
STEPS = ["step", "loss", "lr", "img_per_s", "data_ms", "h2d_ms", "forward_ms", "backward_ms",
         "allreduce_ms", "optimizer_ms"]
RANKS = ["rank", "host", "step_ms", "img_per_s"]


def check_values(f, bad):
    """What the contract's columns mean, beyond their names: the status, one
    /ranks row per rank, steps in order, and the scaling columns' relations
    (global batch = ranks x batch, img/s per rank, speedup over the 1-rank
    row = T1 / TN, epoch time = samples per epoch / img/s, percentages, and
    img/s and the comm share against the rows' own step times)."""
    status = f.attrs.get("status")
    if status not in ("complete", "aborted"):
        bad.append(f"status is {status!r}: the contract allows 'complete' or 'aborted'")
    ws = int(f.attrs.get("world_size", 0))
    if status == "complete" and "ranks" in f and "rank" in f["ranks"]:
        got = sorted(f["ranks/rank"][()].tolist())
        if got != list(range(ws)):
            bad.append(f"/ranks/rank is {got}, expected one row per rank of world_size {ws}")
    if "steps" in f and "step" in f["steps"]:
        st = f["steps/step"][()]
        if len(st) and (st[0] < 0 or np.any(np.diff(st) != 1)):
            bad.append(f"/steps/step does not count up by one from {st[:1]}: {st[:8]} ...")
    if "scaling" not in f or not all(c in f["scaling"] for c in SCALING):
        return
    c = {k: f["scaling"][k][()] for k in SCALING}
    if not len(c["ranks"]):
        return
    for k in ("ranks", "global_batch"):
        if c[k].dtype.kind not in "iu":
            bad.append(f"/scaling/{k} is {c[k].dtype}, not an integer column")
    n, ips = c["ranks"].astype(np.float64), c["img_per_s"]
    if not np.array_equal(c["global_batch"], c["ranks"] * int(f.attrs.get("batch_size", 0))):
        bad.append(f"/scaling/global_batch {c['global_batch']} is not ranks x batch_size")
    if not np.allclose(c["img_per_s_per_rank"], ips / n, rtol=1e-9):
        bad.append("/scaling/img_per_s_per_rank is not img_per_s / ranks")
    one = np.flatnonzero(c["ranks"] == 1)
    if len(one):
        t1, i1 = c["epoch_time_s"][one[0]], ips[one[0]]
        if not (np.allclose(c["speedup"], ips / i1, rtol=1e-6) and
                np.allclose(c["speedup"], t1 / c["epoch_time_s"], rtol=1e-6)):
            bad.append(f"/scaling/speedup {c['speedup']} is not img/s over the 1-rank row's (T1 / TN)")
    samples = f.attrs.get("dataset_size")
    if samples and not np.allclose(c["epoch_time_s"] * ips, samples, rtol=1e-6):
        bad.append(f"/scaling/epoch_time_s x img_per_s is not the epoch's {samples} samples")
    for k in ("device_util_pct", "comm_share_pct"):
        v = c[k][np.isfinite(c[k])]
        if np.any(v < 0) or np.any(v > 100.5):
            bad.append(f"/scaling/{k} {c[k]} is not a percentage")
    # the rate against the measured step times of the same rows (where the file has them): img/s is the
    # samples over the slowest rank's time, so global_batch / step_ms_max; the comm share is the
    # all-reduce's part of the step (medians over ranks: a ratio of medians, loosely)
    g = f["scaling"]
    if "step_ms_max" in g:
        want = c["global_batch"] * 1000.0 / g["step_ms_max"][()]
        if not np.allclose(ips, want, rtol=0.05):
            bad.append(f"/scaling/img_per_s {ips} is not global_batch over the slowest rank's step ({want})")
    if "allreduce_ms_median" in g and "step_ms_median" in g:
        share = 100.0 * g["allreduce_ms_median"][()] / g["step_ms_median"][()]
        if not np.allclose(c["comm_share_pct"], share, rtol=0.25, atol=1.0):
            bad.append(f"/scaling/comm_share_pct {c['comm_share_pct']} is not the all-reduce's share of the step "
                       f"({share})")
    bw = c["allreduce_busbw_GBps"]
    if np.any(bw[np.isfinite(bw)] < 0) or np.any(bw[c["ranks"] == 1] != 0):
        bad.append(f"/scaling/allreduce_busbw_GBps {bw}: negative, or non-zero for 1 rank (nothing to all-reduce)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--ranks", help="expected /scaling/ranks, e.g. 1,2")
    ap.add_argument("--loss-falls", type=float, help="last loss < this x first loss")
    ap.add_argument("--status", default="complete")
    ap.add_argument("--val-images", type=int, help="top1/top5 present, counted over this many images")
    ap.add_argument("--timeline-steps", type=int,
                    help="every row of /grad_ready and /buckets is a median over this many steps (the scaling "
                         "rows' timed ones: their warm-up left out)")
    ap.add_argument("--cpu-budget", action="store_true",
                    help="the CPU budget attributes: cores per rank > 0, the loader's share of them, img/s per core")
    a = ap.parse_args()
    bad = []
    with h5py.File(a.path, "r") as f:
        for k in ATTRS:
            if k not in f.attrs:
                bad.append(f"missing root attribute {k}")
        if f.attrs.get("status") != a.status:
            bad.append(f"status is {f.attrs.get('status')!r}, expected {a.status!r}")
        for grp, cols in (("scaling", SCALING), ("steps", STEPS), ("ranks", RANKS)):
            if grp not in f:
                bad.append(f"missing group /{grp}")
                continue
            lengths = {name: f[grp][name].shape for name in f[grp]}
            for c in cols:
                if c not in lengths:
                    bad.append(f"/{grp} lacks column {c}")
            if any(len(s) != 1 for s in lengths.values()) or len({s for s in lengths.values()}) > 1:
                bad.append(f"/{grp} columns are not equal-length 1-D: {lengths}")
        check_values(f, bad)
        if a.ranks is not None and "scaling" in f:
            want = [int(x) for x in a.ranks.split(",")]
            got = f["scaling/ranks"][()].tolist()
            if got != want:
                bad.append(f"/scaling/ranks is {got}, expected {want}")
            eff = f["scaling/efficiency"][()]
            spd = f["scaling/speedup"][()]
            if len(eff) and (abs(eff[0] - 1) > 1e-12 or abs(spd[0] - 1) > 1e-12):
                bad.append("the 1-rank row must have speedup and efficiency 1")
            # efficiency = T1 / (N * TN) from the epoch times, as printed
            t = f["scaling/epoch_time_s"][()]
            n = f["scaling/ranks"][()]
            if len(t) and not np.allclose(eff, t[0] / (n * t), rtol=1e-9):
                bad.append("efficiency is not T1 / (N * TN)")
            if np.any(f["scaling/img_per_s"][()] <= 0):
                bad.append("a scaling row has no throughput")
        if a.val_images is not None:
            t1, t5 = f.attrs.get("top1"), f.attrs.get("top5")
            n = f.attrs.get("val_images")
            print(f"# eval: top-1 {t1}, top-5 {t5} over {n} images")
            if t1 is None or t5 is None or not (0 <= t1 <= t5 <= 1):
                bad.append(f"top1/top5 missing or inconsistent: {t1}, {t5}")
            if n != a.val_images:
                bad.append(f"evaluation counted {n} images, the validation set has {a.val_images}")
        if a.timeline_steps is not None:
            for grp in ("grad_ready", "buckets"):
                got = sorted(set(f[grp]["steps"][()].tolist())) if grp in f and "steps" in f[grp] else []
                if got != [a.timeline_steps]:
                    bad.append(f"/{grp}/steps is {got}, expected [{a.timeline_steps}] (the timed steps alone)")
        if a.cpu_budget:
            cores, loader = f.attrs.get("cpu_cores_per_rank"), f.attrs.get("loader_cores_per_rank")
            per_core = f.attrs.get("img_per_s_per_core")
            if cores is None or loader is None or per_core is None:
                bad.append("the CPU budget attributes (cpu_cores_per_rank, loader_cores_per_rank, img_per_s_per_core) "
                           "are missing")
            elif not (cores > 0 and 0 <= loader <= cores + 0.05 and per_core > 0):
                bad.append(f"CPU budget: {cores} cores per rank, {loader} of them the loader's, {per_core} img/s per "
                           f"core")
        if a.loss_falls is not None:
            loss = f["steps/loss"][()]
            first, last = float(np.mean(loss[:3])), float(np.mean(loss[-3:]))
            print(f"# loss: first steps {first:.4f}, last steps {last:.4f}")
            if not last < a.loss_falls * first:
                bad.append(f"loss did not fall: {first:.4f} -> {last:.4f} (need < {a.loss_falls} x)")
    for b in bad:
        print("FAIL " + b)
    print(f"# check_results {a.path}: {len(bad)} problem(s)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
