#!/usr/bin/python3
"""plot_odd_inputs.py - bench/plot_results.py on input it did not expect,
each case a defect once:

  stems      two files of one name from two folders wrote one
             run_breakdown.png, the second over the first: now one each,
             named by folder (or by --label)
  nokey      /scaling without its ranks column: a KeyError traceback; now
             left out in one line, the other plots drawn
  nonfinite  an efficiency of inf, an img/s of nan: 'Axis limits cannot be
             NaN or Inf'; now those points are left out
  kinds      an allreduce-bench, probe or loader-feed file: lines about
             /scaling, /ranks and /steps; now one line that the kind has no
             plot here
  nophase    /ranks without phase or step_ms columns (and no /scaling):
             an IndexError traceback; now one line, no breakdown plot
  title      the breakdown of a run without /scaling rows was titled
             '/scaling has no per-phase columns'

  plot_odd_inputs.py --plot bench/plot_results.py --trainbench BIN --source DIR RUN.h5
Exit 0 when every check holds, 1 otherwise, 77 without h5py or matplotlib."""
import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import h5py
    import matplotlib  # noqa: F401 (the script's own need)
    import numpy as np
except ImportError as e:
    print(f"SKIP: {e} (install python3-h5py python3-matplotlib)")
    sys.exit(77)

BAD = []


def fail(msg):
    BAD.append(msg)
    print("FAIL " + msg)


def plot(script, args, out):
    p = subprocess.run([sys.executable, script, *args, "--out", out], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout, sorted(os.listdir(out)) if os.path.isdir(out) else []


def copy_edit(src, dst, edit):
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copy(src, dst)
    with h5py.File(dst, "a") as f:
        edit(f)
    return dst


def check(name, rc, text, got, want_rc, want_files, want_lines=(), unwanted=()):
    if rc != want_rc:
        fail(f"{name}: exit {rc}, want {want_rc}\n{text}")
    if want_files is not None and got != sorted(want_files):
        fail(f"{name}: wrote {got}, want {sorted(want_files)}\n{text}")
    for w in want_lines:
        if w not in text:
            fail(f"{name}: no line with {w!r}\n{text}")
    for u in unwanted:
        if u in text:
            fail(f"{name}: {u!r} in the output\n{text}")
    if "Traceback" in text:
        fail(f"{name}: a traceback\n{text}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run", help="a training run's results file with /scaling rows")
    ap.add_argument("--plot", required=True)
    ap.add_argument("--trainbench", required=True)
    ap.add_argument("--source", required=True, help="the repository (results/ files)")
    a = ap.parse_args()
    d = tempfile.mkdtemp()
    try:
        cases(a, d)
    finally:
        shutil.rmtree(d)
    print(f"# plot_odd_inputs: {len(BAD)} problem(s)")
    sys.exit(1 if BAD else 0)


def cases(a, d):
    run = a.run
    # stems: x/run.h5 and y/run.h5
    x = copy_edit(run, os.path.join(d, "x", "run.h5"), lambda f: None)
    y = copy_edit(run, os.path.join(d, "y", "run.h5"), lambda f: None)
    rc, text, got = plot(a.plot, [x, y], os.path.join(d, "o1"))
    check("stems", rc, text, got, 0, ["compare_throughput.png", "compare_efficiency.png", "compare_loss.png",
                                      "x_run_breakdown.png", "y_run_breakdown.png"])
    rc, text, got = plot(a.plot, [x, y, "--label", "h100", "--label", "h200"], os.path.join(d, "o2"))
    check("stems --label", rc, text, got, 0, ["compare_throughput.png", "compare_efficiency.png",
                                              "compare_loss.png", "h100_breakdown.png", "h200_breakdown.png"])

    # nokey: /scaling without ranks
    nokey = copy_edit(run, os.path.join(d, "nokey.h5"), lambda f: f.__delitem__("scaling/ranks"))
    rc, text, got = plot(a.plot, [nokey], os.path.join(d, "o3"))
    check("nokey", rc, text, got, 0, ["nokey_breakdown.png", "nokey_loss.png"],
          [f"{nokey}: /scaling has no ranks column: left out as if absent"])

    # nonfinite: inf efficiency, nan img/s
    def nonfinite(f):
        f["scaling/efficiency"][-1] = np.inf
        f["scaling/img_per_s"][0] = np.nan
    nf = copy_edit(run, os.path.join(d, "nf.h5"), nonfinite)
    n = len(h5py.File(run, "r")["scaling/ranks"])
    rc, text, got = plot(a.plot, [nf], os.path.join(d, "o4"))
    want = ["nf_breakdown.png", "nf_loss.png"] + (["nf_throughput.png", "nf_efficiency.png"] if n > 1 else [])
    check("nonfinite", rc, text, got, 0, want, ["of nan or inf left out of the plot"])

    # kinds: files of commands that plot_results.py does not draw
    ar = os.path.join(d, "ar.h5")
    subprocess.run([a.trainbench, "allreduce-bench", "-b", "8", "-e", "16", "-n", "1", "-w", "0", "--results", ar],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with h5py.File(os.path.join(d, "probe.h5"), "w") as f:
        f.attrs["status"] = "complete"
        f.attrs["kind"] = "probe"
        f.create_group("probe")["gemm_gflops"] = np.array([1.0, 2.0])
    feed = os.path.join(a.source, "results", "gpu_h100_2026-11-27", "feed_trainbench.h5")
    for name, path in (("allreduce-bench", ar), ("probe", os.path.join(d, "probe.h5")), ("loader-feed", feed)):
        rc, text, got = plot(a.plot, [path], os.path.join(d, f"o_{name}"))
        check(f"kinds {name}", rc, text, got, 1, [], [f"{path}: kind '{name}' (", "has no plot of its kind"],
              ["/scaling", "/ranks", "/steps"])

    # nophase: no /scaling, /ranks with its rank and steps columns only
    def nophase(f):
        del f["scaling"]
        for k in list(f["ranks"].keys()):
            if k not in ("rank", "steps"):
                del f["ranks"][k]
    npf = copy_edit(run, os.path.join(d, "nophase.h5"), nophase)
    rc, text, got = plot(a.plot, [npf], os.path.join(d, "o5"))
    check("nophase", rc, text, got, 0, None, [f"{npf}: /ranks has no phase or step_ms columns: no breakdown plot"])

    # title: a run without /scaling rows names that, not missing per-phase columns
    spec = importlib.util.spec_from_file_location("plot_results", a.plot)
    pr = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pr)
    titles = []
    pr.save = lambda fig, out, name, written: titles.append(fig.axes[0].get_title())
    noscale = copy_edit(run, os.path.join(d, "noscale.h5"), lambda f: f.__delitem__("scaling"))
    pr.plot_breakdown(pr.Run(noscale, None), d, [])
    if len(titles) != 1 or "(no /scaling rows)" not in titles[0]:
        fail(f"title: the breakdown of a run without /scaling rows is titled {titles}")


if __name__ == "__main__":
    main()
