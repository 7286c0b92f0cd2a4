#!/usr/bin/python3
"""check_results_mutants.py - check_results.py can fail: a good results file
passes it, and each copy of it with one contract-breaking change fails it
(a column that no longer means what its name says, a rank row missing, a
status outside complete/aborted, steps out of order).

  check_results_mutants.py GOOD.h5 --ranks 1,2,3
Exit 0 when the good file passes and every mutant fails, 1 otherwise, 77
without h5py."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"SKIP: {e} (install python3-h5py)")
    sys.exit(77)

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_results.py")


def put(f, name, values):
    f[name].write_direct(np.ascontiguousarray(values, dtype=f[name].dtype))


def scale(name, factors):
    return lambda f: put(f, name, f[name][()] * factors(f[name].size))


MUTANTS = {
    "img_per_s_per_rank = img_per_s": lambda f: put(f, "scaling/img_per_s_per_rank", f["scaling/img_per_s"][()]),
    "speedup off by 10 % past the first row": scale("scaling/speedup", lambda n: np.r_[1.0, [1.1] * (n - 1)]),
    "global_batch = per-rank batch":
        lambda f: put(f, "scaling/global_batch", f["scaling/global_batch"][()] // f["scaling/ranks"][()]),
    "epoch_time_s halved": scale("scaling/epoch_time_s", lambda n: 0.5),
    "every /ranks row says rank 0": lambda f: put(f, "ranks/rank", np.zeros(f["ranks/rank"].shape)),
    "status 'running'": lambda f: f.attrs.__setitem__("status", "running"),
    "/steps/step skips": scale("steps/step", lambda n: 2),
    "busbw on the 1-rank row":
        lambda f: put(f, "scaling/allreduce_busbw_GBps", f["scaling/allreduce_busbw_GBps"][()] + 1),
    "device_util_pct above 100": lambda f: put(f, "scaling/device_util_pct", f["scaling/device_util_pct"][()] + 150),
    # consistent with each other, not with the measured step times
    "img/s x2 with per-rank, speedup and epoch time to match": lambda f: (
        scale("scaling/img_per_s", lambda n: 2.0)(f), scale("scaling/img_per_s_per_rank", lambda n: 2.0)(f),
        scale("scaling/epoch_time_s", lambda n: 0.5)(f)),
    "comm_share_pct x10 (under 100)": lambda f: put(f, "scaling/comm_share_pct",
                                                    np.minimum(f["scaling/comm_share_pct"][()] * 10 + 5, 99)),
}


def verdict(path, ranks):
    r = subprocess.run([sys.executable, CHECK, path, "--ranks", ranks], capture_output=True, text=True)
    return r.returncode, (r.stdout + r.stderr).strip().splitlines()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("good")
    ap.add_argument("--ranks", required=True)
    a = ap.parse_args()
    rc, lines = verdict(a.good, a.ranks)
    bad = [] if rc == 0 else [f"the good file fails check_results: {lines[-3:]}"]
    print(("ok   " if rc == 0 else "FAIL ") + f"{a.good} passes check_results")
    with tempfile.TemporaryDirectory() as d:
        for what, change in MUTANTS.items():
            path = os.path.join(d, "mutant.h5")
            shutil.copy(a.good, path)
            with h5py.File(path, "r+") as f:
                change(f)
            rc, lines = verdict(path, a.ranks)
            said = [ln for ln in lines if ln.startswith("FAIL")]
            ok = rc == 1 and said
            print(("ok   " if ok else "FAIL ") + f"{what}: check_results exit {rc}" + (f" ({said[0]})" if said else ""))
            if not ok:
                bad.append(what)
    print(f"# check_results_mutants: {len(bad)} problem(s)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
